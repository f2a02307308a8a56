"""The transformers backend: the model runs in-process as a torch module (any device/dtype).

A session's ``DynamicCache`` outlives it: on close, its prompt part goes to the runtime's
:class:`engine.runtime.prefix_cache.PrefixStore`, and the next session whose prompt shares a prefix with
it crops it to that prefix and forwards only the rest (no copy: a cache is in one session or in
the store)."""

from __future__ import annotations

import contextlib
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import torch

from engine.core.choices import never_cancelled
from engine.core.defaults import PREFIX_CACHE_TOKENS
from engine.core.errors import Cancelled
from engine.runtime.cost import CostModel, cost_path
from engine.runtime.kinds import InProcessRuntime
from engine.core.errors import ModelLoadError
from engine.runtime.loaded import LoadedModel, LoadRequest
from engine.runtime.prefix_cache import PrefixStore
from engine.runtime.selector.adapter import merged_model
from engine.runtime.session import Forward, ForwardLog, Session
from engine.runtime.sources import Progress, downloads_allowed, load_tokenizer, resolve_source

# Prefills run in chunks ending at multiples of this, so a reused prompt prefix is bit-identical to
# a fresh prefill (engine.runtime.session.Session._prefill), and a cancel stops a prefill between two
# chunks: a chunk is about 0.5 s of work on a 2-core CPU (SmolLM2-135M: 1,440 prompt tokens took 7.3 s
# in 256-token chunks, one thread). 128-token chunks cost what 256-token ones do per token here (1,280
# tokens, median of 3 on a loaded 2-core box: 14.2 s vs 15.4 s; 64: 20.2 s); a reused prefix gives back
# at most 127 tokens of it.
PREFILL_ALIGN = 128


class TransformersSession(Session):
    """A transformers ``DynamicCache``; the LM head runs on the requested rows only."""

    def __init__(self, runtime: "TransformersRuntime"):
        super().__init__(cost=runtime.cost, align=PREFILL_ALIGN)
        self.runtime = runtime
        self.model, self.device = runtime.model, runtime.device
        self.cache: Any = None
        # (engine.runtime.session) exact when the LM head can run apart from the decoder on the last row
        # (_last_row_apart): where the model applies nothing after it (no logit soft-capping, as
        # Gemma 2 has)
        self.exact_rows = (getattr(self.model.config, "final_logit_softcapping", None) is None
                           and self.model.get_output_embeddings() is not None)

    def _new_cache(self) -> Any:
        from transformers import DynamicCache

        return DynamicCache(config=self.model.config)

    def _begin(self, ids: list[int], max_reuse: int) -> int:
        found = self.runtime.prefixes.take(ids)
        if found is not None:
            reuse = self._reuse(found, max_reuse)
            if reuse > 0:
                _crop_to(found.state, reuse)
                self.cache = found.state
                return reuse
        self.cache = self._new_cache()
        return 0

    def _release(self, prompt: list[int]) -> None:
        cache, self.cache = self.cache, None
        if cache is not None and prompt:
            _crop_to(cache, len(prompt))
            self.runtime.prefixes.put(prompt, cache, self.kept_logits(prompt), self.cuts)

    @torch.inference_mode()
    def _forward(self, ids: list[int], rows: list[int]) -> torch.Tensor:
        if self.cache is None:
            self.cache = self._new_cache()
        with self._stopped_between_layers():
            return self._forward_rows(ids, rows)

    def _forward_rows(self, ids: list[int], rows: list[int]) -> torch.Tensor:
        input_ids = torch.tensor([ids], dtype=torch.long, device=self.device)
        keep: int | torch.Tensor
        last = len(ids) - 1
        if rows == list(range(len(ids))):
            keep = 0
        elif rows == [last]:
            keep = 1
        elif rows[-1] == last and self.prefilling and self.exact_rows:
            return self._last_row_apart(input_ids, rows)
        else:
            keep = torch.tensor(rows, dtype=torch.long, device=self.device)
        out = self.model(input_ids=input_ids, cache=self.cache, use_cache=True, logits_to_keep=keep)
        return out.logits[0].float()

    def _last_row_apart(self, input_ids: torch.Tensor, rows: list[int]) -> torch.Tensor:
        """Rows ending with the last one: the LM head runs on the last row alone, exactly as when
        it is the only row asked for (a matmul over more rows rounds differently), so these
        logits can stand in for the prompt's own prefill (engine.runtime.session, ``exact_rows``)."""
        captured: list[torch.Tensor] = []
        hook = self.model.get_decoder().register_forward_hook(
            lambda _module, _args, output: captured.append(output.last_hidden_state))
        try:
            out = self.model(input_ids=input_ids, cache=self.cache, use_cache=True, logits_to_keep=1)
        finally:
            hook.remove()
        others = self.model.get_output_embeddings()(captured[0][:, rows[:-1]])
        return torch.cat([others[0], out.logits[0]]).float()

    @contextlib.contextmanager
    def _stopped_between_layers(self) -> Iterator[None]:
        """A cancel seen before any decoder layer stops the forward there (Cancelled), so a
        forward of any size stops within one layer's work (a thirtieth of SmolLM2-135M's) and its
        arithmetic is untouched: the hooks only read the flag. The layers that ran take their new
        positions back out of the cache, which then holds ``length`` positions, as before. The
        hooks are the model's, so they act in this thread only."""
        layers = getattr(self.model.get_decoder(), "layers", None)
        if self.cancelled is never_cancelled or layers is None:
            yield
            return
        thread = threading.get_ident()

        def check(_module: Any, _args: Any) -> None:
            if threading.get_ident() == thread and self.cancelled():
                raise Cancelled("cancelled during a forward")

        handles = [layer.register_forward_pre_hook(check) for layer in layers]
        try:
            yield
        except Cancelled:
            for layer in self.cache.layers:
                extra = layer.get_seq_length() - self.length
                if extra > 0:
                    layer.crop(-extra)
            raise
        finally:
            for handle in handles:
                handle.remove()

    def _truncate(self, length: int) -> None:
        self.cache.crop(length - self.length)  # transformers 5.x: negative = tokens to remove


