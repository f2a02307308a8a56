"""How each mode runs an edit, one strategy per mode and kind of runtime: what it checks and
prepares, the prompt it builds and the decoder it runs, and what of it may be read ahead of the
edit. :data:`STRATEGIES` is the one table: :func:`engine.decoding.run.run_edit` looks the edit's
strategy up and runs its steps in order; the warm-up (engine.decoding.warm) asks it for the
prompt the edit reads first and reads it.

The runtime's kind (:mod:`engine.runtime.protocol`) decides between a strategy's two forms: in
process, program and forced modes run :mod:`engine.decoding.program_decoder` on a session, the
text modes :mod:`engine.decoding.text_decoder`; on a server (vLLM), program mode runs the client
loop of :mod:`engine.decoding.remote_decode` and the text modes one streamed completion, while
forced mode and token copies need logits and are refused.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Callable, Iterator, NamedTuple, Protocol

from engine.core.errors import Cancelled, EditError
from engine.core.lines import split_lines
from engine.core.modes import modes_where, traits
from engine.core.tokens import encode, token_pieces
from engine.decoding.events import OpResolved
from engine.decoding.localize import FocusPlan, plan_focus, prompt_with_lines
from engine.decoding.outcome import DecodeOutcome
from engine.decoding.prompt import (
    PromptParts,
    focus_free_prefix,
    program_messages,
    render,
    selector_messages,
    text_messages,
)
from engine.decoding.remote_decode import RemoteProgramDecoder, decode_text_remote
from engine.decoding.tables import ModelTables, tables_for
from engine.decoding.text_decoder import decode_text
from engine.language.program import PROGRAM_OPENING, CopyTokens
from engine.runtime.loaded import LoadedModel
from engine.runtime.protocol import is_local
from engine.runtime.selector.adapter import prompt_layout
from engine.decoding.request import EditRequest

if TYPE_CHECKING:  # program mode's decoder is imported when it runs: the text modes never load torch
    from engine.decoding.program_decoder import FeedRecorder

Decoded = Iterator[OpResolved | DecodeOutcome]


@dataclass
class DecodeJob:
    """One edit on its way through a strategy (``request``: an engine.api.EditRequest, validated).
    ``parts`` is the prompt's content; the strategy's steps fill in the rest."""

    loaded: LoadedModel
    request: EditRequest
    tables: ModelTables
    region: str
    parts: PromptParts
    cancelled: Callable[[], bool]
    recorder: FeedRecorder | None = None
    focus: FocusPlan | None = None  # program mode: where the problem is (engine.decoding.localize)
    token_copies: bool = False
    prompt_ids: list[int] = field(default_factory=list)
    marks: list[int] = field(default_factory=list)  # where the prompt's prefill cuts its chunks too
    draft_source: str | None = None  # what speculative mode drafts from, when not the region (an apply's merge)

    @classmethod
    def start(cls, loaded: LoadedModel, request: EditRequest, parts: PromptParts, cancelled: Callable[[], bool],
              recorder: FeedRecorder | None = None) -> "DecodeJob":
        """A job with nothing filled in yet, on the model's decoding tables."""
        return cls(loaded, request, tables_for(loaded), parts.region, parts, cancelled, recorder)

    @property
    def n_lines(self) -> int:
        return len(split_lines(self.region))


class Warmed(NamedTuple):
    """What reading an edit's first prompt ahead did: ``forwarded`` tokens (0 when the cache held
    them; on a server, the prompt sent), and whether a cancel stopped it."""

    cancelled: bool
    forwarded: int


class Strategy(Protocol):
    """One mode on one kind of runtime."""

    def first_prompt(self, loaded: LoadedModel, request: EditRequest, parts: PromptParts) -> tuple[list[int], str]:
        """(ids, "") of the prompt the edit reads first, or ([], why nothing is read ahead)."""

    def warm(self, loaded: LoadedModel, request: EditRequest, parts: PromptParts, ids: list[int],
             cancelled: Callable[[], bool]) -> Warmed:
        """Read ``ids`` (:meth:`first_prompt`'s) ahead of the edit, so that the edit finds them read."""

    def prepare(self, job: DecodeJob) -> None:
        """Refuse what this runtime cannot run (EditError); start what may run meanwhile; plan."""

    def prompt(self, job: DecodeJob) -> None:
        """Set ``job.prompt_ids`` (and ``job.marks``)."""

    def decode(self, job: DecodeJob) -> Decoded:
        """The decoder's events, then its :class:`DecodeOutcome`."""


