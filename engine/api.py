"""The Python API for edits: one request in, a stream of events out (CLI, LSP and benchmarks use it).

    engine = Engine.load("default")                       # or a hub id / folder / .gguf
    for event in engine.stream(EditRequest(text, "Fix the bug")):
        ...                                               # EditStarted, OpResolved..., EditFinished
    result = engine.edit(EditRequest(text, "Fix the bug", mode="speculative"))

An ``Engine`` holds one loaded model (plus, for program mode, a copy with the span-selector
adapter merged in: ``selector``, and, loaded at the first apply the model writes, one with the
apply selector) and is safe to share; each request builds its own decoder
state. Edits of one engine run one at a time (a lock), since they share the model's device; on
a remote backend (vLLM) they run concurrently and the server batches them.

What writes a request's result is decided once, by :meth:`Engine.plan` (engine.dispatch): the
request (validated, its mode concrete) and its writer, read from the mode's traits
(engine.core.modes).
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterator

from engine.core.choices import Mode, never_cancelled
from engine.core.errors import EditError as EditError  # re-exported: the front doors catch it
from engine.core.languages import language_for as language_for  # re-exported: the front doors import it from here
from engine.apply.messages import unplaced_message as unplaced_message  # re-exported: the front doors word unplaced chunks
from engine.core.modes import AUTO, concrete, traits
from engine.decoding.events import EditFinished, EditResult, Event
from engine.decoding.line_endings import in_lf
from engine.dispatch import (EditPlan, ModelFree, finished, model_free_plan, model_writer, resolved,
                             until_cancelled)
from engine.decoding.request import EditRequest as EditRequest  # re-exported: the Python API
from engine.decoding.results import cancelled_result
from engine.read_ahead import ReadAhead
from engine.runtime.load import load_model
from engine.runtime.loaded import LoadedModel
from engine.runtime.sources import DEFAULT_MODEL, own_model
from engine.core.errors import ModelLoadError as ModelLoadError  # re-exported: Engine.load raises it
from engine.runtime.selector.adapter import load_selector, resolve_apply_selector
from engine.settings import DEFAULTS

LOCK_POLL_S = 0.05  # how often an edit waiting for the engine checks for a cancel or a read ahead

@dataclass
class Engine:
    """A loaded model plus the per-model decoding state (grammar compiler, vocabulary tables).

    ``selector_model`` is the program-mode model: the base model with a span-selector adapter
    merged into a copy (see :mod:`engine.runtime.selector.adapter`), or None to use ``loaded`` in every
    mode. Text modes always run on ``loaded``.
    """

    loaded: LoadedModel
    selector_model: LoadedModel | None = None
    apply_selector: Path | None = None  # the apply selector's folder (engine.runtime.selector.adapter)
    _apply_model: LoadedModel | None = field(default=None, repr=False)  # its copy, once an apply needed it
    # Whether the model decides where an apply's rules leave a choice (engine.apply.choice), for an
    # apply asked in ``auto``: a user's own model does (engine.runtime.sources.own_model), the
    # embedded one does not; an apply asked in ``aligner`` is always the rule's.
    chooses: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _ahead: ReadAhead = field(default_factory=ReadAhead, repr=False)  # the answer read ahead (engine.read_ahead)

    @classmethod
    def load(cls, model: str = DEFAULT_MODEL, device: str | None = None, dtype: str | None = None,
             progress: Callable[[str], None] | None = None, trust_remote_code: bool = False,
             selector: str = "auto", backend: str = "auto", options: Any = None) -> "Engine":
        """``selector``: ``auto`` (the shipped adapter with the embedded default model), ``none``
        (base model in program mode too) or an adapter folder. ``backend``/``options``: see
        :mod:`engine.runtime.backends` (``auto``: llama.cpp for a .gguf when installed, else transformers)."""
        loaded = load_model(model, device=device, dtype=dtype, progress=progress,
                            trust_remote_code=trust_remote_code, backend=backend, options=options)
        return cls(loaded, load_selector(loaded, selector, progress), resolve_apply_selector(selector, loaded.name),
                   chooses=own_model(model))

    def default_mode(self) -> Mode:
        """What ``mode="auto"`` runs for an edit on this engine (engine.core.modes.concrete):
        program mode when the model has a span selector, else speculative."""
        return self.resolve_mode(AUTO)

    def resolve_mode(self, mode: Mode, apply: bool = False, one_shot_lines: int | None = None) -> Mode:
        """``mode`` made concrete for this engine, for an edit or (``apply``) an apply
        (engine.core.modes.concrete; ``one_shot_lines``: the region's lines, from a process that
        makes one edit)."""
        return concrete(mode, apply=apply, selector=self.selector_model is not None, one_shot_lines=one_shot_lines)

    def model_for(self, mode: Mode) -> LoadedModel:
        """The model a mode decodes with: a mode that uses the span selector (program, forced) runs
        on its copy when there is one."""
        if traits(self.resolve_mode(mode)).uses_selector and self.selector_model is not None:
            return self.selector_model
        return self.loaded

    def model_for_request(self, request: EditRequest) -> LoadedModel:
        """The model ``request`` (mode resolved) decodes with: an apply's program runs on the apply
        selector's copy when there is one (merged at the first such apply), else as :meth:`model_for`."""
        if not (request.is_apply and traits(request.mode).uses_selector and self.apply_selector is not None):
            return self.model_for(request.mode)
        if self._apply_model is None:
            self._apply_model = self.loaded.runtime.with_selector(self.loaded, self.apply_selector, None)
        return self._apply_model or self.model_for(request.mode)

    @property
    def selector(self) -> str | None:
        """Folder of the span-selector adapter program mode uses (None: the base model)."""
        return self.selector_model.selector if self.selector_model is not None else None

    def models(self) -> list[LoadedModel]:
        """The base model, the selector's copy and the apply selector's (once loaded), each runtime
        once (they share it on vLLM)."""
        return list({id(m.runtime): m for m in (self.loaded, self.selector_model, self._apply_model)
                     if m is not None}.values())

    @property
    def concurrent(self) -> bool:
        """Whether program-mode edits may run side by side: its runtime batches them itself (a
        server), so they need not queue for this engine."""
        return self.model_for("program").runtime.concurrent

    def prime(self) -> None:
        """Build the decoding tables (the vocabulary's grammar info: about 1 s for a 49k
        vocabulary) and let each runtime pay its one-time costs (kernel selection, allocator
        growth: a few small forwards in process, nothing on a server), so they land in neither
        the first timed edit nor an editor's first AI fix; side-by-side timings and the language
        server's model loading call this."""
        from engine.decoding.tables import tables_for

        for loaded in self.models():
            tables_for(loaded).prime()
            loaded.runtime.prime()

    def forget_prompts(self) -> None:
        """Drop the prompts' KV, the localizer's results and an answer read ahead, kept from
        earlier edits (engine.runtime.prefix_cache, engine.read_ahead), so the next edit runs as a first edit: benchmarks and side-by-side
        timings call this before each measured edit, so that no mode reuses another's prompt.
        Within one edit reuse stays on, as users get it (the localizer's forward stands in for
        the program prompt's prefill)."""
        from engine.decoding.localize import forget_surprises

        self._ahead.clear()
        for loaded in self.models():
            loaded.runtime.forget_prompts()
            forget_surprises(loaded.runtime)

    @property
    def name(self) -> str:
        return self.loaded.name

    def close(self) -> None:
        """Give back what the backends hold beyond the weights (kept prompt caches, llama.cpp
        contexts, batches and adapters), after any running edit (the engine's lock)."""
        with self._lock:
            for loaded in self.models():
                loaded.close()

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """The engine to the caller alone, after any running edit or warm-up (the engine's lock):
        for forwards outside an edit, such as doctor's timing probe."""
        with self._lock:
            yield

    def stream(self, request: EditRequest, cancelled: Callable[[], bool] = never_cancelled) -> Iterator[Event]:
        """Events of one edit, as they happen. ``cancelled`` is polled before the edit starts,
        between the chunks of every prompt forward (the localizer's, a prefill) and before every
        decode step (on transformers also before each layer of every forward); once it returns
        True the edit stops within one chunk or step (there: one layer) with
        ``stop_reason == "cancelled"`` and ``output_text`` equal to the input (nothing half-done
        is returned). The request :meth:`read_ahead` decoded gets that answer (while it is being
        decoded, its events as they come); any other request stops a read ahead within one step."""
        request = self._resolved(request)
        reading = self._ahead.follow(request)
        if reading is not None:
            yield from self._followed(reading, request, cancelled)
            return
        yield from self._events(self._planned(request), cancelled, hold_lock=True)

    def plan(self, request: EditRequest) -> EditPlan:
        """What writes ``request``'s result, decided once: the request validated with its mode
        made concrete (:meth:`resolve_mode`), the model it decodes on and its writer. Raises
        :class:`EditError` for a request the engine refuses."""
        return self._planned(self._resolved(request))

    def _resolved(self, request: EditRequest) -> EditRequest:
        return resolved(request, self.selector_model is not None)

    def _planned(self, request: EditRequest) -> EditPlan:
        """The plan of ``request`` (resolved). Where an apply asked in ``auto`` meets a choice
        its rules leave and this engine's model :attr:`chooses`, the model decides it (asked in
        ``aligner``, the rule does: engine.dispatch.ModelFree.needs_choice), the aligner's merge run under the
        engine's lock as an edit is (on a server, which returns no likelihoods, the rule decides:
        engine.apply.job)."""
        chooser = self.loaded if self.chooses and ModelFree.needs_choice(request) else None
        modelless = model_free_plan(request, self.name, chooser)
        if modelless is not None:  # a choice is the model's: decided under the lock, as an edit runs
            return modelless if chooser is None else replace(modelless, model=chooser)
        loaded = self.model_for_request(request)
        return EditPlan(request, loaded, model_writer(loaded, request), loaded.name)

    def _events(self, plan: EditPlan, cancelled: Callable[[], bool], hold_lock: bool) -> Iterator[Event]:
        if plan.model is None:  # no model runs: nothing to wait for
            yield from plan.writer(plan.request, cancelled)
            return
        yield from in_lf(plan.request, lambda lf: self._decoded(plan, lf, cancelled, hold_lock))

    def _decoded(self, plan: EditPlan, request: EditRequest, cancelled: Callable[[], bool],
                 hold_lock: bool) -> Iterator[Event]:
        loaded = plan.model
        assert loaded is not None
        run = plan.writer
        if not hold_lock or loaded.runtime.concurrent:  # a server batches edits itself
            yield from until_cancelled(loaded.name, request, cancelled, run)
            return
        # Waiting for the engine: a read ahead that began meanwhile is told to stop, and a cancel
        # ends the wait (the edit then finishes as cancelled without touching the model).
        while not (acquired := self._lock.acquire(timeout=LOCK_POLL_S)):
            self._ahead.preempt()
            if cancelled():
                break
        try:
            yield from until_cancelled(loaded.name, request, cancelled, run)
        finally:
            if acquired:
                self._lock.release()

    def _followed(self, reading: Any, request: EditRequest, cancelled: Callable[[], bool]) -> Iterator[Event]:
        """The events of the answer read ahead for ``request`` (engine.read_ahead), as the reader
        makes them; a cancel leaves the reader to its own stop and ends this edit as cancelled."""
        started = time.perf_counter()
        for event in self._ahead.events(reading, cancelled):
            if event is None:
                yield EditFinished(cancelled_result(request, self.model_for(request.mode).name, 0,
                                                    time.perf_counter() - started))
                return
            if isinstance(event, EditFinished):
                r = event.result
                event = EditFinished(replace(r, timings={**r.timings, "total_s": round(time.perf_counter() - started, 6),
                                                         "read_ahead_s": r.timings.get("total_s", 0.0)}))
            yield event
        if reading.error is not None:
            raise reading.error

    def read_ahead(self, request: EditRequest, cancelled: Callable[[], bool] = never_cancelled,
                   max_tokens: int = DEFAULTS.editor.warm_up_max_tokens) -> Any:
        """Decode ``request``'s edit ahead of the request (an editor's idle buffer) and keep the
        answer (engine.read_ahead): :meth:`stream` of the same request then gives it at once. On a
        server (vLLM) only the prompt is read ahead (:meth:`warm_prompt`): decoding there would spend
        a shared server on answers nobody may ask for. Never waits: skipped while an edit runs, and
        for a prompt of over ``max_tokens`` tokens. Returns an engine.decoding.warm.WarmUp."""
        from engine.decoding.warm import WarmUp, first_prompt, warm_prompt

        request = self._resolved(request)
        loaded = self.model_for(request.mode)
        if not loaded.runtime.read_ahead_answers:  # a shared server: as Engine.warm_prompt there
            return warm_prompt(loaded, request, cancelled, max_tokens)
        if request.is_empty():
            return WarmUp("skipped", reason="the region is empty")
        if self._ahead.holds(request):
            return WarmUp("skipped", reason="its answer is kept already")
        size = len(first_prompt(loaded, request)[0])
        if size > max_tokens:
            return WarmUp("skipped", size, reason=f"the prompt has {size} tokens (warmUpMaxTokens {max_tokens})")
        if not self._lock.acquire(blocking=False):
            return WarmUp("skipped", reason="an edit is running")
        try:
            reading = self._ahead.begin(request, answer=True)
            result = None
            with loaded.runtime.meter() as log:
                try:
                    for event in self._events(self._planned(request),
                                              lambda: self._ahead.reader_cancelled(reading, cancelled),
                                              hold_lock=False):
                        self._ahead.add(reading, event)
                        if isinstance(event, EditFinished):
                            result = event.result
                except BaseException as exc:
                    self._ahead.end(reading, answered=False, error=exc)
                    raise
            answered = result is not None and result.stop_reason != "cancelled"
            self._ahead.end(reading, answered)
            return WarmUp("done" if answered else "cancelled", result.prompt_tokens if result else 0,
                          sum(log.sizes()), answered=answered)
        finally:
            self._lock.release()

    def warm_prompt(self, request: EditRequest, cancelled: Callable[[], bool] = never_cancelled,
                    max_tokens: int = DEFAULTS.editor.warm_up_max_tokens) -> Any:
        """Read the prompt ``request`` would read first, ahead of the edit (engine.decoding.warm):
        an editor's idle buffer. Never waits for the engine: skipped while an edit (or another
        warm-up) runs; an edit that arrives stops it within one prompt chunk. Returns an
        engine.decoding.warm.WarmUp."""
        from engine.decoding.warm import WarmUp, warm_prompt

        request = self._resolved(request)
        loaded = self.model_for(request.mode)
        if loaded.runtime.concurrent:  # a server runs requests side by side: nothing here to wait for or stop
            return warm_prompt(loaded, request, cancelled, max_tokens)
        if not self._lock.acquire(blocking=False):
            return WarmUp("skipped", reason="an edit is running")
        try:
            reading = self._ahead.begin(request, answer=False)
            try:
                return warm_prompt(loaded, request, lambda: self._ahead.reader_cancelled(reading, cancelled),
                                   max_tokens)
            finally:
                self._ahead.end(reading, answered=False)
        finally:
            self._lock.release()

    def edit(self, request: EditRequest, on_event: Callable[[Event], None] | None = None,
             cancelled: Callable[[], bool] = never_cancelled) -> EditResult:
        """Run an edit to the end and return its result (``on_event`` sees every event)."""
        return finished(self.stream(request, cancelled), on_event)
