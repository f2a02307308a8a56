"""Answers read ahead: the AI fix of an editor's idle buffer, decoded before the user asks for it.

Why: once the prompt is read ahead (engine.decoding.warm), a first fix still waits for its
decode, its first copy's splice and its gen: a good part of a cold fix (docs/benchmarks.md, "In
an editor"). Decoding the fix itself while the user looks at the buffer leaves nothing to wait
for when the request is the one read ahead: the same request (document, region, focus, settings)
on the same engine decodes to the same answer, so the kept one is given.

One reading per engine at a time, and one kept answer. An edit for the request being read
*follows* it (its events stream as the reader makes them, and the reader's own stop, a
keystroke's, is ignored while anyone follows); an edit for any other request *preempts* it (the
reader stops within one prompt chunk or decode step, as a cancel does). The engine's lock is the
reader's, so an edit never runs beside one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from engine.decoding.events import Event
from engine.decoding.request import EditRequest


@dataclass
class Reading:
    """One read ahead. ``answer``: it decodes the edit (else it reads the prompt only, and no edit
    can follow it); ``events``: what the decode yielded so far; ``answered``: it ended with the
    edit's answer (not cancelled, no error)."""

    request: EditRequest
    answer: bool
    events: list[Event] = field(default_factory=list)
    done: bool = False
    answered: bool = False
    error: BaseException | None = None
    followers: int = 0
    stopping: bool = False  # its cancel check said stop: it ends without an answer
    preempted: bool = False  # an edit for another request waits for the engine


class ReadAhead:
    """The engine's reading ahead and its kept answer (see the module docstring)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._reading: Reading | None = None

    def begin(self, request: EditRequest, answer: bool) -> Reading:
        with self._cond:
            self._reading = Reading(request, answer)
            return self._reading

    def holds(self, request: EditRequest) -> bool:
        """Is ``request``'s answer kept, or being read?"""
        with self._cond:
            r = self._reading
            return r is not None and r.answer and r.request == request and (r.answered or not r.done)

    def reader_cancelled(self, reading: Reading, stop: Callable[[], bool]) -> bool:
        """The reader's cancel check: its own ``stop`` (a keystroke) while nobody follows, or a
        preempting edit. Once it says stop, the reading ends without an answer and none may follow."""
        with self._cond:
            if reading.preempted or (reading.followers == 0 and stop()):
                reading.stopping = True
            return reading.stopping

    def add(self, reading: Reading, event: Event) -> None:
        with self._cond:
            reading.events.append(event)
            self._cond.notify_all()

    def end(self, reading: Reading, answered: bool, error: BaseException | None = None) -> None:
        with self._cond:
            reading.done, reading.answered, reading.error = True, answered, error
            if not answered and self._reading is reading:
                self._reading = None
            self._cond.notify_all()

    def follow(self, request: EditRequest) -> Reading | None:
        """The reading an edit of ``request`` follows: its kept answer, or its running decode. Any
        other unfinished reading nobody follows is told to stop (the edit waits for the engine)."""
        with self._cond:
            r = self._reading
            if r is None:
                return None
            if r.answer and r.request == request and not (r.stopping or r.preempted):
                if r.done and not r.answered:
                    return None
                if not r.done:
                    r.followers += 1
                return r
            if not r.done and not r.followers:
                r.preempted = True
            return None

    def preempt(self) -> None:
        """An edit waits for the engine: an unfinished reading nobody follows stops."""
        with self._cond:
            r = self._reading
            if r is not None and not r.done and not r.followers:
                r.preempted = True

    def events(self, reading: Reading, cancelled: Callable[[], bool]) -> Iterator[Event | None]:
        """The reading's events as they come; a final None when ``cancelled`` fired before the end
        (the follower leaves; the reader's own stop applies again)."""
        following = not reading.done
        seen = 0
        try:
            while True:
                stopped = False
                with self._cond:
                    while True:
                        if cancelled():
                            stopped = True
                            break
                        if seen < len(reading.events) or reading.done:
                            break
                        self._cond.wait(0.05)
                    batch, done = reading.events[seen:], reading.done
                    seen = len(reading.events)
                if stopped:
                    yield None
                    return
                yield from batch
                if done:
                    return
        finally:
            if following:
                with self._cond:
                    reading.followers -= 1

    def clear(self) -> None:
        """Forget the kept answer (a running reading keeps running to its end, unkept)."""
        with self._cond:
            if self._reading is not None and self._reading.done:
                self._reading = None
