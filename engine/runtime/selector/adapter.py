"""The span-selector adapter on disk and in memory.

Which adapter a model uses is the ``selector`` setting: ``auto`` (the shipped adapter, for the
embedded default model, when its weights are present), ``none`` (the base model) or a folder.
Program mode runs on a copy of the base model with the adapter merged in; text modes keep the
base model. Merging (instead of keeping LoRA layers and switching them off for text modes) costs
one copy of the adapted linear weights (~0.4 GB for SmolLM2-135M in fp32) but no time per
forward, and leaves the base model's weights bit-identical, so text-mode outputs do not change.
Everything not adapted (embeddings, tied LM head, norms) is shared between the two.
"""

from __future__ import annotations

import copy
import json
import os
import warnings
from pathlib import Path
from typing import Any

from engine.runtime.loaded import LoadedModel
from engine.runtime.sources import DEFAULT_MODEL
from engine.runtime.selector.files import ADAPTER_CONFIG, ADAPTER_WEIGHTS, SelectorError

SHIPPED_ADAPTER_DIR = Path(__file__).resolve().parent / "smollm2-135m"
SHIPPED_APPLY_ADAPTER_DIR = Path(__file__).resolve().parent / "smollm2-135m-apply"  # the apply selector (engine.apply)
SELECTOR_INFO = "selector.json"  # {"prompt_layout": ...}: which selector prompt the adapter was trained on
MAX_ADAPTER_BYTES = 10_000_000  # the adapter is committed to the repository, so it must stay small
_PEFT_PREFIX = "base_model.model."

# Where the selector prompt shows the focus hint; an adapter is trained on one layout and must be
# prompted with it (engine.decoding.prompt renders both). ``hint-after``: after the numbered region,
# so everything up to the region's last line is the same with or without a hint and wherever the
# cursor is (the localizer's hintless forward is the hinted prompt's prefix). ``hint-before``: before
# the region, the layout older adapters were trained on.
HINT_AFTER = "hint-after"
HINT_BEFORE = "hint-before"
SELECTOR_LAYOUTS = (HINT_AFTER, HINT_BEFORE)


class AdapterTooLarge(SelectorError):
    """The written adapter is over the size limit (it would not be committed)."""


def resolve_selector(selector: str | None, model_name: str) -> Path | None:
    """Adapter folder for a ``selector`` setting, or None for the base model.

    ``auto`` picks the shipped adapter only for the embedded default model (an adapter is tied
    to the weights it was trained on) and only when its weights file exists; a folder must hold
    ``adapter_model.safetensors`` and ``adapter_config.json``.
    """
    choice = (selector or "auto").strip()
    if choice == "none":
        return None
    if choice == "auto":
        shipped = SHIPPED_ADAPTER_DIR / ADAPTER_WEIGHTS
        if model_name in (DEFAULT_MODEL, "", None) and shipped.is_file():
            return SHIPPED_ADAPTER_DIR
        return None
    folder = Path(choice).expanduser()
    if not folder.is_dir():
        raise SelectorError(f"selector {selector!r}: no such folder; use 'auto', 'none' or a folder "
                            f"that holds {ADAPTER_WEIGHTS} and {ADAPTER_CONFIG}")
    for name in (ADAPTER_WEIGHTS, ADAPTER_CONFIG):
        if not (folder / name).is_file():
            raise SelectorError(f"selector {selector!r}: {name} is missing in {folder} "
                                "(only safetensors adapters are loaded; train one with 'copy-as-decode train-selector')")
    return folder


def resolve_apply_selector(selector: str | None, model_name: str) -> Path | None:
    """The apply selector's folder for a ``selector`` setting: the shipped one with the embedded
    default model under ``auto`` (when its weights are present), else None (an apply's program
    then runs on the span selector's copy)."""
    shipped = SHIPPED_APPLY_ADAPTER_DIR / ADAPTER_WEIGHTS
    if (selector or "auto").strip() == "auto" and model_name in (DEFAULT_MODEL, "", None) and shipped.is_file():
        return SHIPPED_APPLY_ADAPTER_DIR
    return None


def adapter_state(peft_model: Any, dtype: Any = None) -> dict[str, Any]:
    """The adapter's tensors (peft key names), detached on the CPU, optionally cast."""
    from peft import get_peft_model_state_dict

    state = get_peft_model_state_dict(peft_model)
    return {k: (v.detach().to("cpu", dtype=dtype) if dtype is not None else v.detach().to("cpu")).contiguous()
            for k, v in state.items()}


def save_adapter(peft_model: Any, folder: Path, base_model_name: str, dtype: Any = None,
                 max_bytes: int = MAX_ADAPTER_BYTES, job: str = "edit") -> int:
    """Write ``adapter_model.safetensors`` + ``adapter_config.json``; return the weights' size.

    Raises :class:`AdapterTooLarge` (and writes nothing) when the weights exceed ``max_bytes``.
    ``dtype`` (default float16) halves the file against fp32; the merge upcasts again.
    """
    import torch
    from safetensors.torch import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    state = adapter_state(peft_model, torch.float16 if dtype is None else dtype)
    tmp = folder / f".{ADAPTER_WEIGHTS}.tmp{os.getpid()}"
    save_file(state, str(tmp), metadata={"format": "pt"})
    size = tmp.stat().st_size
    if size > max_bytes:
        tmp.unlink()
        raise AdapterTooLarge(f"adapter weights are {size:,} bytes, over the limit of {max_bytes:,}: lower --rank "
                              "or --save-dtype, or adapt fewer layers (--target-modules)")
    os.replace(tmp, folder / ADAPTER_WEIGHTS)
    config = copy.deepcopy(peft_model.peft_config["default"])
    config.base_model_name_or_path = base_model_name  # not the local cache path of whoever trained it
    config.inference_mode = True
    config.save_pretrained(str(folder))
    (folder / SELECTOR_INFO).write_text(json.dumps({"prompt_layout": HINT_AFTER, "job": job}) + "\n", encoding="utf-8")
    return size


