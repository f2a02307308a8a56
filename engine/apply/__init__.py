"""Apply: merge an update written elsewhere (a chat model's answer, an agent's edit) into its file.

The update's marker comments (:mod:`engine.apply.markers`) and indentation
(:mod:`engine.apply.indent`) are read and it is aligned with the file: definition by definition
where tree-sitter parses both (:mod:`engine.apply.structure`, :mod:`engine.apply.definitions`),
line by line elsewhere and between them (:mod:`engine.apply.align`); a chunk that fits nowhere is
named with what came nearest (:mod:`engine.apply.nearest`);
the alignment is a program whose copies come from the file (``<copy lines="i-j"/>``) and the update
(``<copy update="a-b"/>``) with gens for glue (:mod:`engine.apply.plan`). The aligner's program is
the merge, or the draft of the model's (:mod:`engine.apply.model`: windows of a large file,
:mod:`engine.apply.windows`; the prompt, :mod:`engine.apply.prompt`; the drafts,
:mod:`engine.apply.drafts`); :mod:`engine.apply.job` runs either as an edit's events.
"""