class ModeStrategies(NamedTuple):
    """A mode's strategy in process and on a server."""

    in_process: Strategy
    on_server: Strategy

    def on(self, loaded: LoadedModel) -> Strategy:
        return self.in_process if is_local(loaded.runtime) else self.on_server


def _sampling(request: EditRequest) -> dict:
    return {"temperature": request.temperature, "seed": request.seed} if request.temperature > 0 else {}


def _refuse_on_a_server(job: DecodeJob) -> None:
    runs = modes_where(needs_model=True, needs_logits=False)
    needs_logits = " and ".join(f"{m} mode" for m in modes_where(needs_logits=True))
    raise EditError(f"{job.loaded.runtime.describe()} runs {', '.join(runs[:-1])} and {runs[-1]} edits; "
                    f"{needs_logits} and token copies need an in-process backend (transformers or llamacpp)")


def _prefetch_grammar(job: DecodeJob) -> None:
    if not job.request.token_copies:
        job.tables.grammar.prefetch(job.n_lines)  # compiles while the forwards that follow run


def _plan_focus(job: DecodeJob) -> None:
    request = job.request
    job.focus = plan_focus(job.loaded, job.parts, localize=request.localize, noop=request.noop_deviation,
                           policy=request.focus_policy, cancelled=job.cancelled)
    job.parts = replace(job.parts, focus_line=job.focus.hint)


def _program_prompt(job: DecodeJob, mark_focus_free_prefix: bool) -> None:
    """The program prompt: the selector's short one when the model carries a span selector (or
    it is asked for), else the few-shot one. ``mark_focus_free_prefix``: cut the prefill where
    the localizer's forward, or a later edit's prompt, goes on differently."""
    loaded, parts = job.loaded, job.parts
    style = job.request.prompt_style
    if style == "auto":
        style = "selector" if loaded.selector else "few-shot"
    if style == "selector":
        layout = prompt_layout(loaded.selector)
        messages = selector_messages(parts, layout)
        if mark_focus_free_prefix:
            job.marks.append(focus_free_prefix(loaded.tokenizer, parts, layout))
    else:
        messages = program_messages(parts)
    job.prompt_ids = render(loaded.tokenizer, messages)


def _text_prompt(job: DecodeJob) -> None:
    job.prompt_ids = _text_ids(job.loaded, job.parts)


def _text_ids(loaded: LoadedModel, parts: PromptParts) -> list[int]:
    return render(loaded.tokenizer, text_messages(parts), assistant_prefix=parts.fence())


def _localizer_prompt(loaded: LoadedModel, request: EditRequest, parts: PromptParts) -> tuple[list[int], str]:
    """Program mode reads the localizer's prompt first (where the localizer runs no forward, the
    warm-up reads the edit's own prompt instead: LocalProgram.warm); where no localizer runs (no
    selector, one line, or ``localize`` off) nothing is read ahead."""
    if not (request.localize and loaded.selector and len(split_lines(parts.region)) >= 2):
        return [], "no localizer forward to read ahead"
    return prompt_with_lines(loaded.tokenizer, parts)[0], ""


def _text_first_prompt(mode: str, loaded: LoadedModel, parts: PromptParts) -> tuple[list[int], str]:
    """ar and speculative read their own prompt first; pld (the backend's own generation) nothing."""
    if not traits(mode).backend_generates:
        return _text_ids(loaded, parts), ""
    return [], f"{mode} mode reads no prompt ahead"


def _warm_in_process(loaded: LoadedModel, read: Callable[[], None]) -> Warmed:
    """``read`` under the runtime's meter: the tokens it forwarded, cancelled between two chunks or not."""
    with loaded.runtime.meter() as log:
        try:
            read()
        except Cancelled:
            return Warmed(True, sum(log.sizes()))
    return Warmed(False, sum(log.sizes()))


