"""The span selector merged into the base GGUF's weights, for program mode on llama.cpp.

As a runtime LoRA (:mod:`engine.runtime.selector.gguf_lora`) llama.cpp adds two small matrix products per
adapted weight to every forward: seven per layer, 210 on SmolLM2-135M, which made a program-mode
step 46% dearer than an ar step there. Merged, a program-mode forward is the base model's forward.

The merge reads the base GGUF, de-quantizes each adapted weight, adds ``(alpha / r) * B @ A``
(the q/k rows permuted into llama.cpp's rotary order, as for the LoRA file) and quantizes it
again, every other tensor and all metadata copied as they are. ``quant`` picks the adapted
weights' type: ``q8_0`` (default) keeps the adapter's change (the delta is often smaller than a
4-bit quantization step, so re-quantizing to the base's Q4_1 would round part of it away);
``same`` re-uses each weight's own type where the gguf package can write it. The file is written
once, beside the de-quantized model in the user's cache, keyed on the base file's content and the
adapter's bytes, the four most recently used kept; nothing is committed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any, Callable

import numpy as np

from engine.runtime.sources import cache_dir
from engine.runtime.selector.files import ADAPTER_CONFIG, ADAPTER_WEIGHTS, SelectorError
from engine.runtime.selector.gguf_lora import _MODULES, _base_layout, _permute_rows

QUANTS = ("q8_0", "same", "f16")
_KEY = re.compile(r"^base_model\.model\.model\.layers\.(\d+)\.(?:self_attn|mlp)\.(\w+)\.lora_([AB])\.weight$")


KEEP_MERGED = 4  # merged files kept in the cache (the least recently used go first)


def merged_gguf_for(adapter: Path, base_gguf: Path, quant: str = "q8_0",
                    progress: Callable[[str], None] | None = None) -> Path:
    """Path of ``base_gguf`` with ``adapter`` merged into its weights (written on first use, said
    through ``progress``).

    Keyed on the base file's content (not its path or time: a reinstall or a second checkout of
    the same package reuses the merged file) and the adapter's bytes. Each use marks the file as
    used; writing one removes all but the ``KEEP_MERGED`` most recently used (each is the size of
    the model)."""
    if quant not in QUANTS:
        raise SelectorError(f"merged GGUF type {quant!r}: use one of {', '.join(QUANTS)}")
    folder = cache_dir() / "merged"
    key = hashlib.sha256()
    key.update(f"{content_digest(base_gguf, folder)}\0{quant}\0v2".encode())
    key.update((adapter / ADAPTER_WEIGHTS).read_bytes())
    key.update((adapter / ADAPTER_CONFIG).read_bytes())
    out = folder / f"{base_gguf.stem}+{adapter.name}-{quant}-{key.hexdigest()[:16]}.gguf"
    if out.is_file():
        with contextlib.suppress(OSError):  # a read-only cache still serves it
            os.utime(out)
        return out
    if progress is not None:
        progress(f"merging the span-selector adapter {adapter} into a GGUF for program mode (first use only, ~20 s)...")
    folder.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    try:
        merge(adapter, base_gguf, tmp, quant)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    prune(folder, KEEP_MERGED)
    return out


def content_digest(path: Path, folder: Path) -> str:
    """SHA-256 of ``path``'s bytes, remembered in ``folder``/digests.json per (path, size, mtime):
    a 1 GB GGUF takes seconds to hash, so it is hashed again only when it changes."""
    stat = path.stat()
    stamp = f"{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}"
    memo_path = folder / "digests.json"
    try:
        memo = json.loads(memo_path.read_text(encoding="utf-8"))
        if not isinstance(memo, dict):
            memo = {}
    except (OSError, ValueError):
        memo = {}
    digest = memo.get(stamp)
    if isinstance(digest, str):
        return digest
    sha = hashlib.sha256()  # hashlib.file_digest is 3.11+; the package supports 3.10
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            sha.update(block)
    digest = memo[stamp] = sha.hexdigest()
    with contextlib.suppress(OSError):  # another process may write it too: a lost entry costs one hash
        folder.mkdir(parents=True, exist_ok=True)
        tmp = memo_path.with_name(f"digests.json.tmp{os.getpid()}")
        tmp.write_text(json.dumps(dict(list(memo.items())[-64:]), indent=0), encoding="utf-8")
        os.replace(tmp, memo_path)
    return digest


def prune(folder: Path, keep: int) -> list[Path]:
    """Remove all but the ``keep`` most recently used merged GGUFs in ``folder``; returns the removed.
    (A process that has one loaded keeps its mapping on POSIX; where removal fails it stays.)"""
    files = sorted(folder.glob("*.gguf"), key=lambda p: p.stat().st_mtime_ns, reverse=True)
    removed = []
    for old in files[keep:]:
        try:
            old.unlink()
            removed.append(old)
        except OSError:
            pass
    return removed


def _deltas(adapter: Path, base_gguf: Path) -> dict[str, np.ndarray]:
    """GGUF tensor name -> the adapter's change to it, (n_out, n_in) float32, llama.cpp row order."""
    from safetensors.numpy import load_file

    config = json.loads((adapter / ADAPTER_CONFIG).read_text(encoding="utf-8"))
    alpha, rank = float(config.get("lora_alpha") or 0), int(config.get("r") or 0)
    if alpha <= 0 or rank <= 0:
        raise SelectorError(f"selector {adapter}: lora_alpha and r must be positive to merge for llama.cpp")
    if config.get("use_rslora") or config.get("use_dora"):
        raise SelectorError(f"selector {adapter}: rsLoRA/DoRA adapters are not merged for llama.cpp")
    arch, n_head, n_head_kv = _base_layout(base_gguf)
    if arch != "llama":
        raise SelectorError(f"selector {adapter}: merging for llama.cpp supports llama models, not {arch!r}")
    parts: dict[tuple[int, str], dict[str, np.ndarray]] = {}
    for key, tensor in load_file(str(adapter / ADAPTER_WEIGHTS)).items():
        match = _KEY.match(key)
        if not match or match.group(2) not in _MODULES:
            raise SelectorError(f"selector {adapter}: cannot map adapter weight {key!r} to a llama.cpp tensor")
        parts.setdefault((int(match.group(1)), match.group(2)), {})[match.group(3)] = tensor.astype(np.float32)
    deltas: dict[str, np.ndarray] = {}
    for (layer, module), ab in parts.items():
        if set(ab) != {"A", "B"}:
            raise SelectorError(f"selector {adapter}: layer {layer} {module} lacks lora_A or lora_B")
        b = ab["B"]
        if module in ("q_proj", "k_proj"):
            b = _permute_rows(b, n_head if module == "q_proj" else n_head_kv)
        deltas[f"blk.{layer}.{_MODULES[module]}.weight"] = (alpha / rank) * (b @ ab["A"])
    return deltas


