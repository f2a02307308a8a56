"""What the engine may ask of a backend's runtime (:mod:`engine.runtime.backends`), as two protocols.

An in-process runtime (:class:`LocalRuntime`: transformers, llama.cpp) opens sessions, KV caches
that return logits, so every decoder runs on it. A remote one (:class:`RemoteRuntime`: a vLLM
server) returns tokens, not logits: program mode there is a client loop of grammar-constrained
segments (engine.decoding.remote_decode). Each runtime declares which it is (``gives_logits``);
:func:`is_local` reads it once, for the decoding layer's strategies (engine.decoding.strategies).

Everything else decoding, the API, the HTTP server and ``doctor`` need to know is declared on
:class:`Runtime` and answered by each kind (engine.runtime.kinds), so no caller outside this
package asks which backend it holds: whether edits must queue for it, its prompt cache, its
kernel warm-up, its context, the localizer's prompt log-likelihoods, what a verify setting
means on it and a short timing of its forwards. How it gives the program-mode model is declared
with the model it gives (engine.runtime.loaded), which holds a runtime: that keeps this module
free of it.
"""

from __future__ import annotations

from typing import (
    TYPE_CHECKING,
    Callable,
    ContextManager,
    Iterator,
    Mapping,
    Protocol,
    Sequence,
    TypeGuard,
    Union,
)

from engine.core.choices import Verify
from engine.runtime.cost import CostModel
from engine.runtime.probe import Probe

if TYPE_CHECKING:  # it imports torch
    from engine.runtime.session import ForwardLog, Session

JsonValue = Union[str, int, float, bool, None, Sequence["JsonValue"], Mapping[str, "JsonValue"]]
"""What a request body to a server may hold."""


class Runtime(Protocol):
    """What both kinds have.

    ``gives_logits``: its forwards give logits (sessions), so the engine's own decode loops,
    drafts and per-forward measurements run on it; a server returns tokens. ``concurrent``: it
    batches concurrent edits itself (a server), so edits need not queue for it.
    ``read_ahead_answers``: an idle buffer's answer may be decoded ahead (not on a shared server,
    which would spend it on answers nobody may ask for: only the prompt is read ahead there).
    ``keeps_prompts``: earlier prompts are kept for reuse (the localizer then keeps its results
    too)."""

    backend: str
    gives_logits: bool
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

    def prompt_nll(self, ids: list[int], positions: Sequence[int], marks: Sequence[int],
                   cancelled: Callable[[], bool]) -> tuple[dict[int, float], int]:
        """The negative log-likelihood of the prompt token at each of ``positions`` given the
        ones before it, and the forwards (or requests) that took; ``marks``: where an in-process
        prefill cuts its chunks too. Raises engine.core.errors.Cancelled once ``cancelled``."""

    def verify_room(self, verify: Verify, most: int) -> tuple[str, int] | None:
        """The rule a ``verify`` setting means here (engine.core.choices.Verify) and the most
        drafted tokens, up to ``most``, one verify may carry; None where the server checks drafts."""

    def probe(self) -> Probe | None:
        """A short timing of this runtime's forwards (engine.runtime.probe); None on a server,
        whose forwards run out of sight."""

    def meter(self) -> ContextManager[ForwardLog]: ...

    def close(self) -> None:
        """Give back what it holds beyond the weights, and save what it learned."""


class LocalRuntime(Runtime, Protocol):
    """An in-process backend: sessions with logits, a cost model that sizes drafts and the
    backend's own prompt-lookup drafting (``pld``)."""

    cost: CostModel

    def session(self) -> Session: ...

    def prompt_lookup(self, prompt_ids: Sequence[int], max_new_tokens: int, stop_ids: Sequence[int],
                      finished: Callable[[list[int]], bool], pad_id: int | None) -> list[int]: ...


class RemoteRuntime(Runtime, Protocol):
    """A server that streams completions of token-id prompts."""

    @property
    def address(self) -> str:
        """Where the server is, as messages name it (scheme, host, port and path; never the key)."""

    def stream_completion(self, prompt_ids: list[int], max_tokens: int, cancelled: Callable[[], bool],
                          **extra: JsonValue) -> Iterator[tuple[list[int], str | None]]: ...


AnyRuntime = Union[LocalRuntime, RemoteRuntime]


def is_local(runtime: AnyRuntime) -> TypeGuard[LocalRuntime]:
    """Does ``runtime`` run in this process (sessions with logits), or is it a server?"""
    return runtime.gives_logits