def _warm_on_server(strategy: Strategy, loaded: LoadedModel, request: EditRequest, parts: PromptParts,
                    cancelled: Callable[[], bool]) -> Warmed:
    """The edit's own first prompt sent ahead as a one-token completion, which leaves it in the
    server's prefix cache (program mode plans its focus first: the localizer's request, whose
    surprise is kept as in process)."""
    try:
        if cancelled():
            raise Cancelled("cancelled before the warm-up's requests")
        job = DecodeJob.start(loaded, request, parts, cancelled)
        strategy.prepare(job)
        strategy.prompt(job)
        for _ids, finish in loaded.runtime.stream_completion(list(job.prompt_ids), 1, cancelled):
            if finish is not None:
                break
    except Cancelled:
        return Warmed(True, 0)
    return Warmed(cancelled(), len(job.prompt_ids))


def _program_decoder(job: DecodeJob, teacher: bool) -> Decoded:
    from engine.decoding.program_decoder import decode_program  # imports torch

    request = job.request
    return decode_program(job.loaded, job.tables, job.region, job.prompt_ids, request.max_new_tokens, job.cancelled,
                          token_copies=job.token_copies, teacher_program=request.program if teacher else None,
                          temperature=request.temperature, seed=request.seed, logit_bias=request.logit_bias,
                          draft=request.draft, recorder=job.recorder, monotonic=request.monotonic and not teacher,
                          focus_line=job.focus.noop_line if job.focus is not None else None,
                          prompt_marks=job.marks)


class LocalProgram:
    """Program mode in process: the model's program under the grammar, drafted and spliced."""

    def first_prompt(self, loaded: LoadedModel, request: EditRequest, parts: PromptParts) -> tuple[list[int], str]:
        return _localizer_prompt(loaded, request, parts)

    def warm(self, loaded: LoadedModel, request: EditRequest, parts: PromptParts, ids: list[int],
             cancelled: Callable[[], bool]) -> Warmed:
        """The localizer's forward, as the edit runs it: its KV and its surprise are kept. Where
        it runs none (a small region, or an answer known without one), the edit's own prompt."""
        def read() -> None:
            plan = plan_focus(loaded, parts, localize=request.localize, noop=request.noop_deviation,
                              policy=request.focus_policy, cancelled=cancelled)
            if plan.scored:
                return
            job = DecodeJob.start(loaded, request, replace(parts, focus_line=plan.hint), cancelled)
            self.prompt(job)
            session = loaded.session()
            session.cancelled = cancelled
            try:
                # with the program's forced opening, as the decoder's prefill forwards it
                session.append(job.prompt_ids + encode(loaded.tokenizer, PROGRAM_OPENING), "prefill", marks=job.marks)
            finally:
                session.close()

        return _warm_in_process(loaded, read)

    def prepare(self, job: DecodeJob) -> None:
        _prefetch_grammar(job)
        _plan_focus(job)
        job.token_copies = job.request.token_copies

    def prompt(self, job: DecodeJob) -> None:
        # (forced mode, a benchmark, keeps one prefill forward: bench edits counts the forwards after it)
        _program_prompt(job, mark_focus_free_prefix=True)

    def decode(self, job: DecodeJob) -> Decoded:
        return _program_decoder(job, teacher=False)


class ReadsNothingAhead:
    """A mode whose edit reads no prompt worth reading ahead."""

    def first_prompt(self, loaded: LoadedModel, request: EditRequest, parts: PromptParts) -> tuple[list[int], str]:
        return [], f"{request.mode} mode reads no prompt ahead"

    def warm(self, loaded: LoadedModel, request: EditRequest, parts: PromptParts, ids: list[int],
             cancelled: Callable[[], bool]) -> Warmed:
        raise AssertionError("nothing to read ahead")


class Forced(ReadsNothingAhead):
    """Forced mode (in process only): the request's program decoded as if the model chose it."""

    def prepare(self, job: DecodeJob) -> None:
        _prefetch_grammar(job)
        request, tokenizer = job.request, job.loaded.tokenizer
        job.token_copies = request.token_copies or any(isinstance(op, CopyTokens) for op in request.program.ops)
        pieces = token_pieces(tokenizer, encode(tokenizer, job.region)) if job.token_copies else None
        from engine.decoding.program_decoder import check_program  # imports torch

        check_program(request.program, job.region, pieces)

    def prompt(self, job: DecodeJob) -> None:
        _program_prompt(job, mark_focus_free_prefix=False)

    def decode(self, job: DecodeJob) -> Decoded:
        return _program_decoder(job, teacher=True)