def prompt_layout(selector: str | None) -> str:
    """The selector prompt layout (engine.decoding.prompt.HINT_AFTER / HINT_BEFORE) for the adapter folder
    ``selector``: what its ``selector.json`` records; ``hint-before`` for adapters written before
    that file existed (they were trained on it); ``hint-after`` for no adapter (recording the
    training data of a new one)."""
    if selector is None:
        return HINT_AFTER
    path = Path(selector) / SELECTOR_INFO
    if not path.is_file():
        return HINT_BEFORE
    try:
        layout = json.loads(path.read_text(encoding="utf-8")).get("prompt_layout")
    except (OSError, ValueError, AttributeError) as exc:
        raise SelectorError(f"selector {selector}: cannot read {SELECTOR_INFO}: {exc}") from exc
    if layout not in SELECTOR_LAYOUTS:
        raise SelectorError(f"selector {selector}: {SELECTOR_INFO} names an unknown prompt layout {layout!r} "
                            f"(known: {', '.join(SELECTOR_LAYOUTS)})")
    return layout


def _lora_config(folder: Path) -> Any:
    from peft import LoraConfig

    try:
        raw = json.loads((folder / ADAPTER_CONFIG).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SelectorError(f"selector {folder}: cannot read {ADAPTER_CONFIG}: {exc}") from exc
    if not isinstance(raw, dict) or raw.get("peft_type") != "LORA":
        raise SelectorError(f"selector {folder}: {ADAPTER_CONFIG} is not a LoRA adapter config (peft_type LORA)")
    return LoraConfig.from_pretrained(str(folder))


def merged_model(base: Any, folder: Path) -> Any:
    """A copy of ``base`` with the adapter in ``folder`` merged into its weights.

    Parameters of modules the adapter does not touch are shared with ``base`` (not copied), and
    ``base`` itself is left unchanged. Raises :class:`SelectorError` when the adapter does not
    fit the model (other architecture or size).
    """
    import torch
    from peft import PeftModel, set_peft_model_state_dict
    from safetensors.torch import load_file

    folder = Path(folder)
    config = _lora_config(folder)
    try:
        state = load_file(str(folder / ADAPTER_WEIGHTS), device="cpu")
    except Exception as exc:  # noqa: BLE001 - a corrupt file becomes one clear message
        raise SelectorError(f"selector {folder}: cannot read {ADAPTER_WEIGHTS}: {exc}") from exc
    targets = {_module_of(key) for key in state}
    modules = dict(base.named_modules())
    missing = sorted(t for t in targets if t not in modules)
    if missing:
        raise SelectorError(f"selector {folder}: adapter targets modules the model does not have "
                            f"(e.g. {missing[0]!r}); it was trained for another model")
    memo: dict[int, Any] = {}
    for name, module in modules.items():
        if name not in targets:
            for tensor in list(module.parameters(recurse=False)) + list(module.buffers(recurse=False)):
                memo[id(tensor)] = tensor
    clone = copy.deepcopy(base, memo)
    with torch.random.fork_rng(devices=[]), warnings.catch_warnings():  # LoRA init is random: keep callers' RNG
        warnings.filterwarnings("ignore", category=FutureWarning, message=".*gradient_checkpointing.*")
        peft_model = PeftModel(clone, config)
    try:
        result = set_peft_model_state_dict(peft_model, state)
    except RuntimeError as exc:  # shape mismatch
        raise SelectorError(f"selector {folder}: adapter does not fit this model: {exc}") from exc
    unexpected = list(getattr(result, "unexpected_keys", []))
    not_loaded = [k for k in getattr(result, "missing_keys", []) if "lora_" in k]
    if unexpected or not_loaded:
        raise SelectorError(f"selector {folder}: adapter keys do not match the model "
                            f"(unexpected: {unexpected[:2]}, not loaded: {not_loaded[:2]})")
    merged = peft_model.merge_and_unload()
    merged.eval()
    return merged


def _module_of(key: str) -> str:
    """``base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight`` -> ``model.layers.0.self_attn.q_proj``."""
    name = key[len(_PEFT_PREFIX):] if key.startswith(_PEFT_PREFIX) else key
    head, sep, _ = name.partition(".lora_")
    if not sep:
        raise SelectorError(f"adapter key {key!r} is not a LoRA weight")
    return head


def load_selector(loaded: LoadedModel, selector: str | None = "auto", progress: Any = None) -> LoadedModel | None:
    """The program-mode model for a ``selector`` setting: ``loaded`` with the adapter in a copy
    (``LoadedModel.selector`` = the adapter folder), as its runtime gives one (merged into a copy of
    the weights in process, the server's LoRA module on vLLM), or None when the base model is used."""
    folder = resolve_selector(selector, loaded.name)
    if folder is None:
        return None
    return loaded.runtime.with_selector(loaded, folder, progress)
