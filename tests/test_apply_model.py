"""An apply decoded by the model (program mode): the program never copies a marker line, never
crosses from the file into the update, and drafting the aligner's program is lossless (the same
program as without drafts, in fewer forwards)."""

from __future__ import annotations

from engine.api import EditRequest
from engine.apply.markers import is_marker
from engine.language.program import CopyLines, CopyUpdate

FILE = "def f(x):\n    return x + 1\n\n\ndef g(y):\n    return y\n"
UPDATE = "# ... existing code ...\ndef g(y):\n    return y * 2\n"


def test_model_program_keeps_the_rules_and_drafts_are_lossless(default_engine) -> None:
    drafted = default_engine.edit(EditRequest(FILE, "", update=UPDATE, mode="program"))
    plain = default_engine.edit(EditRequest(FILE, "", update=UPDATE, mode="program", draft=False))
    assert drafted.program == plain.program and drafted.output_text == plain.output_text
    assert drafted.stop_reason == "done"
    markers = {j + 1 for j, line in enumerate(UPDATE.splitlines()) if is_marker(line)}
    n_file = len(FILE.splitlines())
    for op in drafted.program.ops:
        if isinstance(op, CopyUpdate):
            assert not markers & set(range(op.start, op.end + 1))
        if isinstance(op, CopyLines):
            assert op.end <= n_file
    assert drafted.summary()["unplaced"] == []
