"""The aligner's program as the draft of the model's (engine.decoding.program_decoder drafts
through it): the model verifies it in one forward per step and keeps what it would have written
itself, so the aligner proposes and the model decides.

While the program written so far is a prefix of the aligner's, the draft is the rest of it. Once
the model wrote something else, each new op is drafted from the aligner's first op that is still
allowed where the program stands (its copy starts after what each source has been copied to), so
a model that fixed one op takes the aligner's proposal back for the ones after it.
"""

from __future__ import annotations

import re
from typing import Sequence

from engine.decoding.drafter import DraftPiece, DraftText, ProgramDrafter, ProgramState
from engine.language.program import CopyLines, Program
from engine.runtime.cost import CostModel

_COPY = re.compile(r'<copy lines="(\d+)-(\d+)"/>')


class AlignedDrafter(ProgramDrafter):
    """Drafts ``program`` (the aligner's, over the virtual input of ``n_file`` file lines then the
    update's lines; ``line_ids``: that input's line tokens) under the edit drafter's cost sizing."""

    def __init__(self, program: Program, n_file: int, line_ids: Sequence[Sequence[int]],
                 cost: CostModel | None = None):
        super().__init__(line_ids, cost)
        self.target = program.serialize()
        self.n_file = n_file
        self.op_starts: list[tuple[int, CopyLines | None]] = []  # (offset of each op in target, the op if a copy)
        offset = len("<program>")
        for op in program.ops:
            self.op_starts.append((offset, op if isinstance(op, CopyLines) else None))
            offset += len(op.serialize())
        self.op_starts.append((offset, None))  # the end: "</program>"

    def _propose(self, state: ProgramState, limit: int) -> list[DraftPiece]:
        if self.target.startswith(state.text):
            return [DraftText(self.target[len(state.text):])] if len(state.text) < len(self.target) else []
        if state.in_gen or state.tag != "<":
            return []
        return self._resync(state.text)

    def _resync(self, written: str) -> list[DraftPiece]:
        """From an op boundary after the model left the aligner's program: the aligner's program
        from its first op still allowed here (each source's next copy starts after its last)."""
        file_next, update_next = 1, self.n_file + 1
        for match in _COPY.finditer(written):
            end = int(match.group(2))
            if end <= self.n_file:
                file_next = max(file_next, end + 1)
            else:
                update_next = max(update_next, end + 1)
        for offset, op in self.op_starts:
            if op is None:
                continue
            allowed = op.start >= (file_next if op.start <= self.n_file else update_next)
            if allowed:
                return [DraftText(self.target[offset + 1:])]
        return [DraftText(self.target[self.op_starts[-1][0] + 1:])]
