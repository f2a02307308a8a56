"""The llama.cpp backend: a ``.gguf`` runs quantized, in-process, through llama-cpp-python's
low-level API (``pip install 'copy-as-decode[llamacpp]'``; it compiles llama.cpp on install).

A session is one llama.cpp context (sequence 0). An N-token append is one ``llama_decode`` (split
into ``batch``-sized chunks only when N exceeds it) with logits requested for exactly the rows
the decoder needs; a crop is ``llama_memory_seq_rm`` past the length. Logits come back as float
arrays, so the grammar mask and drafting work as on any backend. Contexts are pooled: an edit
takes one and gives it back when its session closes. The span-selector adapter runs as a
llama.cpp LoRA adapter (converted from the shipped safetensors, see
:mod:`engine.selector.gguf_lora`), set on the contexts of the program-mode runtime.
"""

from __future__ import annotations

import contextlib
import ctypes
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import torch

from engine.backends import BackendError, BackendOptions
from engine.session import Forward, ForwardLog, Session


def _lib() -> Any:
    try:
        import llama_cpp
    except ImportError:
        from engine.models import ModelLoadError

        raise ModelLoadError(
            "backend 'llamacpp' needs llama-cpp-python: pip install 'copy-as-decode[llamacpp]' "
            "(it compiles llama.cpp, about 14 minutes on 2 cores; `make test` installs it)") from None
    return llama_cpp


_QUIET = None


def _silence(lib: Any) -> None:
    """llama.cpp logs every load to stderr; keep errors only (they still reach our messages)."""
    global _QUIET
    if _QUIET is None:
        @lib.llama_log_callback
        def quiet(level: int, text: bytes, user_data: Any) -> None:  # noqa: ARG001
            pass

        _QUIET = quiet
        lib.llama_log_set(_QUIET, ctypes.c_void_p(0))


class LlamaCppModel:
    """One loaded GGUF (weights shared by every runtime and context made from it)."""

    def __init__(self, path: Path, options: BackendOptions):
        self.lib = lib = _lib()
        _silence(lib)
        lib.llama_backend_init()
        params = lib.llama_model_default_params()
        params.n_gpu_layers = 0
        self.path, self.options = path, options
        self.ptr = lib.llama_model_load_from_file(str(path).encode("utf-8"), params)
        if not self.ptr:
            from engine.models import ModelLoadError

            raise ModelLoadError(f"model {str(path)!r}: llama.cpp cannot load this GGUF file")
        self.vocab = lib.llama_model_get_vocab(self.ptr)
        self.n_vocab = int(lib.llama_vocab_n_tokens(self.vocab))
        self.n_ctx_train = int(lib.llama_model_n_ctx_train(self.ptr))

    def __del__(self) -> None:
        try:
            if getattr(self, "ptr", None):
                self.lib.llama_model_free(self.ptr)
                self.ptr = None
        except Exception:  # noqa: BLE001 - interpreter shutdown: the library may be gone already
            pass


