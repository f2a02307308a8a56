"""The span-selector adapter as a llama.cpp LoRA (GGUF), converted from the shipped safetensors.

Program mode on llama.cpp runs the selector merged into the weights instead
(:mod:`engine.runtime.selector.gguf_merge`: a runtime LoRA made each step 17-36% dearer); this file stays
for measuring the two side by side (``LlamaCppRuntime(model, adapter)``, scripts/measure_selector_step.py).

llama.cpp reads LoRA adapters in its own GGUF layout (what llama.cpp's ``convert_lora_to_gguf``
writes): ``general.type = "adapter"``, ``adapter.type = "lora"``, ``adapter.lora.alpha``, and per
adapted weight ``<gguf tensor>.lora_a`` (r x n_in) and ``.lora_b`` (n_out x r), applied as
``(alpha / r) * B @ A``. The one subtlety: llama.cpp stores the query and key projections of llama
models with their rows permuted for its rotary layout, so ``lora_b`` of q/k gets the same row
permutation. The converted file is cached (keyed on the adapter's bytes); nothing is committed.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

import numpy as np

from engine.runtime.sources import cache_dir
from engine.runtime.selector.files import ADAPTER_CONFIG, ADAPTER_WEIGHTS, SelectorError

_MODULES = {"q_proj": "attn_q", "k_proj": "attn_k", "v_proj": "attn_v", "o_proj": "attn_output",
            "gate_proj": "ffn_gate", "up_proj": "ffn_up", "down_proj": "ffn_down"}
_KEY = re.compile(r"^base_model\.model\.model\.layers\.(\d+)\.(?:self_attn|mlp)\.(\w+)\.lora_([AB])\.weight$")


def _permute_rows(weights: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's rotary row order for a q/k projection (rows = n_head x head_dim)."""
    return (weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:])
            .swapaxes(1, 2).reshape(weights.shape))


def _base_layout(base_gguf: Path) -> tuple[str, int, int]:
    import gguf

    reader = gguf.GGUFReader(str(base_gguf))

    def field(name: str) -> Any:
        item = reader.fields.get(name)
        if item is None:
            raise SelectorError(f"{base_gguf.name}: GGUF metadata {name!r} is missing")
        return item.contents()

    arch = str(field("general.architecture"))
    n_head = int(field(f"{arch}.attention.head_count"))
    n_head_kv = int(reader.fields[f"{arch}.attention.head_count_kv"].contents()) \
        if f"{arch}.attention.head_count_kv" in reader.fields else n_head
    return arch, n_head, n_head_kv


def gguf_lora_for(adapter: Path, base_gguf: Path) -> Path:
    """Path of ``adapter`` converted to a llama.cpp LoRA for ``base_gguf`` (converted on first use)."""
    weights = adapter / ADAPTER_WEIGHTS
    digest = hashlib.sha256(weights.read_bytes() + (adapter / ADAPTER_CONFIG).read_bytes()).hexdigest()[:16]
    out = cache_dir() / "lora" / f"{adapter.name}-{digest}.gguf"
    if not out.is_file():
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(out.name + f".tmp{os.getpid()}")
        _convert(adapter, base_gguf, tmp)
        os.replace(tmp, out)
    return out


def _convert(adapter: Path, base_gguf: Path, out: Path) -> None:
    import gguf
    from safetensors.numpy import load_file

    config = json.loads((adapter / ADAPTER_CONFIG).read_text(encoding="utf-8"))
    alpha = float(config.get("lora_alpha") or 0)
    if alpha <= 0:
        raise SelectorError(f"selector {adapter}: lora_alpha must be positive to convert for llama.cpp")
    arch, n_head, n_head_kv = _base_layout(base_gguf)
    if arch != "llama":
        raise SelectorError(f"selector {adapter}: converting for llama.cpp supports llama models, not {arch!r}")
    state = load_file(str(adapter / ADAPTER_WEIGHTS))
    writer = gguf.GGUFWriter(str(out), arch)
    writer.add_string("general.type", "adapter")
    writer.add_string("adapter.type", "lora")
    writer.add_float32("adapter.lora.alpha", alpha)
    for key in sorted(state):
        match = _KEY.match(key)
        if not match or match.group(2) not in _MODULES:
            raise SelectorError(f"selector {adapter}: cannot map adapter weight {key!r} to a llama.cpp tensor")
        layer, module, part = int(match.group(1)), match.group(2), match.group(3)
        tensor = state[key].astype(np.float32)
        if part == "B" and module in ("q_proj", "k_proj"):
            tensor = _permute_rows(tensor, n_head if module == "q_proj" else n_head_kv)
        name = f"blk.{layer}.{_MODULES[module]}.weight.lora_{part.lower()}"
        writer.add_tensor(name, np.ascontiguousarray(tensor))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
