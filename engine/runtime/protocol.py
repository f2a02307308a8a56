"""What the engine may ask of a backend's runtime (:mod:`engine.runtime.backends`), as two protocols.

An in-process runtime (:class:`LocalRuntime`: transformers, llama.cpp) opens sessions, KV caches
that return logits, so every decoder runs on it. A remote one (:class:`RemoteRuntime`: a vLLM
server) returns tokens, not logits: program mode there is a client loop of grammar-constrained
segments (engine.decoding.remote_decode). Which one a model has is read once, by :func:`is_local`;
the decoding layer keys its strategies on it (engine.decoding.strategies).

Everything else decoding, the API and the HTTP server need to know is declared on :class:`Runtime`
and answered by each kind (engine.runtime.kinds), so no caller outside this package asks which
backend it holds: whether edits must queue for it, its prompt cache, its kernel warm-up, its
context, how it gives the program-mode model and the localizer's prompt log-likelihoods.
"""

from __future__ import annotations

from pathlib import Path
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    ContextManager,
    Iterator,
    Protocol,
    Sequence,
    TypeGuard,
    Union,
    runtime_checkable,
)

if TYPE_CHECKING:
    from engine.runtime.session import ForwardLog, Session


class Runtime(Protocol):
    """What both kinds have.

    ``concurrent``: it batches concurrent edits itself (a server), so edits need not queue for
    it. ``read_ahead_answers``: an idle buffer's answer may be decoded ahead (not on a shared
    server, which would spend it on answers nobody may ask for: only the prompt is read ahead
    there). ``keeps_prompts``: earlier prompts are kept for reuse (the localizer then keeps its
    results too)."""

    backend: str
    concurrent: bool
    read_ahead_answers: bool

    @property
    def vocab_size(self) -> int: ...

    @property
    def keeps_prompts(self) -> bool: ...

    def eos_ids(self) -> set[int]: ...

    def describe(self) -> str:
        """The runtime in words, for messages and benchmark records."""

    def facts(self) -> dict[str, str]:
        """What ``copy-as-decode doctor`` shows of this runtime, each with why: ``weights`` (where
        they were read from), ``threads`` and, where the backend has it, ``flash attention``."""

    def context_limit(self) -> int | None:
        """Tokens a prompt and its completion may hold together (None: unknown)."""

    def forget_prompts(self) -> None:
        """Drop the prompts kept from earlier edits, so the next edit runs as a first edit."""

    def prime(self) -> None:
        """Pay one-time costs (kernel selection, allocator growth) now, not in the first edit."""

    def with_selector(self, loaded: Any, folder: Path, progress: Callable[[str], None] | None) -> Any:
        """The program-mode model: ``loaded`` (an engine.runtime.models.LoadedModel, which imports
        this module) with the span-selector adapter in ``folder`` (``LoadedModel.selector`` set), or
        None where this runtime cannot give one (the base model)."""

    def prompt_nll(self, ids: list[int], positions: Sequence[int], marks: Sequence[int],
                   cancelled: Callable[[], bool]) -> tuple[dict[int, float], int]:
        """The negative log-likelihood of the prompt token at each of ``positions`` given the
        ones before it, and the forwards (or requests) that took; ``marks``: where an in-process
        prefill cuts its chunks too. Raises engine.core.errors.Cancelled once ``cancelled``."""

    def meter(self) -> ContextManager[ForwardLog]: ...

    def close(self) -> None:
        """Give back what it holds beyond the weights, and save what it learned."""


@runtime_checkable
class LocalRuntime(Runtime, Protocol):
    """An in-process backend: sessions with logits, a cost model that sizes drafts and the
    backend's own prompt-lookup drafting (``pld``)."""

    cost: Any  # an engine.runtime.cost.CostModel (which imports engine.runtime.models, and so this module)

    def session(self) -> Session: ...

    def prompt_lookup(self, prompt_ids: Sequence[int], max_new_tokens: int, stop_ids: Sequence[int],
                      finished: Callable[[list[int]], bool], pad_id: int | None) -> list[int]: ...


class RemoteRuntime(Runtime, Protocol):
    """A server that streams completions of token-id prompts (``client.display`` names it in errors)."""

    client: Any

    def stream_completion(self, prompt_ids: list[int], max_tokens: int, cancelled: Callable[[], bool],
                          **extra: Any) -> Iterator[tuple[list[int], str | None]]: ...


AnyRuntime = Union[LocalRuntime, RemoteRuntime]


def is_local(runtime: AnyRuntime) -> TypeGuard[LocalRuntime]:
    """Does ``runtime`` run in this process (sessions with logits), or is it a server?"""
    return isinstance(runtime, LocalRuntime)
