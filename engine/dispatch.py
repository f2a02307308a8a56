"""What writes a request's result, decided once: an :class:`EditPlan` holds the request
(validated, its mode made concrete: engine.core.modes) and its writer, read from the mode's
traits: an empty region's answer, the aligner's merge (no model), or a model's writer (an edit's
decoding strategy, engine.decoding.run; an apply's, engine.apply.job, in process or on a server).
:meth:`engine.api.Engine.plan` plans with a model; :class:`ModelFree` answers what no model
writes without loading one (the CLI's ``apply``, an editor's first apply)."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from functools import partial
from typing import Callable, Iterator

from engine.core.choices import Mode, never_cancelled
from engine.core.errors import Cancelled, EditError
from engine.core.modes import AUTO, concrete, needs_model, traits
from engine.decoding.events import EditFinished, EditResult, EditStarted, Event
from engine.decoding.line_endings import in_lf
from engine.decoding.request import EditRequest
from engine.decoding.results import cancelled_result, empty_result
from engine.runtime.loaded import LoadedModel
from engine.runtime.sources import own_model

# What writes a plan's result: (the request, cancelled) -> its events (a model's writer is given the
# request's LF twin: engine.core.lines; a writer without a model sees the request itself).
Writer = Callable[[EditRequest, Callable[[], bool]], Iterator[Event]]


@dataclass(frozen=True)
class EditPlan:
    """What the engine decided for one request: ``request`` (validated, its mode concrete), the
    ``model`` that runs for it (None: no model runs: an empty region, or the aligner's merge
    without a choice; the aligner's merge with one names the model that decides it, so that it
    runs under the engine's lock) and the ``writer`` of its events; ``name`` is the model its
    result names."""

    request: EditRequest
    model: LoadedModel | None
    writer: Writer
    name: str


def model_free_plan(request: EditRequest, name: str, chooser: LoadedModel | None = None) -> EditPlan | None:
    """The plan of a request (validated, its mode concrete) that no model writes, or None: an
    empty region answers at once (an apply into an empty file writes the update), and an apply in
    a mode that needs no model is the aligner's merge (``chooser``: the model that decides where
    its rules leave a choice; None: the rule decides)."""
    if request.is_empty() and not request.is_apply:
        return EditPlan(request, None, partial(_empty_region, name), name)
    if not traits(request.mode).needs_model:
        return EditPlan(request, None, partial(_aligned, name, chooser), name)
    return None


def _empty_region(name: str, request: EditRequest, cancelled: Callable[[], bool]) -> Iterator[Event]:
    yield EditStarted(mode=request.mode, model=name, input_lines=0, prompt_tokens=0)
    yield EditFinished(empty_result(request, name))


def _aligned(name: str, chooser: LoadedModel | None, request: EditRequest,
             cancelled: Callable[[], bool]) -> Iterator[Event]:
    from engine.apply.job import aligned  # lazy, like the decoders

    return in_lf(request, lambda lf: until_cancelled(name, lf, cancelled, partial(aligned, name, chooser=chooser)))


def until_cancelled(name: str, request: EditRequest, cancelled: Callable[[], bool],
                    write: Writer) -> Iterator[Event]:
    """``write``'s events, ended at once by a cancel that comes before it starts (an edit that
    waited for the engine) or while a forward runs (the localizer's, a prefill, a choice's
    scoring: they raise Cancelled between chunks): the edit then finishes as ``cancelled`` with
    the document as it was, like one cancelled between decode steps. ``name``: the model's."""
    started = time.perf_counter()
    prompt_tokens = 0
    try:
        if cancelled():
            raise Cancelled("cancelled before the edit started")
        for event in write(request, cancelled):
            if isinstance(event, EditStarted):
                prompt_tokens = event.prompt_tokens
            yield event
    except Cancelled:
        yield EditFinished(cancelled_result(request, name, prompt_tokens, time.perf_counter() - started))


