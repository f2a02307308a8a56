"""Backends: what runs the model's forwards. One seam, three implementations.

Every decoder needs the same few things from a model, and gets them through
:class:`engine.runtime.models.LoadedModel`: its tokenizer, ``vocab_size``, ``runtime.eos_ids()``,
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
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

from engine.core import environment
from engine.core.errors import EditError
from engine.runtime.prefix_cache import DEFAULT_PREFIX_TOKENS

BACKENDS: tuple[str, ...] = ("auto", "transformers", "llamacpp", "vllm")
API_KEY_ENV = environment.API_KEY
FLASH_ATTENTION: tuple[str, ...] = ("auto", "on", "off")

# How a multi-row verify may accept a draft (engine.decoding.greedy.DraftedDecode;
# a light module, so the front doors check the value without loading torch):
# - "exact": only within the rows where the batched forward equals one-token steps to the bit, so
#   the output is exactly plain greedy decoding's (on llama.cpp's default CPU build that is one
#   row: no draft is ever verified, and drafting decodes like ar);
# - "argmax": whatever the batched forward's argmax accepts, as llama.cpp's own speculative
#   decoding, vLLM and transformers' assisted generation do: a near-tie may come out the other way
#   than in a one-token step, so an output may differ from ar's;
# - "auto": the backend's choice (``Session.default_verify``).
VERIFY_RULES: tuple[str, ...] = ("auto", "exact", "argmax")


@dataclass(frozen=True)
class BackendOptions:
    """Backend settings (user-level: the server URL and key never come from a workspace).

    ``threads``/``context``/``batch``: llama.cpp's CPU threads (None: the CPUs available), context
    size and batch size. ``server_url``: the vLLM server (``http://127.0.0.1:8000``);
    ``served_model``: the model name the server serves (None: the only one it serves);
    ``api_key_env``: the environment variable holding the server's API key (never logged);
    ``timeout_s``: per-request timeout; ``concurrent``: edits a remote backend runs at once.
    ``prefix_cache_tokens``: tokens of recent prompts whose KV an in-process backend keeps to
    reuse their common prefix in the next edit (:mod:`engine.runtime.prefix_cache`); 0 turns it off.
    ``gpu_layers``: layers llama.cpp offloads to a GPU (Metal/CUDA builds; -1: all).
    ``flash_attention``: llama.cpp's flash attention, "on", "off" or "auto" (off on the CPU, where
    its kernel costs more than plain attention below 64 rows; llama.cpp's own choice with GPU layers)."""

    threads: int | None = None
    context: int = 4096
    batch: int = 512
    server_url: str | None = None
    served_model: str | None = None
    api_key_env: str = API_KEY_ENV
    timeout_s: float = 60.0
    prefix_cache_tokens: int = DEFAULT_PREFIX_TOKENS
    gpu_layers: int = 0
    flash_attention: str = "auto"

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
