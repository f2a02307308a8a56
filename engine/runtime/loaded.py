"""A loaded model: what a backend's loader gives (:mod:`engine.runtime.load`) and every decoder
reads, the runtime it holds, and what a load asks for."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, Union

from engine.runtime.backends import BackendOptions
from engine.runtime.protocol import LocalRuntime, RemoteRuntime, is_local
from engine.runtime.sources import DEFAULT_MODEL, Progress

if TYPE_CHECKING:  # it imports torch
    from engine.runtime.session import Session


class GivesSelector(Protocol):
    """What every runtime a model holds does besides its kind's protocol (engine.runtime.protocol)."""

    def with_selector(self, loaded: LoadedModel, folder: Path, progress: Progress | None) -> LoadedModel | None:
        """The program-mode model: ``loaded`` with the span-selector adapter in ``folder``
        (``LoadedModel.selector`` set), or None where this runtime cannot give one (the base model)."""


class LocalModelRuntime(LocalRuntime, GivesSelector, Protocol):
    """An in-process runtime, as a model holds it."""


class RemoteModelRuntime(RemoteRuntime, GivesSelector, Protocol):
    """A server's runtime, as a model holds it."""


ModelRuntime = Union[LocalModelRuntime, RemoteModelRuntime]


@dataclass
class LoadedModel:
    """A causal LM with its tokenizer and the backend that runs it (``runtime``, see
    :mod:`engine.runtime.backends`). Shared, read-only after loading. ``model`` is the torch module on the
    transformers backend (training and adapter merging need it) and None elsewhere."""

    name: str
    model: Any
    tokenizer: Any
    device: str
    dtype: Any
    runtime: ModelRuntime
    selector: str | None = None  # path of the span-selector adapter applied to this model, if any

    @property
    def backend(self) -> str:
        return str(self.runtime.backend)

    @property
    def vocab_size(self) -> int:
        return int(self.runtime.vocab_size)

    def session(self) -> Session:
        """A fresh :class:`engine.runtime.session.Session` (KV cache) on this model's backend; its first
        append may reuse the KV of an earlier session's prompt (:mod:`engine.runtime.prefix_cache`)."""
        runtime = self.runtime
        if not is_local(runtime):
            raise TypeError(f"{self.name}: a remote runtime has no sessions")
        return runtime.session()

    def close(self) -> None:
        """Give back what the runtime holds beyond the weights (kept prompt caches, llama.cpp
        contexts and adapters) and save its learned costs."""
        self.runtime.close()


@dataclass(frozen=True)
class LoadRequest:
    """What a backend's loader is asked for: a model name (engine.runtime.sources), where and how
    to run it (``device``/``dtype``: the transformers backend's; None: chosen), whether the model
    may run its own code (a user-level setting only) and the backend's options."""

    name: str = DEFAULT_MODEL
    device: str | None = None
    dtype: str | None = None
    progress: Progress | None = None
    trust_remote_code: bool = False
    options: BackendOptions = field(default_factory=BackendOptions)
