"""The defaults that both the settings schema and the runtime read, declared once.

The schema (:class:`engine.settings.schema.Settings`) declares every user-facing setting with its
default; the runtime cannot import it (it is a lower layer), yet ``BackendOptions()`` and the
prefix cache need the same values when a caller (a benchmark, a script, a test) builds them
without settings. These are those values; the schema's fields and the runtime's defaults name them.
"""

from __future__ import annotations

from engine.core import environment
from engine.core.choices import FlashAttention

THREADS = 0  # llama.cpp CPU threads; 0: chosen at load (engine.runtime.threads)
CONTEXT_TOKENS = 4096  # llama.cpp context size (prompt plus generated text)
BATCH_TOKENS = 512  # llama.cpp tokens per decode call
GPU_LAYERS = 0  # layers llama.cpp offloads to a GPU; -1: all
FLASH_ATTENTION: FlashAttention = "auto"  # llama.cpp's flash attention
PREFIX_CACHE_TOKENS = 8192  # tokens of recent prompts whose KV cache is kept; 0: off
API_KEY_ENV = environment.API_KEY  # the variable that holds a vLLM server's API key
