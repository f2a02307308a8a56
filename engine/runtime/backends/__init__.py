"""Backends: what runs the model's forwards. One seam, three implementations.

Every decoder needs the same few things from a model, and gets them through
:class:`engine.runtime.loaded.LoadedModel`: its tokenizer, ``vocab_size``, ``runtime.eos_ids()``,
``session()`` (a :class:`engine.runtime.session.Session`: append N tokens in one forward and get the
logits of the last, some or all positions; crop back to a length; time by kind),
``runtime.meter()`` (count forwards) and ``runtime.prompt_lookup`` (the backend's own
prompt-lookup drafting, the ``pld`` mode's peer). :mod:`engine.runtime.protocol` declares them:
an in-process runtime is a ``LocalRuntime``, a server a ``RemoteRuntime``.

- ``transformers``: in-process torch module, any device and dtype (:mod:`.transformers_backend`).
- ``llamacpp``: a ``.gguf`` runs quantized as it is, in-process, through llama-cpp-python's
  low-level API (:mod:`.llamacpp`).
- ``vllm``: a shared server, over its OpenAI-compatible HTTP API (:mod:`.vllm`). A server returns
  tokens, not logits, so this runtime has no ``session``; program mode runs as a client loop of
  grammar-constrained segments (:mod:`engine.decoding.remote_decode`).

``auto`` picks llama.cpp for a ``.gguf`` when llama-cpp-python is installed, transformers otherwise.
Each backend module declares its loader, ``load``; :mod:`engine.runtime.load` keeps the registry
of them. This package's own module is light (no torch): options, the error and the choice.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

from engine.core import defaults
from engine.core.choices import BACKENDS, FLASH_ATTENTION, FlashAttention
from engine.core.errors import EditError


@dataclass(frozen=True)
class BackendOptions:
    """Backend settings (user-level: the server URL and key never come from a workspace).

    ``threads``/``context``/``batch``: llama.cpp's CPU threads (0 or None: chosen at load
    from a short measurement, :mod:`engine.runtime.threads`), context
    size and batch size. ``server_url``: the vLLM server (``http://127.0.0.1:8000``);
    ``served_model``: the model name the server serves (None: the only one it serves);
    ``api_key_env``: the environment variable holding the server's API key (never logged);
    ``timeout_s``: per-request timeout; ``concurrent``: edits a remote backend runs at once.
    ``prefix_cache_tokens``: tokens of recent prompts whose KV an in-process backend keeps to
    reuse their common prefix in the next edit (:mod:`engine.runtime.prefix_cache`); 0 turns it off.
    ``gpu_layers``: layers llama.cpp offloads to a GPU (Metal/CUDA builds; -1: all).
    ``flash_attention``: llama.cpp's flash attention, "on", "off" or "auto" (off on the CPU, where
    its kernel costs more than plain attention below 64 rows; llama.cpp's own choice with GPU layers)."""

    threads: int | None = defaults.THREADS
    context: int = defaults.CONTEXT_TOKENS
    batch: int = defaults.BATCH_TOKENS
    server_url: str | None = None
    served_model: str | None = None
    api_key_env: str = defaults.API_KEY_ENV
    timeout_s: float = 60.0
    prefix_cache_tokens: int = defaults.PREFIX_CACHE_TOKENS
    gpu_layers: int = defaults.GPU_LAYERS
    flash_attention: FlashAttention = defaults.FLASH_ATTENTION

    def __post_init__(self) -> None:
        if self.flash_attention not in FLASH_ATTENTION:
            raise ValueError(f"flash_attention must be one of {', '.join(FLASH_ATTENTION)}, not {self.flash_attention!r}")


class BackendError(EditError):
    """The backend cannot run this edit (context full, server down or misbehaving); the message
    says why, the document is left as it was."""


def llamacpp_available() -> bool:
    return importlib.util.find_spec("llama_cpp") is not None


def resolve_backend(backend: str, model: str, gguf_path: Path | None) -> str:
    """The backend a setting means for a model (``gguf_path``: its GGUF file, if it is one)."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    if backend != "auto":
        return backend
    return "llamacpp" if gguf_path is not None and llamacpp_available() else "transformers"
