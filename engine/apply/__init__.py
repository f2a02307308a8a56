"""Apply: merge an update written elsewhere (a chat model's answer, an agent's edit) into its file.

The update is parsed into chunks between marker comments (:mod:`engine.apply.markers`,
:mod:`engine.apply.update`), re-indented to the file's style (:mod:`engine.apply.indent`) and aligned
with the file (:mod:`engine.apply.align`); the alignment is a program whose copies come from the
file (``<copy lines="i-j"/>``) and the update (``<copy update="a-b"/>``) with gens for glue
(:mod:`engine.apply.plan`), run as an edit's events by :mod:`engine.apply.job`.
"""
