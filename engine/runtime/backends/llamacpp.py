"""The llama.cpp backend: a ``.gguf`` runs quantized, in-process, through llama-cpp-python's
low-level API (``pip install 'copy-as-decode[llamacpp]'``; it compiles llama.cpp on install).

A session is one llama.cpp context (sequence 0). An N-token append is one ``llama_decode`` (split
into ``batch``-sized chunks only when N exceeds it) with logits requested for exactly the rows
the decoder needs; a crop is ``llama_memory_seq_rm`` past the length. Logits come back as float
arrays, so the grammar mask and drafting work as on any backend. Contexts are pooled, each with
the one batch its forwards fill: an edit takes one at its first append and gives it back when its
session closes, keeping the KV of its prompt (:mod:`engine.runtime.prefix_cache`): the next edit takes the
context whose prompt shares the longest prefix with its own, removes the rest of the cache
(``llama_memory_seq_rm``) and forwards only what differs. :meth:`LlamaCppRuntime.close` frees the
contexts, batches and adapter (the model's weights go with the last reference to them).

Program mode runs on the span selector merged into the weights (a GGUF written once beside the
de-quantized model, see :mod:`engine.runtime.selector.gguf_merge`): as a runtime LoRA every layer runs
seven extra matrix products, which made a program-mode step dearer than an ar step
(docs/backends.md, "llama.cpp: the figures behind the code"). A runtime LoRA
(``LlamaCppRuntime(model, adapter)``) stays for measuring the two side by side.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import threading
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from engine.core.errors import ModelLoadError
from engine.runtime.backends import BackendError, BackendOptions
from engine.runtime.cost import CostModel, cost_path
from engine.runtime.disk_cache import file_stamp
from engine.runtime.kinds import InProcessRuntime
from engine.runtime.loaded import LoadedModel, LoadRequest
from engine.runtime.prefix_cache import PrefixStore, Taken
from engine.runtime.selector.gguf_merge import merged_gguf_for
from engine.runtime.session import Forward, ForwardLog, Session
from engine.runtime.sources import COMPLETE_MARKER, DEFAULT_MODEL, Progress, cache_dir, gguf_file_of
from engine.runtime.threads import (
    ThreadChoice,
    ThreadTiming,
    allowed_cpus,
    candidate_counts,
    choose,
    load_average,
    physical_cores,
    remember,
    remembered,
)
from engine.runtime.tokenizer_cache import cached_tokenizer


def _lib() -> Any:
    try:
        import llama_cpp
    except ImportError:
        raise ModelLoadError(
            "backend 'llamacpp' needs llama-cpp-python: pip install 'copy-as-decode[llamacpp]' "
            "(it compiles llama.cpp, about 14 minutes on 2 cores; `make test` installs it)") from None
    return llama_cpp


def _library_version() -> str:
    try:
        return version("llama_cpp_python")
    except PackageNotFoundError:
        return "-"


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


@functools.cache
def _cpu_has_amx() -> bool:
    """Does this CPU have AMX tiles (Intel Sapphire Rapids and later)? There llama.cpp 0.3.36 puts
    the weights in its AMX buffer type, and its AMX matmul crashes the first forward (SIGSEGV in
    ggml_backend_amx_mul_mat; docs/backends.md), so the extra CPU buffer types (AMX, weight repacking: a
    speed option, not a numerics one) are turned off on such a CPU and left as they were elsewhere.
    Read once per process: every model load (and the pld arm's) asks."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            return any(line.startswith("flags") and "amx_tile" in line.split() for line in f)
    except OSError:
        return False


@contextlib.contextmanager
def _no_extra_bufts_on_amx() -> Iterator[None]:
    """While llama-cpp-python's ``Llama`` (the pld arm's generator) loads a model: its model
    parameters come from ``llama_model_default_params()`` with no way to pass
    ``use_extra_bufts``, so on an AMX CPU (see _cpu_has_amx) that function hands out parameters
    with the extra buffer types off, as LlamaCppModel sets them."""
    if not _cpu_has_amx():
        yield
        return
    import llama_cpp.llama_cpp as low

    original = low.llama_model_default_params

    def params() -> Any:
        value = original()
        value.use_extra_bufts = False
        return value

    low.llama_model_default_params = params
    try:
        yield
    finally:
        low.llama_model_default_params = original


class LlamaCppModel:
    """One loaded GGUF (weights shared by every runtime and context made from it)."""

    def __init__(self, path: Path, options: BackendOptions):
        self.lib = lib = _lib()
        _silence(lib)
        lib.llama_backend_init()
        params = lib.llama_model_default_params()
        params.n_gpu_layers = int(options.gpu_layers)
        if _cpu_has_amx():
            params.use_extra_bufts = False  # see _cpu_has_amx
        self.path, self.options = path, options
        self.ptr = lib.llama_model_load_from_file(str(path).encode("utf-8"), params)
        if not self.ptr:
            raise ModelLoadError(f"model {str(path)!r}: llama.cpp cannot load this GGUF file")
        self.vocab = lib.llama_model_get_vocab(self.ptr)
        self.n_vocab = int(lib.llama_vocab_n_tokens(self.vocab))
        self.n_ctx_train = int(lib.llama_model_n_ctx_train(self.ptr))
        self.thread_choice: ThreadChoice | None = None  # measured by its first runtime, when asked to

    def __del__(self) -> None:
        try:
            if getattr(self, "ptr", None):
                self.lib.llama_model_free(self.ptr)
                self.ptr = None
        except Exception:  # noqa: BLE001 - interpreter shutdown: the library may be gone already
            pass


PREFILL_ALIGN = 32
FLASH_PREFILL_ALIGN = 64  # with flash attention on: below 64 rows its CPU kernel takes each row alone
# The most rows a CPU forward may have while each row gets exactly a one-token step's logits (None:
# any number); a speculative verify stays within it (tests/test_llamacpp_backend.py checks it).
# - Flash attention on: 63. llama.cpp's CPU kernel takes each query row alone below 64 rows, as a
#   step does, and tiles them from 64 on, which rounds differently: enough to flip a greedy choice
#   (docs/backends.md, "llama.cpp: the figures behind the code").
# - Off, with llamafile's sgemm in the build (llama.cpp's default on x86): 1. sgemm takes every
#   matrix product of two rows or more (the attention scores of an f16 cache among them) and sums
#   in another order than the dot products a step's single row gets, from 2-4 rows on
#   (docs/backends.md). So no verify is exact, and speculative decoding decodes like ar.
# - Off, built without it (``-DGGML_LLAMAFILE=OFF``): every product is the same dot product
#   whatever the number of rows, so every row equals a step at any size (docs/backends.md).
# - Off, with sgemm, and padded steps (the ``padded_steps`` setting): no bound. A step then runs as
#   two rows, the token and a padding row dropped at once (``LlamaCppSession._padded``), so it takes
#   sgemm too, and every row of a forward of any size equals it (tests/test_llamacpp_backend.py).
def exact_rows(flash_attention: bool, llamafile_sgemm: bool, padded_steps: bool = False) -> int | None:
    """How many rows a forward may have and still equal one-token steps, row for row."""
    if flash_attention:
        return 63
    return 1 if llamafile_sgemm and not padded_steps else None


def pads_steps(options: BackendOptions, flash: bool | None, llamafile_sgemm: bool) -> bool:
    """Whether one-token steps run as two rows: where the setting asks for it and it changes
    something (a CPU build with sgemm, flash attention off); a GPU's kernels are not these."""
    return bool(options.padded_steps) and llamafile_sgemm and flash is False and not options.gpu_layers


# What a request's verify "auto" means here (engine.core.choices.Verify): "exact", so an
# answer never depends on how it was drafted. "argmax" is faster, but some outputs leave ar's, each at
# a near-tie under the verify's rounding; which near-ties flip depends on the draft sizes the cost
# model picks from timings, so the same request can come out differently in two processes or two runs
# (docs/benchmarks.md, "Verify: exact or argmax").
DEFAULT_VERIFY = "exact"


def _has_llamafile_sgemm(lib: Any) -> bool:
    """Was llama.cpp's CPU backend built with llamafile's sgemm? Its system info says so."""
    return b"LLAMAFILE = 1" in lib.llama_print_system_info()


def available_cpus() -> int:
    """The CPUs this process may use: the threads llama.cpp runs where none are set and none are
    measured (layers on a GPU). llama.cpp's own default is 4 whatever the machine (llama-cpp-python's
    ``Llama``: half the CPUs), and more threads than CPUs make a step dearer (docs/backends.md,
    "llama.cpp: the figures behind the code")."""
    return len(allowed_cpus())


def flash_attention(options: BackendOptions) -> bool | None:
    """Whether llama.cpp contexts run flash attention (None: llama.cpp decides, as with GPU layers).
    "auto" turns it off on the CPU: there its kernel handles fewer than 64 query rows one at a
    time, which makes one-token steps and short forwards dearer than plain attention
    (docs/backends.md, "Flash attention and exact verifies")."""
    if options.flash_attention == "auto":
        return None if options.gpu_layers else False
    return options.flash_attention == "on"


class _Slot:
    """One llama.cpp context and the batch its forwards fill (allocated once, ``size`` tokens)."""

    def __init__(self, lib: Any, ctx: Any, size: int):
        self.lib, self.ctx, self.size = lib, ctx, size
        self.memory = lib.llama_get_memory(ctx)
        self.batch = lib.llama_batch_init(size, 0, 1)

    def clear(self) -> None:
        self.lib.llama_memory_clear(self.memory, True)

    def free(self) -> None:
        if self.ctx is not None:
            self.lib.llama_batch_free(self.batch)
            self.lib.llama_free(self.ctx)
            self.ctx = None


def decode(slot: _Slot, chunk: list[int], pos0: int, keep: list[int]) -> None:
    """One ``llama_decode`` of ``chunk`` at positions from ``pos0`` in sequence 0, with logits for
    the rows in ``keep``, through the context's own batch (filled again for every chunk)."""
    batch = slot.batch
    batch.n_tokens = len(chunk)
    keep_set = set(keep)
    for i, tok in enumerate(chunk):
        batch.token[i] = tok
        batch.pos[i] = pos0 + i
        batch.n_seq_id[i] = 1
        batch.seq_id[i][0] = 0
        batch.logits[i] = 1 if i in keep_set else 0
    rc = slot.lib.llama_decode(slot.ctx, batch)
    if rc == 1:
        raise BackendError("the llama.cpp context has no room for this batch (context full)")
    if rc != 0:
        raise BackendError(f"llama.cpp failed to decode a batch of {len(chunk)} tokens (error {rc})")


MEASURED_STEPS = 2  # one-token steps timed per count and round (the fastest counts)
MEASURED_ROUNDS = 2  # rounds over the counts at most, the second in reverse order (neither goes first always)
MEASURE_BUDGET_S = 0.6  # no round starts after this: a measurement stays within about a second
# A count whose step is this many times the fastest step seen is not given its chunk: threads that
# spin against other work made one chunk take 3-10 s on a busy 2-core machine.
SLOW_STEP = 2.0


def measure_threads(lib: Any, slot: _Slot, chunk: int, token: int) -> ThreadChoice:
    """The thread count this machine runs this model fastest with now: each count
    :func:`engine.runtime.threads.candidate_counts` allows times a few one-token steps of ``token``
    and then, unless its steps are far slower than the fastest (:data:`SLOW_STEP`), a
    ``chunk``-token prompt chunk on ``slot`` (``llama_set_n_threads`` between them), after one
    untimed step on one thread (the first forward touches every weight). Under a second for the
    embedded model on 2 cores; none when the load leaves one core."""
    cores, load = physical_cores(), load_average()
    counts = candidate_counts(cores, load)
    if len(counts) == 1:
        why = "one core" if cores == 1 else f"load {load:.1f} leaves one of {cores} cores"
        return ThreadChoice(1, f"not measured: {why}")
    tokens = [token] * chunk
    lib.llama_set_n_threads(slot.ctx, 1, 1)
    decode(slot, tokens[:1], 0, [0])
    best: dict[int, list[float]] = {n: [float("inf"), float("inf")] for n in counts}
    began = time.perf_counter()
    for round_ in range(MEASURED_ROUNDS):
        if round_ and time.perf_counter() - began > MEASURE_BUDGET_S:
            break
        for n in counts if round_ % 2 == 0 else reversed(counts):
            if round_ and best[n][1] == float("inf"):
                continue  # too slow in the first round
            lib.llama_set_n_threads(slot.ctx, n, n)
            slot.clear()
            for i in range(MEASURED_STEPS):
                start = time.perf_counter()
                decode(slot, tokens[:1], i, [0])
                best[n][0] = min(best[n][0], time.perf_counter() - start)
                if best[n][0] > SLOW_STEP * min(step for step, _ in best.values()):
                    break  # contended: more forwards could take seconds each, and it cannot win
            if best[n][0] > SLOW_STEP * min(step for step, _ in best.values()):
                continue
            start = time.perf_counter()
            decode(slot, tokens, MEASURED_STEPS, [chunk - 1])
            best[n][1] = min(best[n][1], time.perf_counter() - start)
    slot.clear()
    return choose([ThreadTiming(n, step, prefill) for n, (step, prefill) in best.items()], load, cores)


class LlamaCppRuntime(InProcessRuntime):
    """A GGUF model (optionally with a LoRA adapter), a pool of llama.cpp contexts, the KV of
    recent prompts (``prefixes``) and what its forwards cost (``cost``)."""

    backend = "llamacpp"

    def __init__(self, model: LlamaCppModel, adapter: Path | None = None, threads: ThreadChoice | None = None):
        """``threads``: a count already chosen for these weights' kind (a merged selector copy
        runs what its base measured); by default the ``threads`` setting, else measured here."""
        self.model, self.lib, self.options = model, model.lib, model.options
        self.context = min(model.options.context_size, model.n_ctx_train or model.options.context_size)
        self.batch = max(1, min(model.options.batch_size, self.context))
        # Prefills run in chunks ending at multiples of this (engine.runtime.session.Session._prefill), so a
        # reused prompt prefix is bit-identical to a fresh prefill, and a cancel stops a prefill
        # between two chunks: 32 tokens are a fraction of a second of work on a small CPU, and cost
        # about what 64-token chunks do per token (docs/backends.md, "llama.cpp: the figures behind
        # the code"). With flash attention on, 64 (its kernel is dear below 64 rows). A shorter chunk
        # may run padded where the cost table says a larger one is cheaper (``_padded``; docs/backends.md).
        self.flash_attention = flash_attention(model.options)
        self.align = min(FLASH_PREFILL_ALIGN if self.flash_attention is not False else PREFILL_ALIGN, self.batch)
        self.adapter_path = adapter
        self.adapter = None
        if adapter is not None:
            self.adapter = self.lib.llama_adapter_lora_init(model.ptr, str(adapter).encode("utf-8"))
            if not self.adapter:
                raise BackendError(f"llama.cpp cannot load the LoRA adapter {adapter}")
        self._free: list[_Slot] = []
        self._lock = threading.Lock()
        self._logs: list[ForwardLog] = []
        self._pld: Any = None
        self.prefixes: PrefixStore[_Slot] = PrefixStore(model.options.prefix_cache_tokens, release=self._pool)
        self.closed = False
        self.threads = int(model.options.threads or available_cpus())  # what a measurement's context starts with
        self.thread_choice = self._thread_choice(threads)
        self.threads = self.thread_choice.threads
        self.llamafile_sgemm = _has_llamafile_sgemm(self.lib)
        # GPU builds (layers offloaded) are not bounded: their kernels are not these.
        self.padded_steps = pads_steps(model.options, self.flash_attention, self.llamafile_sgemm)
        self.exact_rows = None if model.options.gpu_layers else exact_rows(bool(self.flash_attention),
                                                                             self.llamafile_sgemm, self.padded_steps)
        self.default_verify = DEFAULT_VERIFY
        self.cost = CostModel(cost_path("llamacpp", model.path.resolve(), self.threads, self.batch,
                                        model.options.gpu_layers, adapter, f"flash attention {self.flash_attention}",
                                        *(() if self.llamafile_sgemm else ("without llamafile sgemm",)),
                                        *(("padded steps",) if self.padded_steps else ())))
        # Sizes whose forward costs more than a larger one's run padded (engine.runtime.cost.plan_padding):
        # decided once from the table the last process left, fixed for this runtime's life.
        self.cost.plan_padding(self.batch)

    @property
    def vocab_size(self) -> int:
        return self.model.n_vocab

    def _thread_choice(self, given: ThreadChoice | None) -> ThreadChoice:
        """The threads setting when it is set; else ``given``; else the CPUs available with layers
        on a GPU; else measured once per loaded GGUF (:func:`measure_threads`)."""
        if self.options.threads:
            return ThreadChoice(int(self.options.threads), "the threads setting")
        if given is not None:
            return given
        if self.options.gpu_layers:
            return ThreadChoice(available_cpus(), "the CPUs available (layers on the GPU: not measured)")
        if self.model.thread_choice is None:
            self.model.thread_choice = self._measured_threads()
        return self.model.thread_choice

    def _measured_threads(self) -> ThreadChoice:
        """:func:`measure_threads` on the pool's first context (then ready for the first edit), or
        the count an earlier process measured in the same conditions (engine.runtime.threads.remembered)."""
        key = self._threads_key()
        known = remembered(key, time.time())
        slot = self._new_slot()
        try:
            if known is None:
                token = max(0, int(self.lib.llama_vocab_bos(self.model.vocab)))
                choice = measure_threads(self.lib, slot, self.align, token)
            else:
                choice = known
            self.lib.llama_set_n_threads(slot.ctx, choice.threads, choice.threads)
            self._pool(slot)
        except BaseException:
            slot.free()
            raise
        if known is None and choice.reason.startswith("measured"):
            remember(key, choice, time.time())
        return choice

    def _threads_key(self) -> str:
        """What a measured thread count depends on: these weights, this llama.cpp, the CPUs this
        process may use, the counts the load leaves worth measuring, the prompt chunk."""
        cpus = allowed_cpus()
        cores = physical_cores(cpus)
        counts = candidate_counts(cores, load_average())
        return "|".join(("threads", file_stamp(self.model.path), _library_version(), ",".join(map(str, cpus)),
                         ",".join(map(str, counts)), str(self.align), str(self.flash_attention)))

    def describe(self) -> str:
        threads = f"{self.threads} thread{'s' if self.threads > 1 else ''}"
        if not self.options.threads:
            threads += f" ({self.thread_choice.reason})"
        attention = {None: "llama.cpp's choice", True: "on", False: "off"}[self.flash_attention]
        sgemm = "" if self.llamafile_sgemm else ", without llamafile sgemm"
        sgemm += ", padded steps" if self.padded_steps else ""
        return (f"llama.cpp ({self.model.path.name}, {threads}, context {self.context}, "
                f"flash attention {attention}{sgemm})")

    def facts(self) -> dict[str, str]:
        attention = {None: "llama.cpp's choice (layers on the GPU)", True: "on", False: "off"}[self.flash_attention]
        return {"weights": str(self.model.path.resolve()),
                "threads": f"{self.threads} ({self.thread_choice.reason})",
                "flash attention": attention + ("" if self.options.flash_attention != "auto" else " (auto)")}

    def eos_ids(self) -> set[int]:
        ids = set()
        for fn in (self.lib.llama_vocab_eos, self.lib.llama_vocab_eot):
            tok = int(fn(self.model.vocab))
            if tok >= 0:
                ids.add(tok)
        return ids

    def context_limit(self) -> int:
        return self.context

    def with_selector(self, loaded: LoadedModel, folder: Path, progress: Progress | None) -> LoadedModel:
        """The adapter merged into these weights (Q8_0), not a runtime LoRA: a program-mode step
        then costs what a base step costs (engine.runtime.selector.gguf_merge says why)."""
        merged = _model(merged_gguf_for(folder, self.model.path, progress=progress), self.options)
        runtime = LlamaCppRuntime(merged, threads=self.thread_choice)
        return LoadedModel(name=loaded.name, model=None, tokenizer=loaded.tokenizer, device=loaded.device,
                           dtype=loaded.dtype, selector=str(folder), runtime=runtime)

    def close(self) -> None:
        """Free the contexts, their batches, the adapter and llama-cpp-python's pld model, and save
        the learned costs. Sessions still open keep their context until they close."""
        if self.closed:
            return
        self.closed = True
        self.prefixes.clear()
        with self._lock:
            slots, self._free = self._free, []
        for slot in slots:
            slot.free()
        if self._pld is not None:
            self._pld.close()
            self._pld = None
        if self.adapter is not None:
            free_adapter = getattr(self.lib, "llama_adapter_lora_free", None)
            if free_adapter is not None:  # older llama.cpp frees adapters with the model only
                free_adapter(self.adapter)
            self.adapter = None
        self.cost.save()

    # -- contexts -------------------------------------------------------------------------------

    def session(self) -> "LlamaCppSession":
        """A session; it takes a context at its first append (the one whose kept prompt shares
        the longest prefix with its own)."""
        if self.closed:
            raise BackendError("this llama.cpp runtime is closed")
        return LlamaCppSession(self)

    def _take(self, ids: Sequence[int], reuse_of: Callable[[Taken], int]) -> tuple[_Slot, int]:
        """A context for a session whose first append is ``ids``, with the leading tokens
        ``reuse_of`` keeps of a stored entry (engine.runtime.session.Session._reuse) already in its cache;
        returns it and how many are."""
        found = self.prefixes.take(ids)
        if found is not None:
            slot = found.state
            reuse = reuse_of(found)
            if reuse > 0 and self.lib.llama_memory_seq_rm(slot.memory, 0, reuse, -1):
                return slot, reuse
            slot.clear()
            return slot, 0
        with self._lock:
            if self._free:
                return self._free.pop(), 0
        return self._new_slot(), 0

    def _new_slot(self) -> _Slot:
        lib = self.lib
        params = lib.llama_context_default_params()
        params.n_ctx = self.context
        params.n_batch = params.n_ubatch = self.batch
        params.n_seq_max = 1
        params.no_perf = True
        if self.flash_attention is not None:
            params.flash_attn_type = lib.LLAMA_FLASH_ATTN_TYPE_ENABLED if self.flash_attention \
                else lib.LLAMA_FLASH_ATTN_TYPE_DISABLED
        params.n_threads = params.n_threads_batch = self.threads
        ctx = lib.llama_init_from_model(self.model.ptr, params)
        if not ctx:
            raise BackendError(f"llama.cpp cannot create a context of {self.context} tokens (out of memory?)")
        if self.adapter is not None:
            adapters = (lib.llama_adapter_lora_p_ctypes * 1)(self.adapter)
            scales = (ctypes.c_float * 1)(1.0)
            if lib.llama_set_adapters_lora(ctx, adapters, 1, scales) != 0:
                lib.llama_free(ctx)
                raise BackendError(f"llama.cpp refused the LoRA adapter {self.adapter_path}")
        return _Slot(lib, ctx, self.batch)

    def _give_back(self, slot: _Slot, prompt: list[int], last_logits: Any = None, cuts: Sequence[int] = ()) -> None:
        """A session is done with ``slot``; its cache's first ``len(prompt)`` entries hold ``prompt``
        (prefilled in chunks cut at ``cuts`` too)."""
        if self.closed:
            slot.free()
        elif prompt and self.lib.llama_memory_seq_rm(slot.memory, 0, len(prompt), -1):
            self.prefixes.put(prompt, slot, last_logits, cuts)
        else:
            self._pool(slot)

    def _pool(self, slot: _Slot) -> None:
        if self.closed:
            slot.free()
            return
        slot.clear()
        with self._lock:
            self._free.append(slot)

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
                      finished: Callable[[list[int]], bool], pad_id: int | None,
                      blocked: Sequence[int] = ()) -> list[int]:
        """Greedy generation through llama-cpp-python's ``Llama`` with ``LlamaPromptLookupDecoding``:
        what a llama.cpp user picks for drafting from the prompt. ``blocked`` ids are never generated
        (a logits processor masks them)."""
        from llama_cpp import LogitsProcessorList

        llm = self._prompt_lookup_model()
        if len(prompt_ids) + max_new_tokens > self.context:
            max_new_tokens = max(1, self.context - len(prompt_ids))
        llm.reset()
        out: list[int] = []
        stops = set(stop_ids)
        banned = np.array(sorted(set(blocked)), dtype=np.int64)

        def mask(_ids: Any, scores: Any) -> Any:
            scores[banned] = -np.inf
            return scores

        processors = LogitsProcessorList([mask]) if len(banned) else None
        for tok in llm.generate(list(prompt_ids), temp=0.0, top_k=1, top_p=1.0, min_p=0.0, repeat_penalty=1.0,
                                reset=True, logits_processor=processors):
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
                                      "logits_all": True, "flash_attn": bool(self.flash_attention),
                                      "n_threads": self.threads, "n_threads_batch": self.threads}
            if self.adapter_path is not None:
                kwargs["lora_path"] = str(self.adapter_path)
            with _no_extra_bufts_on_amx():
                self._pld = MeteredLlama(model_path=str(self.model.path), **kwargs)
        return self._pld


