"""A GGUF's tokenizer, converted once and read back in a fraction of the time.

transformers converts a GGUF's vocabulary into a fast tokenizer on every load (about 4 s for the
embedded model, and its ``AutoTokenizer`` imports the model classes' configuration chain, another
half second). The converted tokenizer is saved once per GGUF version (path, size, mtime) and
transformers and tokenizers versions, in a folder of the start-up cache
(:mod:`engine.runtime.disk_cache`), and later loads read it back: with the ``tokenizers`` library
alone (:class:`engine.runtime.plain_tokenizer.PlainTokenizer`, no transformers import: about a
second less to start) where that answers the probe as transformers does, else with
``PreTrainedTokenizerFast``. A saved copy is used only if it encodes a probe, renders the chat
template and lists the special tokens exactly as the converted tokenizer does (checked once, when
it is written); a folder that fails to load is removed and the tokenizer converted again.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Callable

from engine.runtime import disk_cache
from engine.runtime.plain_tokenizer import PlainTokenizer

MARKER = "copy-as-decode-tokenizer.json"
PROBE = "def add(a, b):\n    \"\"\"Sum.\"\"\"\n\treturn a + b  # é ü 日本 <|im_end|>\n"
PROBE_MESSAGES = [{"role": "system", "content": "Fix."}, {"role": "user", "content": PROBE}]


def _version(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return "-"


def cache_key(gguf: Path) -> str:
    return "|".join(("tokenizer", "plain", disk_cache.file_stamp(gguf), _version("transformers"),
                     _version("tokenizers"), _version("jinja2")))


def folder_for(gguf: Path, root: Path | None = None) -> Path:
    return (root or disk_cache.startup_dir()) / "tokenizers" / disk_cache.digest(cache_key(gguf))


def cached_tokenizer(gguf: Path, convert: Callable[[], Any], root: Path | None = None) -> Any:
    """``gguf``'s tokenizer: the saved copy when one matches, else ``convert()``'s (saved for next time)."""
    if not disk_cache.enabled():
        return convert()
    folder = folder_for(gguf, root)
    loaded = _load(folder, cache_key(gguf))
    if loaded is not None:
        return loaded
    tokenizer = convert()
    _save(tokenizer, folder, cache_key(gguf))
    return tokenizer


def _load(folder: Path, key: str) -> Any | None:
    try:
        marker = json.loads((folder / MARKER).read_text(encoding="utf-8"))
        if not isinstance(marker, dict) or marker.get("key") != key:
            raise ValueError("another key's folder")
        for name, expected in marker["files"].items():
            if hashlib.sha256((folder / name).read_bytes()).hexdigest() != expected:
                raise ValueError(f"{name} changed")
        if marker.get("plain") is True:
            return PlainTokenizer(folder)
        from transformers import PreTrainedTokenizerFast

        return PreTrainedTokenizerFast.from_pretrained(str(folder), local_files_only=True)
    except FileNotFoundError:
        return None
    except Exception:  # noqa: BLE001 - a partial or corrupt copy: convert again
        shutil.rmtree(folder, ignore_errors=True)
        return None


def _same(a: Any, b: Any) -> bool:
    """Do two tokenizers behave the same where the engine uses them (engine.core.tokens,
    engine.decoding.prompt.render, engine.decoding.tables): ids of a probe and of a rendered chat,
    the text back, the special, added and end tokens?"""
    try:
        def seen(t: Any) -> tuple:
            chat = t.apply_chat_template(PROBE_MESSAGES, add_generation_prompt=True, tokenize=False)
            ids = list(t.encode(PROBE, add_special_tokens=False))
            return (ids, chat, list(t.encode(chat, add_special_tokens=False)),
                    t.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False),
                    list(t.all_special_ids), len(t), t.eos_token_id, t.unk_token_id,
                    {int(k): (str(v), getattr(v, "special", None)) for k, v in t.added_tokens_decoder.items()},
                    [t.convert_tokens_to_ids(name) for name in ("<|im_end|>", "<|endoftext|>", PROBE)])

        return seen(a) == seen(b)
    except Exception:  # noqa: BLE001 - e.g. no chat template on one side: not the same
        return False


def _save(tokenizer: Any, folder: Path, key: str) -> None:
    """Save ``tokenizer`` into ``folder`` (a temporary folder renamed into place) if the copy reads
    back the same; any failure leaves no folder (the next run converts again)."""
    tmp = None
    try:
        from transformers import PreTrainedTokenizerFast

        folder.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=".tmp-"))
        tokenizer.save_pretrained(str(tmp))
        reread = PreTrainedTokenizerFast.from_pretrained(str(tmp), local_files_only=True)
        if not _same(tokenizer, reread):
            return
        plain = _plain_same(tokenizer, tmp)
        files = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(tmp.iterdir()) if p.is_file()}
        (tmp / MARKER).write_text(json.dumps({"key": key, "files": files, "plain": plain}), encoding="utf-8")
        shutil.rmtree(folder, ignore_errors=True)  # a stale or broken copy under the same name
        os.replace(tmp, folder)
        tmp = None
    except Exception:  # noqa: BLE001 - the cache is an optimisation: the caller has its tokenizer
        pass
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                shutil.rmtree(tmp, ignore_errors=True)


def _plain_same(tokenizer: Any, folder: Path) -> bool:
    """Does the saved copy in ``folder``, read without transformers, answer as ``tokenizer`` does?"""
    try:
        plain = PlainTokenizer(folder)
        return _same(tokenizer, plain) and plain._full is None  # answered without transformers
    except Exception:  # noqa: BLE001 - unreadable without transformers: read with it
        return False
