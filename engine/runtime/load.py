"""Loading a model on a backend: the registry of backends and :func:`load_model`.

Each backend module (engine.runtime.backends) declares its loader, a function ``load`` from a
:class:`engine.runtime.loaded.LoadRequest` to a :class:`engine.runtime.loaded.LoadedModel`; the
registry names the module and says whether the backend runs in this process. A backend's module
is imported when a model first loads on it: each imports torch (llama.cpp's its library too), which
a language server starting up, or a command that loads no model, must not pay for. The backends
import this package's lower modules (loaded, sources, kinds), never this one.
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass
from typing import Protocol

from engine.core.errors import ModelLoadError
from engine.runtime.backends import BackendOptions, resolve_backend
from engine.runtime.loaded import LoadedModel, LoadRequest
from engine.runtime.sources import DEFAULT_MODEL, Progress, gguf_file_of


class Loader(Protocol):
    def __call__(self, request: LoadRequest) -> LoadedModel:
        """Load ``request``'s model; a failure is one :class:`ModelLoadError` naming the fix."""


@dataclass(frozen=True)
class Registered:
    """A backend's entry: the module whose ``load`` is its :class:`Loader`, and whether it runs
    in this process (sessions with logits) or is a server."""

    module: str
    in_process: bool

    def loader(self) -> Loader:
        loader: Loader = importlib.import_module(self.module).load
        return loader


REGISTRY: dict[str, Registered] = {
    "transformers": Registered("engine.runtime.backends.transformers_backend", in_process=True),
    "llamacpp": Registered("engine.runtime.backends.llamacpp", in_process=True),
    "vllm": Registered("engine.runtime.backends.vllm", in_process=False),
}

# The backends that run in this process; ``auto`` always picks one of them.
IN_PROCESS_BACKENDS: tuple[str, ...] = tuple(name for name, entry in REGISTRY.items() if entry.in_process)


def load_model(name: str = DEFAULT_MODEL, device: str | None = None, dtype: str | None = None,
               progress: Progress | None = None, trust_remote_code: bool = False,
               backend: str = "transformers", options: BackendOptions | None = None) -> LoadedModel:
    """Load a causal LM for decoding on ``backend`` (``auto``: see
    :func:`engine.runtime.backends.resolve_backend`; ``options``: its
    :class:`engine.runtime.backends.BackendOptions`). Raises :class:`ModelLoadError` with one clear message."""
    try:
        chosen = resolve_backend(backend, name, gguf_file_of(name))
    except ValueError as exc:
        raise ModelLoadError(str(exc)) from None
    request = LoadRequest(name, device, dtype, progress, trust_remote_code, options or BackendOptions())
    return REGISTRY[chosen].loader()(request)


def log_progress(message: str) -> None:
    """A load's progress on stderr (the CLI's)."""
    print(message, file=sys.stderr, flush=True)
