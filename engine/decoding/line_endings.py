"""A CRLF buffer edited as its LF twin (engine.core.lines): the model sees the same prompt and
writes the same program whatever the buffer's line endings, and every event comes back in the
buffer's own."""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Iterator

from engine.core.lines import to_crlf, to_lf, uses_crlf
from engine.decoding.events import EditFinished, Event, OpResolved
from engine.decoding.request import EditRequest
from engine.language.program import Gen, Op, Program


def in_lf(request: EditRequest, events_of: Callable[[EditRequest], Iterator[Event]]) -> Iterator[Event]:
    """``events_of(request)``, a CRLF buffer edited as its LF twin and given back in CRLF
    (engine.core.lines): the model sees the same prompt and writes the same program."""
    if not uses_crlf(request.text):
        yield from events_of(request)
        return
    for event in events_of(as_lf(request)):
        yield in_crlf(event, request.text)


def as_lf(request: EditRequest) -> EditRequest:
    """The request on the text's LF twin (a forced program's gens too): what the model sees is
    the same whatever the buffer's line endings."""
    program = request.program
    if program is not None:
        program = Program(tuple(Gen(to_lf(op.text)) if isinstance(op, Gen) else op for op in program.ops))
    update = to_lf(request.update) if request.update is not None else None
    return replace(request, text=to_lf(request.text), program=program, update=update)


def _op_in_crlf(op: Op) -> Op:
    return Gen(to_crlf(op.text)) if isinstance(op, Gen) else op


def in_crlf(event: Event, original: str) -> Event:
    """An event of the LF twin's edit as the CRLF buffer's consumers see it: every text in CRLF
    (the same line numbers: only the terminators differ), the input text the buffer itself."""
    if isinstance(event, OpResolved):
        return replace(event, op=_op_in_crlf(event.op), text=to_crlf(event.text), resolved=to_crlf(event.resolved))
    if isinstance(event, EditFinished):
        r = event.result
        return EditFinished(replace(
            r, input_text=original, output_text=to_crlf(r.output_text),
            region_input=to_crlf(r.region_input), region_output=to_crlf(r.region_output),
            program=Program(tuple(_op_in_crlf(op) for op in r.program.ops)),
            unplaced=[replace(chunk, text=to_crlf(chunk.text)) for chunk in r.unplaced]))
    return event