class LlamaCppSession(Session):
    """One llama.cpp context (taken at the first append), sequence 0."""

    def __init__(self, runtime: LlamaCppRuntime):
        super().__init__(cost=runtime.cost, align=runtime.align)
        self.step_exact_rows = runtime.exact_rows
        self.default_verify = runtime.default_verify
        self.runtime, self.lib = runtime, runtime.lib
        self.slot: _Slot | None = None
        self.n_vocab = runtime.vocab_size

    def _begin(self, ids: list[int], max_reuse: int) -> int:
        self.slot, reused = self.runtime._take(ids, lambda taken: self._reuse(taken, max_reuse))
        return reused

    def _forward(self, ids: list[int], rows: list[int]) -> np.ndarray:
        if self.slot is None:
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
            padded = self._padded(chunk, self.length + lo)
            self._decode(padded, self.length + lo, keep)
            if len(padded) > len(chunk):  # drop the padding's keys and values
                self._truncate(self.length + lo + len(chunk))
            for r in keep:
                ptr = self.lib.llama_get_logits_ith(self.slot.ctx, r)
                out[lo + r] = np.ctypeslib.as_array(ptr, shape=(self.n_vocab,)).copy()
        self.runtime._record(len(ids), time.perf_counter() - start)
        return np.stack([out[r] for r in rows])

    def _padded(self, chunk: list[int], pos0: int) -> list[int]:
        """``chunk``, padded when it is a prompt chunk that runs cheaper as a larger one (see
        Session.padded), or a one-token step under padded steps (two rows take llamafile's sgemm,
        as every verify does; engine.runtime.backends.llamacpp.exact_rows), with repeats of its
        last token: they come after every real row, so no real row attends to them, and the
        caller drops them from the cache at once."""
        size = self.padded(len(chunk))
        if size == 1 and self.runtime.padded_steps:
            size = 2
        if pos0 + size > self.runtime.context:
            size = len(chunk)
        return chunk + [chunk[-1]] * (size - len(chunk))

    def _decode(self, chunk: list[int], pos0: int, keep: list[int]) -> None:
        assert self.slot is not None
        decode(self.slot, chunk, pos0, keep)

    def _truncate(self, length: int) -> None:
        assert self.slot is not None
        if not self.lib.llama_memory_seq_rm(self.slot.memory, 0, length, -1):
            raise BackendError(f"llama.cpp could not roll the cache back to {length} tokens")

    def _release(self, prompt: list[int]) -> None:
        if self.slot is not None:
            slot, self.slot = self.slot, None
            self.runtime._give_back(slot, prompt, self.kept_logits(prompt), self.cuts)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


