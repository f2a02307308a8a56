"""Incremental reader of program text: reports each op the moment its text is complete.

The decoder feeds it the text the model (or the grammar's forced literals) wrote; it never
sees spliced content. The grammar guarantees the text is a valid program prefix, so the scanner
only has to find op boundaries, not to validate.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from engine.language.program import (
    GEN_CLOSE,
    GEN_OPEN,
    PROGRAM_CLOSE,
    PROGRAM_OPEN,
    CopyLines,
    CopyTokens,
    Gen,
    Op,
    unescape_body,
)

_COPY_TAG = re.compile(r'<copy (lines|tokens)="([0-9]+)-([0-9]+)"/>')


@dataclass
class ProgramScanner:
    in_gen: bool = False
    finished: bool = False
    tag: str = ""  # text of the op being written (outside gen bodies)
    body: str = ""  # raw (escaped) gen body being written
    text: str = ""  # all program text so far
    ops: list[Op] = field(default_factory=list)

    def snapshot(self) -> tuple:
        return (self.in_gen, self.finished, self.tag, self.body, self.text, len(self.ops))

    def restore(self, state: tuple) -> None:
        self.in_gen, self.finished, self.tag, self.body, self.text, n_ops = state
        del self.ops[n_ops:]

    def feed(self, text: str) -> list[Op]:
        """Consume ``text``; return the ops it completed, in order."""
        done: list[Op] = []
        for ch in text:
            self.text += ch
            if self.in_gen:
                self.body += ch
                if self.body.endswith(GEN_CLOSE):
                    done.append(Gen(unescape_body(self.body[: -len(GEN_CLOSE)])))
                    self.in_gen, self.body = False, ""
                continue
            self.tag += ch
            if self.tag == PROGRAM_OPEN:
                self.tag = ""
            elif self.tag == GEN_OPEN:
                self.in_gen, self.tag = True, ""
            elif self.tag == PROGRAM_CLOSE:
                self.finished, self.tag = True, ""
            elif self.tag.endswith("/>"):
                match = _COPY_TAG.fullmatch(self.tag)
                if match:
                    kind, a, b = match.group(1), int(match.group(2)), int(match.group(3))
                    done.append(CopyLines(a, b) if kind == "lines" else CopyTokens(a, b))
                    self.tag = ""
        self.ops.extend(done)
        return done

    def copy_close_offset(self, text: str) -> int | None:
        """If feeding ``text`` would close a copy tag, the offset just after its ``/>``."""
        if self.in_gen:
            return None
        tag = self.tag
        for i, ch in enumerate(text):
            tag += ch
            if tag == GEN_OPEN:
                return None
            if tag.endswith("/>") and _COPY_TAG.fullmatch(tag):
                return i + 1
        return None