class RemoteProgram:
    """Program mode on a server: one grammar-constrained request per segment."""

    def first_prompt(self, loaded: LoadedModel, request: EditRequest, parts: PromptParts) -> tuple[list[int], str]:
        return _localizer_prompt(loaded, request, parts)

    def warm(self, loaded: LoadedModel, request: EditRequest, parts: PromptParts, ids: list[int],
             cancelled: Callable[[], bool]) -> Warmed:
        return _warm_on_server(self, loaded, request, parts, cancelled)

    def prepare(self, job: DecodeJob) -> None:
        if job.request.token_copies:
            _refuse_on_a_server(job)
        _plan_focus(job)

    def prompt(self, job: DecodeJob) -> None:
        _program_prompt(job, mark_focus_free_prefix=False)

    def decode(self, job: DecodeJob) -> Decoded:
        request = job.request
        return RemoteProgramDecoder(job.loaded, job.tables, job.region, job.prompt_ids, request.max_new_tokens,
                                    job.cancelled, monotonic=request.monotonic, sampling=_sampling(request)).run()


@dataclass(frozen=True)
class LocalText:
    """ar, speculative, pld in process: the region regenerated as text."""

    mode: str

    def first_prompt(self, loaded: LoadedModel, request: EditRequest, parts: PromptParts) -> tuple[list[int], str]:
        return _text_first_prompt(self.mode, loaded, parts)

    def warm(self, loaded: LoadedModel, request: EditRequest, parts: PromptParts, ids: list[int],
             cancelled: Callable[[], bool]) -> Warmed:
        """The prompt's prefill: its KV is kept for the edit."""
        def prefill() -> None:
            session = loaded.session()
            session.cancelled = cancelled
            try:
                session.append(ids, "prefill")
            finally:
                session.close()

        return _warm_in_process(loaded, prefill)

    def prepare(self, job: DecodeJob) -> None:
        pass

    def prompt(self, job: DecodeJob) -> None:
        _text_prompt(job)

    def decode(self, job: DecodeJob) -> Decoded:
        return decode_text(job.loaded, job.tables, job.region, job.prompt_ids, job.request.max_new_tokens,
                           job.cancelled, self.mode, job.request.verify, job.draft_source)


@dataclass(frozen=True)
class RemoteText:
    """ar, speculative, pld on a server: one streamed completion (the server drafts, if set up to)."""

    mode: str

    def first_prompt(self, loaded: LoadedModel, request: EditRequest, parts: PromptParts) -> tuple[list[int], str]:
        return _text_first_prompt(self.mode, loaded, parts)

    def warm(self, loaded: LoadedModel, request: EditRequest, parts: PromptParts, ids: list[int],
             cancelled: Callable[[], bool]) -> Warmed:
        return _warm_on_server(self, loaded, request, parts, cancelled)

    def prepare(self, job: DecodeJob) -> None:
        if job.request.token_copies:
            _refuse_on_a_server(job)

    def prompt(self, job: DecodeJob) -> None:
        _text_prompt(job)

    def decode(self, job: DecodeJob) -> Decoded:
        return decode_text_remote(job.loaded, job.tables, job.region, job.prompt_ids, job.request.max_new_tokens,
                                  job.cancelled, sampling=_sampling(job.request))


class InProcessOnly(ReadsNothingAhead):
    """A mode a server cannot run (it returns tokens, not logits)."""

    def prepare(self, job: DecodeJob) -> None:
        _refuse_on_a_server(job)

    def prompt(self, job: DecodeJob) -> None:
        raise AssertionError("refused in prepare")

    def decode(self, job: DecodeJob) -> Decoded:
        raise AssertionError("refused in prepare")


STRATEGIES: dict[str, ModeStrategies] = {
    "program": ModeStrategies(LocalProgram(), RemoteProgram()),
    "forced": ModeStrategies(Forced(), InProcessOnly()),
    **{mode: ModeStrategies(LocalText(mode), RemoteText(mode)) for mode in modes_where(writes_text=True)},
}