class LlamaCppRuntime:
    """A GGUF model (optionally with a LoRA adapter) and a pool of llama.cpp contexts."""

    backend = "llamacpp"

    def __init__(self, model: LlamaCppModel, adapter: Path | None = None):
        self.model, self.lib, self.options = model, model.lib, model.options
        self.context = min(model.options.context, model.n_ctx_train or model.options.context)
        self.batch = max(1, min(model.options.batch, self.context))
        self.adapter_path = adapter
        self.adapter = None
        if adapter is not None:
            self.adapter = self.lib.llama_adapter_lora_init(model.ptr, str(adapter).encode("utf-8"))
            if not self.adapter:
                raise BackendError(f"llama.cpp cannot load the LoRA adapter {adapter}")
        self._free: list[Any] = []
        self._lock = threading.Lock()
        self._logs: list[ForwardLog] = []
        self._pld: Any = None

    @property
    def vocab_size(self) -> int:
        return self.model.n_vocab

    def describe(self) -> str:
        threads = self.options.threads or "default"
        return f"llama.cpp ({self.model.path.name}, {threads} threads, context {self.context})"

    def eos_ids(self) -> set[int]:
        ids = set()
        for fn in (self.lib.llama_vocab_eos, self.lib.llama_vocab_eot):
            tok = int(fn(self.model.vocab))
            if tok >= 0:
                ids.add(tok)
        return ids

    def with_adapter(self, adapter: Path) -> "LlamaCppRuntime":
        """The same weights with a LoRA adapter on top (the program-mode model)."""
        return LlamaCppRuntime(self.model, adapter)

    # -- contexts -------------------------------------------------------------------------------

    def session(self) -> "LlamaCppSession":
        return LlamaCppSession(self, self._take())

    def _take(self) -> Any:
        with self._lock:
            if self._free:
                return self._free.pop()
        lib = self.lib
        params = lib.llama_context_default_params()
        params.n_ctx = self.context
        params.n_batch = params.n_ubatch = self.batch
        params.n_seq_max = 1
        params.no_perf = True
        if self.options.threads:
            params.n_threads = params.n_threads_batch = int(self.options.threads)
        ctx = lib.llama_init_from_model(self.model.ptr, params)
        if not ctx:
            raise BackendError(f"llama.cpp cannot create a context of {self.context} tokens (out of memory?)")
        if self.adapter is not None:
            adapters = (lib.llama_adapter_lora_p_ctypes * 1)(self.adapter)
            scales = (ctypes.c_float * 1)(1.0)
            if lib.llama_set_adapters_lora(ctx, adapters, 1, scales) != 0:
                lib.llama_free(ctx)
                raise BackendError(f"llama.cpp refused the LoRA adapter {self.adapter_path}")
        return ctx

    def _give_back(self, ctx: Any) -> None:
        self.lib.llama_memory_clear(self.lib.llama_get_memory(ctx), True)
        with self._lock:
            self._free.append(ctx)

    def _record(self, tokens: int, seconds: float) -> None:
        for log in self._logs:
            log.records.append(Forward(tokens, seconds))

    @contextlib.contextmanager
    def meter(self) -> Iterator[ForwardLog]:
        log = ForwardLog()
        self._logs.append(log)
        try:
            yield log
        finally:
            self._logs.remove(log)

    # -- pld: llama-cpp-python's own prompt-lookup drafting ---------------------------------------

    def prompt_lookup(self, prompt_ids: Sequence[int], max_new_tokens: int, stop_ids: Sequence[int],
                      finished: Callable[[list[int]], bool], pad_id: int | None) -> list[int]:
        """Greedy generation through llama-cpp-python's ``Llama`` with ``LlamaPromptLookupDecoding``:
        what a llama.cpp user picks for drafting from the prompt."""
        llm = self._prompt_lookup_model()
        if len(prompt_ids) + max_new_tokens > self.context:
            max_new_tokens = max(1, self.context - len(prompt_ids))
        llm.reset()
        out: list[int] = []
        stops = set(stop_ids)
        for tok in llm.generate(list(prompt_ids), temp=0.0, top_k=1, top_p=1.0, min_p=0.0, repeat_penalty=1.0,
                                reset=True):
            if tok in stops:
                break
            out.append(int(tok))
            if len(out) >= max_new_tokens or finished(out):
                break
        return out

    def _prompt_lookup_model(self) -> Any:
        if self._pld is None:
            from llama_cpp import Llama
            from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

            runtime = self

            class MeteredLlama(Llama):
                def eval(self, tokens: Sequence[int]) -> None:  # every forward generate() runs
                    start = time.perf_counter()
                    super().eval(tokens)
                    runtime._record(len(tokens), time.perf_counter() - start)

            kwargs: dict[str, Any] = {"n_ctx": self.context, "n_batch": self.batch, "verbose": False,
                                      "draft_model": LlamaPromptLookupDecoding(num_pred_tokens=10),
                                      "logits_all": True}
            if self.options.threads:
                kwargs["n_threads"] = kwargs["n_threads_batch"] = int(self.options.threads)
            if self.adapter_path is not None:
                kwargs["lora_path"] = str(self.adapter_path)
            self._pld = MeteredLlama(model_path=str(self.model.path), **kwargs)
        return self._pld