def _crop_to(cache: Any, length: int) -> None:
    """Keep the first ``length`` positions of a cache (transformers 5.x crops by a negative count)."""
    held = cache.get_seq_length()
    if length < held:
        cache.crop(length - held)


class TransformersRuntime(InProcessRuntime):
    """A causal LM module plus where it runs, the KV of its last prompts (``prefixes``; a budget
    of ``prefix_tokens`` tokens, 0 turns reuse off) and what its forwards cost (``cost``)."""

    backend = "transformers"

    def __init__(self, model: Any, device: str, prefix_tokens: int = PREFIX_CACHE_TOKENS):
        self.model, self.device = model, device
        self.prefixes: PrefixStore[Any] = PrefixStore(prefix_tokens)
        identity = getattr(getattr(model, "config", None), "_name_or_path", "") or type(model).__name__
        self.cost = CostModel(cost_path("transformers", identity, device, getattr(model, "dtype", ""),
                                        torch.get_num_threads()))

    @property
    def vocab_size(self) -> int:
        return int(self.model.config.vocab_size)

    def describe(self) -> str:
        return f"transformers on {self.device}"

    def facts(self) -> dict[str, str]:
        """torch's threads as they are: the process's setting (torch's default, or a benchmark's
        pin), not measured at load."""
        source = str(getattr(getattr(self.model, "config", None), "_name_or_path", "") or type(self.model).__name__)
        return {"weights": source, "threads": f"{torch.get_num_threads()} (torch's own count: the threads setting is llama.cpp's)"}

    def context_limit(self) -> int | None:
        value = getattr(getattr(self.model, "config", None), "max_position_embeddings", None)
        return int(value) if isinstance(value, int) and value > 0 else None

    def with_selector(self, loaded: LoadedModel, folder: Path, progress: Progress | None) -> LoadedModel:
        """The adapter merged into a copy of the model (engine.runtime.selector.adapter.merged_model),
        on a runtime with this one's prompt-cache budget."""
        if progress is not None:
            progress(f"merging the span-selector adapter {folder} into a copy of the model for program mode...")
        model = merged_model(self.model, folder)
        return LoadedModel(name=loaded.name, model=model, tokenizer=loaded.tokenizer, device=loaded.device,
                           dtype=loaded.dtype, selector=str(folder),
                           runtime=TransformersRuntime(model, self.device, self.prefixes.max_tokens))

    def eos_ids(self) -> set[int]:
        gen_eos = getattr(self.model.generation_config, "eos_token_id", None)
        if isinstance(gen_eos, int):
            return {gen_eos}
        return {int(i) for i in gen_eos} if gen_eos else set()

    def session(self) -> TransformersSession:
        return TransformersSession(self)

    def close(self) -> None:
        """Drop the kept prompt caches and save the learned costs."""
        self.prefixes.clear()
        self.cost.save()

    @contextlib.contextmanager
    def meter(self) -> Iterator[ForwardLog]:
        """Hooks on the top-level module see every forward, whoever makes it (a session or
        ``generate``). On CUDA the post-hook synchronises, so the time is the forward's."""
        log = ForwardLog()
        state = {"tokens": 0, "start": 0.0}

        def pre(module: Any, args: Any, kwargs: dict) -> None:
            ids = kwargs.get("input_ids")
            if ids is None and args:
                ids = args[0]
            if ids is None:
                ids = kwargs.get("inputs_embeds")
            state["tokens"] = int(ids.shape[1]) if ids is not None else 0
            state["start"] = time.perf_counter()

        def post(module: Any, args: Any, kwargs: dict, output: Any) -> None:
            if str(self.device).startswith("cuda"):
                torch.cuda.synchronize()
            log.records.append(Forward(state["tokens"], time.perf_counter() - state["start"]))

        handles = [self.model.register_forward_pre_hook(pre, with_kwargs=True),
                   self.model.register_forward_hook(post, with_kwargs=True)]
        try:
            yield log
        finally:
            for handle in handles:
                handle.remove()

    @torch.inference_mode()
    def prompt_lookup(self, prompt_ids: Sequence[int], max_new_tokens: int, stop_ids: Sequence[int],
                      finished: Callable[[list[int]], bool], pad_id: int | None,
                      blocked: Sequence[int] = ()) -> list[int]:
        """Greedy generation with transformers' own prompt-lookup drafting (``pld`` mode's peer);
        ``blocked`` ids are suppressed (never generated)."""
        from transformers import StoppingCriteria, StoppingCriteriaList

        n_prompt = len(prompt_ids)

        class Finished(StoppingCriteria):
            def __call__(self, input_ids, scores, **kwargs):  # noqa: ANN001
                return torch.tensor([finished(input_ids[0, n_prompt:].tolist())], device=input_ids.device)

        ids = torch.tensor([list(prompt_ids)], device=self.device)
        result = self.model.generate(
            ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=max_new_tokens,
            prompt_lookup_num_tokens=10, eos_token_id=sorted(stop_ids), pad_token_id=pad_id,
            stopping_criteria=StoppingCriteriaList([Finished()]),
            **({"suppress_tokens": list(blocked)} if blocked else {}),
        )
        return result[0, n_prompt:].tolist()


