"""An alignment as a program: runs of file lines become ``<copy lines>``, runs of update lines
``<copy update>``, and a line that neither source holds verbatim a gen (an update line re-indented
to the file's style, or a line whose terminator had to change).

Terminators: a merged line that is not the last gets a ``\\n`` (a file's or update's last line
without one may land in the middle), and the merged file ends in a newline exactly when the file
does (an empty file: when the update does).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from engine.apply.align import Alignment
from engine.language.program import CopyLines, CopyUpdate, Gen, Op, Program


@dataclass(frozen=True)
class Step:
    """One op of the merged program and the text it writes."""

    op: Op
    text: str


def _line_text(alignment: Alignment, file: Sequence[str], source: str, index: int) -> str:
    return file[index] if source == "file" else alignment.update_lines[index]


def plan(alignment: Alignment, file: Sequence[str], update: Sequence[str]) -> list[Step]:
    """The program's steps for ``alignment`` of ``update`` into ``file`` (lines of each)."""
    items = alignment.lines
    ends_with_newline = (file[-1] if file else (update[-1] if update else "\n")).endswith("\n")
    steps: list[Step] = []
    # A run of verbatim lines of one source, following each other there, is one op: built
    # as a run (a file's thousands of kept lines are one copy, not thousands of steps joined).
    run_source, run_start, run_end, run_text = "", 0, 0, []  # type: ignore[var-annotated]

    def close() -> None:
        if run_source:
            op: Op = CopyLines(run_start + 1, run_end) if run_source == "file" else CopyUpdate(run_start + 1, run_end)
            steps.append(Step(op, "".join(run_text)))

    for k, (source, index) in enumerate(items):
        text = _line_text(alignment, file, source, index)
        last = k == len(items) - 1
        wanted = text if text.endswith("\n") else text + "\n"
        if last and not ends_with_newline:
            wanted = wanted[:-1]
        verbatim = wanted == text and (source == "file" or (source == "update" and text == update[index]))
        if verbatim and source == run_source and index == run_end:
            run_end += 1
            run_text.append(wanted)
            continue
        close()
        run_source = ""
        if verbatim:
            run_source, run_start, run_end, run_text = source, index, index + 1, [wanted]
        else:
            steps.append(Step(Gen(wanted), wanted))
    close()
    return _joined(steps)


def extended(prev: Op, op: Op) -> Op | None:
    """``prev`` and ``op`` as one op, when the second continues the first."""
    if isinstance(prev, Gen) and isinstance(op, Gen):
        return Gen(prev.text + op.text)
    if isinstance(prev, CopyLines) and isinstance(op, CopyLines) and prev.end + 1 == op.start:
        return CopyLines(prev.start, op.end)
    if isinstance(prev, CopyUpdate) and isinstance(op, CopyUpdate) and prev.end + 1 == op.start:
        return CopyUpdate(prev.start, op.end)
    return None


def joined(ops: Sequence[Op]) -> tuple[Op, ...]:
    """Neighbouring ops that continue each other as one."""
    out: list[Op] = []
    for op in ops:
        both = extended(out[-1], op) if out else None
        if both is not None:
            out[-1] = both
        else:
            out.append(op)
    return tuple(out)


def _joined(steps: list[Step]) -> list[Step]:
    out: list[Step] = []
    for step in steps:
        joined = extended(out[-1].op, step.op) if out else None
        if joined is not None:
            out[-1] = Step(joined, out[-1].text + step.text)
        else:
            out.append(step)
    return out


def program_of(steps: Sequence[Step]) -> Program:
    return Program(tuple(step.op for step in steps))