class LlamaCppSession(Session):
    """One llama.cpp context, sequence 0."""

    def __init__(self, runtime: LlamaCppRuntime, ctx: Any):
        super().__init__()
        self.runtime, self.lib, self.ctx = runtime, runtime.lib, ctx
        self.memory = self.lib.llama_get_memory(ctx)
        self.n_vocab = runtime.vocab_size

    def _forward(self, ids: list[int], rows: list[int]) -> torch.Tensor:
        if self.ctx is None:
            raise BackendError("this llama.cpp session is closed")
        if self.length + len(ids) > self.runtime.context:
            raise BackendError(f"the llama.cpp context is full: {self.length + len(ids)} tokens needed, "
                               f"{self.runtime.context} available (raise the context setting or edit a smaller region)")
        start = time.perf_counter()
        wanted = sorted(set(rows))
        out: dict[int, np.ndarray] = {}
        batch_size = self.runtime.batch
        for lo in range(0, len(ids), batch_size):
            chunk = ids[lo:lo + batch_size]
            keep = [r - lo for r in wanted if lo <= r < lo + len(chunk)]
            self._decode(chunk, self.length + lo, keep)
            for r in keep:
                ptr = self.lib.llama_get_logits_ith(self.ctx, r)
                out[lo + r] = np.ctypeslib.as_array(ptr, shape=(self.n_vocab,)).copy()
        self.runtime._record(len(ids), time.perf_counter() - start)
        return torch.from_numpy(np.stack([out[r] for r in rows]))

    def _decode(self, chunk: list[int], pos0: int, keep: list[int]) -> None:
        lib = self.lib
        batch = lib.llama_batch_init(len(chunk), 0, 1)
        try:
            batch.n_tokens = len(chunk)
            keep_set = set(keep)
            for i, tok in enumerate(chunk):
                batch.token[i] = tok
                batch.pos[i] = pos0 + i
                batch.n_seq_id[i] = 1
                batch.seq_id[i][0] = 0
                batch.logits[i] = 1 if i in keep_set else 0
            rc = lib.llama_decode(self.ctx, batch)
        finally:
            lib.llama_batch_free(batch)
        if rc == 1:
            raise BackendError("the llama.cpp context has no room for this batch (context full)")
        if rc != 0:
            raise BackendError(f"llama.cpp failed to decode a batch of {len(chunk)} tokens (error {rc})")

    def _truncate(self, length: int) -> None:
        if not self.lib.llama_memory_seq_rm(self.memory, 0, length, -1):
            raise BackendError(f"llama.cpp could not roll the cache back to {length} tokens")

    def close(self) -> None:
        if self.ctx is not None:
            ctx, self.ctx = self.ctx, None
            self.runtime._give_back(ctx)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


_MODELS: dict[tuple[str, BackendOptions], LlamaCppModel] = {}
_MODELS_LOCK = threading.Lock()


def load_llamacpp(name: str, options: BackendOptions, progress: Callable[[str], None] | None) -> Any:
    """A :class:`engine.models.LoadedModel` on llama.cpp for a ``.gguf`` (or the embedded default).
    The tokenizer is the GGUF's own, read by transformers (the grammar tables need it)."""
    from engine.models import LoadedModel, ModelLoadError, gguf_file_of

    path = gguf_file_of(name)
    if path is None:
        raise ModelLoadError(f"model {name!r}: backend 'llamacpp' runs .gguf files only")
    if not path.is_file():
        raise ModelLoadError(f"model {name!r}: GGUF file not found")
    if progress is not None:
        progress(f"loading {path.name} with llama.cpp (quantized as it is)...")
    key = (str(path.resolve()), options)
    with _MODELS_LOCK:
        model = _MODELS.get(key) or LlamaCppModel(path, options)
        _MODELS[key] = model
    runtime = LlamaCppRuntime(model)
    tokenizer = _gguf_tokenizer(name, path)
    if len(tokenizer) > runtime.vocab_size:
        raise ModelLoadError(f"model {name!r}: its tokenizer has {len(tokenizer)} tokens but llama.cpp "
                             f"reports {runtime.vocab_size}")
    return LoadedModel(name=name, model=None, tokenizer=tokenizer, device="cpu", dtype="gguf", runtime=runtime)


def _gguf_tokenizer(name: str, path: Path) -> Any:
    """The GGUF's tokenizer (the de-quantized default model's saved copy when it exists: the same
    tokenizer, faster to read)."""
    from transformers import AutoTokenizer

    from engine.models import COMPLETE_MARKER, DEFAULT_MODEL, ModelLoadError, cache_dir

    folder = cache_dir() / "SmolLM2-135M-Instruct"
    try:
        if name in (DEFAULT_MODEL, "", None) and (folder / COMPLETE_MARKER).is_file():
            return AutoTokenizer.from_pretrained(str(folder))
        return AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    except Exception as exc:  # noqa: BLE001 - every failure becomes one clear message
        raise ModelLoadError(f"model {name!r}: cannot read the tokenizer of {path.name}: {exc}") from exc