def merge(adapter: Path, base_gguf: Path, out: Path, quant: str = "q8_0") -> None:
    """Write ``base_gguf`` with ``adapter`` merged into its weights to ``out``."""
    import gguf
    from gguf import quants

    deltas = _deltas(adapter, base_gguf)
    reader = gguf.GGUFReader(str(base_gguf))
    arch = str(reader.fields["general.architecture"].contents())
    writer = gguf.GGUFWriter(str(out), arch)
    for field in reader.fields.values():
        if field.name.startswith("GGUF.") or field.name in ("general.architecture", "general.name"):
            continue  # the writer writes the first ones itself; the name is set below
        vtype = field.types[0]
        sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), vtype, sub_type=sub)
    writer.add_string("general.name", f"{_name(reader)} + span selector {adapter.name}")
    done = set()
    for tensor in reader.tensors:
        delta = deltas.get(tensor.name)
        if delta is None:  # raw bytes (quantized) or floats, as they are
            writer.add_tensor(tensor.name, np.asarray(tensor.data), raw_dtype=tensor.tensor_type)
            continue
        weights = quants.dequantize(np.asarray(tensor.data), tensor.tensor_type).reshape(delta.shape)
        weights = weights.astype(np.float32) + delta
        qtype = _target_type(tensor.tensor_type, quant)
        data: Any = weights.astype(np.float16) if qtype == gguf.GGMLQuantizationType.F16 \
            else quants.quantize(weights, qtype)
        writer.add_tensor(tensor.name, data, raw_dtype=qtype)
        done.add(tensor.name)
    missing = sorted(set(deltas) - done)
    if missing:
        raise SelectorError(f"selector {adapter}: {base_gguf.name} has no tensor {missing[0]!r}")
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def _name(reader: Any) -> str:
    field = reader.fields.get("general.name")
    return str(field.contents()) if field is not None else "model"


def _target_type(base_type: Any, quant: str) -> Any:
    import gguf

    if quant == "f16":
        return gguf.GGMLQuantizationType.F16
    if quant == "q8_0":
        return gguf.GGMLQuantizationType.Q8_0
    writable = {gguf.GGMLQuantizationType.Q4_0, gguf.GGMLQuantizationType.Q4_1, gguf.GGMLQuantizationType.Q5_0,
                gguf.GGMLQuantizationType.Q5_1, gguf.GGMLQuantizationType.Q8_0}
    return base_type if base_type in writable else gguf.GGMLQuantizationType.Q8_0