def choose_device(device: str | None = None) -> str:
    if device and device != "auto":
        if device.startswith("cuda") and not torch.cuda.is_available():
            raise ModelLoadError(f"device {device!r} was asked for but CUDA is not available")
        return device
    return "cuda" if torch.cuda.is_available() else "cpu"


def choose_dtype(device: str, dtype: str | None = None) -> Any:
    if dtype and dtype != "auto":
        try:
            return {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16,
                    "bf16": torch.bfloat16, "float16": torch.float16, "fp16": torch.float16}[dtype]
        except KeyError:
            raise ModelLoadError(f"unknown dtype {dtype!r}; use auto, float32, bfloat16 or float16") from None
    return torch.bfloat16 if device.startswith("cuda") else torch.float32


def load(request: LoadRequest) -> LoadedModel:
    """The transformers backend's loader (engine.runtime.load): a folder, hub id or ``.gguf``
    (de-quantized) as a torch module on ``request.device``."""
    name, device, dtype, progress = request.name, request.device, request.dtype, request.progress
    trust_remote_code, prefix_tokens = request.trust_remote_code, request.options.prefix_cache_tokens
    source, gguf_file = resolve_source(name, progress)  # first: a missing model fails before the weights load
    from transformers import AutoModelForCausalLM

    device_name = choose_device(device)
    torch_dtype = choose_dtype(device_name, dtype)
    if progress is not None:
        progress(f"loading model {name!r} on {device_name} ({str(torch_dtype).removeprefix('torch.')})...")
    tokenizer = load_tokenizer(name, progress, trust_remote_code)
    try:
        model = AutoModelForCausalLM.from_pretrained(
            source, gguf_file=gguf_file, dtype=torch_dtype, trust_remote_code=trust_remote_code,
            use_safetensors=None if gguf_file else _prefer_safetensors(source),
            local_files_only=not downloads_allowed(),
        )
    except Exception as exc:  # noqa: BLE001
        raise ModelLoadError(f"model {name!r}: cannot load: {exc}") from exc
    model.to(device_name)
    model.eval()
    if model.generation_config is not None:
        model.generation_config.pad_token_id = model.generation_config.pad_token_id or tokenizer.eos_token_id
    return LoadedModel(name=name, model=model, tokenizer=tokenizer, device=device_name, dtype=torch_dtype,
                       runtime=TransformersRuntime(model, device_name, prefix_tokens))


def _prefer_safetensors(source: str) -> bool | None:
    """True for local folders that have safetensors (never fall back to pickles silently)."""
    path = Path(source)
    if path.is_dir():
        return True if any(path.glob("*.safetensors")) else None
    return True
