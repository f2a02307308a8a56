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
from pathlib import Path
from typing import Any, Mapping

from pydantic import Field, model_validator

from engine.core import defaults
from engine.core.choices import BACKENDS, FlashAttention
from engine.core.errors import EditError
from engine.core.setting import ENV_NAME_PATTERN, URL_PATTERN, SettingsSection, setting


class BackendOptions(SettingsSection):
    """How the backend runs the model: llama.cpp's threads, context, batch, GPU layers and flash
    attention, the prompt cache of an in-process backend, and the vLLM server to edit with.

    This is the backend section of the settings itself: :class:`engine.settings.schema.Settings`
    nests this class, so each field here is the setting of the same name, its help the field's
    description, and the runtime receives the section as it is. The server URL, served model and
    API key variable are user-level: they never come from a workspace. A benchmark, a script or a
    test builds one without settings: a None argument is not given (the field keeps its default).
    ``timeout_s`` (a remote backend's per-request timeout, in seconds) is the runtime's own field,
    not a setting."""

    threads: int = setting(defaults.THREADS, "llama.cpp CPU threads; 0 (auto): chosen at load from a short measurement "
                           "(1 up to the physical cores the load leaves free; `copy-as-decode doctor` shows it).",
                           low=0, high=512)
    context_size: int = setting(defaults.CONTEXT_TOKENS, "llama.cpp context size in tokens (prompt plus generated "
                                "text).", low=256, high=1 << 20)
    batch_size: int = setting(defaults.BATCH_TOKENS, "llama.cpp batch size: tokens per decode call.",
                              low=1, high=1 << 16)
    gpu_layers: int = setting(defaults.GPU_LAYERS, "Layers llama.cpp offloads to a GPU (Metal or CUDA builds); "
                              "-1: all.", low=-1, high=4096)
    flash_attention: FlashAttention = setting(
        defaults.FLASH_ATTENTION, "llama.cpp's flash attention: auto (off on the CPU, where decoding is faster "
        "without it), on or off.")
    padded_steps: bool = setting(False, "llama.cpp on the CPU, built with llamafile's sgemm, flash attention off: run "
                                 "each one-token step as a two-row forward (the token and a padding row dropped "
                                 "at once), so that verifies of any size equal the steps to the bit and speculative "
                                 "mode drafts under the exact rule; a step then costs more (docs/backends.md).")
    prefix_cache_tokens: int = setting(defaults.PREFIX_CACHE_TOKENS, "Tokens of recent prompts whose KV cache is "
                                       "kept so the next edit prefills only what changed; 0: off.", low=0, high=1 << 22)
    server_url: str = setting("", "The vLLM server that `backend: vllm` edits with, e.g. http://127.0.0.1:8000 "
                              "(its API key: in the variable apiKeyEnv names).",
                              user_only=True, pattern=URL_PATTERN,
                              pattern_help="is not an http(s) URL like http://127.0.0.1:8000",
                              values="an http(s) URL, or empty")
    served_model: str = setting("", "The model name the vLLM server serves; empty: the only one it serves.",
                                user_only=True, values="a model name, or empty")
    api_key_env: str = setting(defaults.API_KEY_ENV, "The environment variable that holds the vLLM server's "
                               "API key (the key itself is never a setting).", user_only=True,
                               pattern=ENV_NAME_PATTERN, pattern_help="is not an environment variable name",
                               values="an environment variable name")
    timeout_s: float = Field(60.0, gt=0, strict=False)

    @model_validator(mode="before")
    @classmethod
    def _not_given(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            return {key: value for key, value in data.items() if value is not None}
        return data


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
