"""The defaults that both the settings schema and the runtime read, declared once.

The runtime's :class:`engine.runtime.backends.BackendOptions` is the backend section of the
settings schema (:class:`engine.settings.schema.Settings` nests it) and declares those settings
with these defaults; the prefix cache needs the same value when a caller (a benchmark, a script,
a test) builds one without settings.
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