_MODELS: dict[tuple[str, BackendOptions], LlamaCppModel] = {}
_MODELS_LOCK = threading.Lock()


def _model(path: Path, options: BackendOptions) -> LlamaCppModel:
    """The loaded GGUF for ``path`` and ``options`` (loaded once per process)."""
    key = (str(path.resolve()), options)
    with _MODELS_LOCK:
        model = _MODELS.get(key) or LlamaCppModel(path, options)
        _MODELS[key] = model
    return model


def load(request: LoadRequest) -> LoadedModel:
    """The llama.cpp backend's loader (engine.runtime.load): a ``.gguf`` (or the embedded default).
    The tokenizer is the GGUF's own, read by transformers (the grammar tables need it)."""
    name, options, progress = request.name, request.options, request.progress
    path = gguf_file_of(name)
    if path is None:
        raise ModelLoadError(f"model {name!r}: backend 'llamacpp' runs .gguf files only")
    if not path.is_file():
        raise ModelLoadError(f"model {name!r}: GGUF file not found")
    if progress is not None:
        progress(f"loading {path.name} with llama.cpp (quantized as it is)...")
    runtime = LlamaCppRuntime(_model(path, options))
    tokenizer = _gguf_tokenizer(name, path)
    if len(tokenizer) > runtime.vocab_size:
        raise ModelLoadError(f"model {name!r}: its tokenizer has {len(tokenizer)} tokens but llama.cpp "
                             f"reports {runtime.vocab_size}")
    return LoadedModel(name=name, model=None, tokenizer=tokenizer, device="cpu", dtype="gguf", runtime=runtime)


def _gguf_tokenizer(name: str, path: Path) -> Any:
    """The GGUF's tokenizer: the copy saved by an earlier run (:mod:`engine.runtime.tokenizer_cache`),
    else converted by transformers (from the de-quantized default model's saved copy when it exists:
    the same tokenizer, faster to read) and saved for the next run."""

    def convert() -> Any:
        from transformers import AutoTokenizer

        folder = cache_dir() / "SmolLM2-135M-Instruct"
        if name in (DEFAULT_MODEL, "", None) and (folder / COMPLETE_MARKER).is_file():
            return AutoTokenizer.from_pretrained(str(folder))
        return AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)

    try:
        return cached_tokenizer(path, convert)
    except Exception as exc:  # noqa: BLE001 - every failure becomes one clear message
        raise ModelLoadError(f"model {name!r}: cannot read the tokenizer of {path.name}: {exc}") from exc
