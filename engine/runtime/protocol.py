"""What a decoder may ask of a backend's runtime (:mod:`engine.runtime.backends`), as two protocols.

An in-process runtime (:class:`LocalRuntime`: transformers, llama.cpp) opens sessions, KV caches
that return logits, so every decoder runs on it. A remote one (:class:`RemoteRuntime`: a vLLM
server) returns tokens, not logits: program mode there is a client loop of grammar-constrained
segments (engine.decoding.remote_decode) and the localizer asks for the prompt's log-probabilities.
Which one a model has is read once, by :func:`is_local`; the decoding layer keys its strategies on
it (engine.decoding.strategies).
"""

from __future__ import annotations

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
    """What both kinds have: a name, the vocabulary's size and its end tokens."""

    backend: str

    @property
    def vocab_size(self) -> int: ...

    def eos_ids(self) -> set[int]: ...


@runtime_checkable
class LocalRuntime(Runtime, Protocol):
    """An in-process backend: sessions with logits, a cost model that sizes drafts, the
    backend's own prompt-lookup drafting (``pld``), forward counting, and what it holds to give back."""

    cost: Any  # an engine.runtime.cost.CostModel (which imports engine.runtime.models, and so this module)

    def session(self) -> Session: ...

    def describe(self) -> str: ...

    def meter(self) -> ContextManager[ForwardLog]: ...

    def prompt_lookup(self, prompt_ids: Sequence[int], max_new_tokens: int, stop_ids: Sequence[int],
                      finished: Callable[[list[int]], bool], pad_id: int | None) -> list[int]: ...

    def close(self) -> None: ...


class RemoteRuntime(Runtime, Protocol):
    """A server that streams completions of token-id prompts (``client.display`` names it in errors)."""

    client: Any

    def stream_completion(self, prompt_ids: list[int], max_tokens: int, cancelled: Callable[[], bool],
                          **extra: Any) -> Iterator[tuple[list[int], str | None]]: ...


AnyRuntime = Union[LocalRuntime, RemoteRuntime]


def is_local(runtime: AnyRuntime) -> TypeGuard[LocalRuntime]:
    """Does ``runtime`` run in this process (sessions with logits), or is it a server?"""
    return isinstance(runtime, LocalRuntime)