def model_writer(loaded: LoadedModel, request: EditRequest) -> Writer:
    """What writes ``request`` (validated, its mode concrete) on ``loaded``: an apply, its mode's
    writer for that kind of runtime (engine.apply.job.APPLY_WRITERS); an edit, its mode's decoding
    strategy (engine.decoding.run). Imported here, once a model is loaded: the decoders load
    torch, and the language server imports this module long before a model loads."""
    if request.is_apply:
        from engine.apply.job import apply_writer

        return partial(apply_writer(request.mode, loaded), loaded)
    from engine.decoding.run import run_edit

    return partial(run_edit, loaded)


def resolved(request: EditRequest, selector: bool) -> EditRequest:
    """``request`` validated, its mode made concrete (engine.core.modes.concrete; ``selector``:
    whether the engine's model has a span selector); an apply keeps the mode asked for
    (:attr:`EditRequest.asked`: who may decide its choice asks it). An edit keeps none, so that
    the same edit resolved at a door or in the engine is the same request (a read-ahead's answer
    is found by its request: engine.read_ahead)."""
    request.validate()
    mode = concrete(request.mode, apply=request.is_apply, selector=selector)
    if mode == request.mode:
        return request
    return replace(request, mode=mode, asked_mode=request.asked if request.is_apply else None)


class ModelFree:
    """The part of :class:`Engine` a front door uses, for the requests no model writes (an apply
    the aligner merges, an empty region), without a model loaded: the CLI's ``apply`` and an
    editor's first apply answer at once instead of after a model's load. ``name`` is the model
    its results name; where the aligner's rules leave a choice, the rule decides (a front door
    that should have the model decide loads an engine instead: :meth:`loads_for_choice`)."""

    concurrent = True  # no model to share: nothing waits for an edit slot

    def __init__(self, name: str = "aligner"):
        self.name = name

    @staticmethod
    def needs_choice(request: EditRequest) -> bool:
        """Whether the apply ``request`` is one no model writes, asked in ``auto`` (before the
        engine made it concrete: :attr:`EditRequest.asked`), and meets a choice that a model would
        decide (engine.apply.job.has_choice). An apply asked in ``aligner`` is the fixed rule's,
        choices included: no model is loaded or consulted for it."""
        if not request.is_apply or request.is_empty() or request.asked != AUTO \
                or needs_model(request.mode, apply=True):
            return False
        from engine.apply.job import has_choice  # lazy, like the decoders

        return has_choice(request)

    @staticmethod
    def loads_for_choice(model: str, request: EditRequest) -> bool:
        """Whether a front door answering the apply ``request`` without a model should load
        ``model`` to decide a choice: only for a user's own model (engine.runtime.sources.own_model),
        only in ``auto`` and only when the aligner's merge meets one (:meth:`needs_choice`). The loaded
        engine decides it under its lock (:meth:`engine.api.Engine.plan`), the same at every door."""
        return own_model(model) and ModelFree.needs_choice(request)

    def resolve_mode(self, mode: Mode, apply: bool = False) -> Mode:
        return concrete(mode, apply=apply, selector=False)

    def plan(self, request: EditRequest) -> EditPlan:
        """As :meth:`Engine.plan`; an :class:`EditError` for a request a model must write."""
        request = resolved(request, selector=False)
        plan = model_free_plan(request, self.name)
        if plan is None:
            raise EditError(f"a {request.mode} {'apply' if request.is_apply else 'edit'} needs a model: load one "
                            "(engine.api.Engine)")
        return plan

    def stream(self, request: EditRequest, cancelled: Callable[[], bool] = never_cancelled) -> Iterator[Event]:
        """The request's events, as :meth:`Engine.stream` gives them."""
        plan = self.plan(request)
        yield from plan.writer(plan.request, cancelled)

    def edit(self, request: EditRequest, cancelled: Callable[[], bool] = never_cancelled) -> EditResult:
        """The request's result (:meth:`stream`'s last event)."""
        return finished(self.stream(request, cancelled))


def finished(events: Iterator[Event], on_event: Callable[[Event], None] | None = None) -> EditResult:
    """The result of an edit's ``events``, run to the end (``on_event`` sees every event)."""
    result = None
    for event in events:
        if on_event is not None:
            on_event(event)
        if isinstance(event, EditFinished):
            result = event.result
    assert result is not None
    return result
