"""Per-model decoding tables, built once per loaded model and shared by every request.

The text modes need only the end and special tokens; the grammar and the vocabulary's bytes
(xgrammar, which imports torch and transformers) are built on program mode's first use of them, so a
text-mode edit on llama.cpp starts without either.

xgrammar's tokenizer tables and each compiled program grammar are also kept in the start-up
cache (:mod:`engine.runtime.disk_cache`) under the tokenizer's fingerprint, so a headless edit
reads them back (milliseconds) instead of rebuilding them (a quarter second each on the embedded
model's vocabulary)."""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import numpy as np

from engine.language.grammar import GrammarCompilerCache
from engine.runtime.disk_cache import DiskCache
from engine.runtime.loaded import LoadedModel
from engine.runtime.plain_tokenizer import full_tokenizer

KEPT_GRAMMARS = 128  # compiled grammars kept on disk (about 0.4 MB each for a 49k vocabulary)


@dataclass(frozen=True)
class GrammarTables:
    """What program mode adds to the tables: the grammar and the vocabulary as bytes."""

    grammar: GrammarCompilerCache
    vocab_bytes: list[bytes]  # what each token id writes
    vocab_texts: list[str]  # the same, decoded leniently (digits and tags are ASCII)
    bytes_to_id: dict[bytes, int]
    max_token_bytes: int
    copy_crossing_ids: Any  # torch.long tensor: tokens with text after a "/>": they would straddle a splice
    content_bitmask: Any  # torch.int32 tensor, AND-ed into a grammar bitmask: clears the special ids' bits


class ModelTables:
    """A model's decoding tables: ``stop_ids`` and ``special_ids`` at once; the
    :class:`GrammarTables` fields (``grammar``, ``vocab_bytes``, ...) built on first use."""

    def __init__(self, loaded: LoadedModel, stop_ids: frozenset[int], special_ids: frozenset[int]):
        self._loaded: LoadedModel | None = loaded
        self.stop_ids = stop_ids
        # Special and added tokens (chat markers, end tokens, padding, unused rows): never output text.
        self.special_ids = special_ids
        self._grammar_tables: GrammarTables | None = None
        self._lock = threading.Lock()

    def text_blocked_ids(self) -> list[int]:
        """What a text mode may never write: the special ids except the end tokens that end it
        (those end the output and never reach its text)."""
        return sorted(self.special_ids - self.stop_ids)

    def prime(self) -> GrammarTables:
        """The :class:`GrammarTables`, built now if not yet (about 1 s for a 49k vocabulary
        without the start-up cache)."""
        with self._lock:
            if self._grammar_tables is None:
                assert self._loaded is not None
                self._grammar_tables = _grammar_tables(self._loaded, self.special_ids)
                self._loaded = None  # the tables keep what they need
            return self._grammar_tables

    @property
    def grammar(self) -> GrammarCompilerCache:
        return self.prime().grammar

    @property
    def vocab_bytes(self) -> list[bytes]:
        return self.prime().vocab_bytes

    @property
    def vocab_texts(self) -> list[str]:
        return self.prime().vocab_texts

    @property
    def bytes_to_id(self) -> dict[bytes, int]:
        return self.prime().bytes_to_id

    @property
    def max_token_bytes(self) -> int:
        return self.prime().max_token_bytes

    @property
    def copy_crossing_ids(self) -> Any:
        return self.prime().copy_crossing_ids

    @property
    def content_bitmask(self) -> Any:
        return self.prime().content_bitmask


_TABLES: dict[tuple[int, int], ModelTables] = {}
_LOCK = threading.Lock()


def tables_for(loaded: LoadedModel) -> ModelTables:
    """The tables depend on the tokenizer and the vocabulary only, so a base model and its
    selector copy (which share the tokenizer object) share them."""
    key = (id(loaded.tokenizer), loaded.vocab_size)
    with _LOCK:
        if key not in _TABLES:
            _TABLES[key] = ModelTables(loaded, frozenset(stop_token_ids(loaded)),
                                       frozenset(special_token_ids(loaded.tokenizer, loaded.vocab_size)))
        return _TABLES[key]


def _grammar_tables(loaded: LoadedModel, specials: frozenset[int]) -> GrammarTables:
    import torch  # xgrammar imports it anyway

    tokenizer = full_tokenizer(loaded.tokenizer)  # xgrammar reads transformers' object
    fingerprint = tokenizer_fingerprint(tokenizer, loaded.vocab_size)
    info = tokenizer_info(tokenizer, loaded.vocab_size, fingerprint)
    store = DiskGrammars(fingerprint) if fingerprint is not None else None
    grammar = GrammarCompilerCache(tokenizer, loaded.vocab_size, info=info, store=store)
    vocab_bytes = [bytes(b) for b in grammar.info.decoded_vocab]
    vocab_bytes += [b""] * (loaded.vocab_size - len(vocab_bytes))
    vocab_texts = [b.decode("utf-8", errors="replace") for b in vocab_bytes]
    bytes_to_id: dict[bytes, int] = {}
    special = set(getattr(loaded.tokenizer, "all_special_ids", []) or [])
    for i, b in enumerate(vocab_bytes):
        if b and i not in special:
            bytes_to_id.setdefault(b, i)
    crossing = [i for i, t in enumerate(vocab_texts) if "/>" in t and not t.endswith("/>")]
    return GrammarTables(
        grammar=grammar,
        vocab_bytes=vocab_bytes,
        vocab_texts=vocab_texts,
        bytes_to_id=bytes_to_id,
        max_token_bytes=max(len(b) for b in vocab_bytes),
        copy_crossing_ids=torch.tensor(crossing, dtype=torch.long),
        content_bitmask=content_bitmask(set(specials), grammar.info.vocab_size),
    )


def tokenizer_fingerprint(tokenizer: Any, vocab_size: int) -> str | None:
    """What xgrammar's tables for ``tokenizer`` depend on: its whole definition (a fast
    tokenizer's JSON), its special tokens, the vocabulary size and xgrammar's version. None for a
    tokenizer that cannot be serialized (its tables are then built each run)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    try:
        definition = backend.to_str() if backend is not None else None
    except Exception:  # noqa: BLE001 - a tokenizer without a JSON form: not cached
        definition = None
    if not definition:
        return None
    try:
        xgrammar_version = version("xgrammar")
    except PackageNotFoundError:
        xgrammar_version = "-"
    sha = hashlib.sha256(definition.encode("utf-8"))
    sha.update(f"\0{type(tokenizer).__name__}\0{sorted(getattr(tokenizer, 'all_special_ids', []) or [])}"
               f"\0{tokenizer.eos_token_id}\0{len(tokenizer)}\0{vocab_size}\0{xgrammar_version}".encode())
    return sha.hexdigest()


def tokenizer_info(tokenizer: Any, vocab_size: int, fingerprint: str | None) -> Any:
    """xgrammar's TokenizerInfo for ``tokenizer``: read from the start-up cache, else built (and kept)."""
    import xgrammar as xgr

    store, key = DiskCache("tokenizer-info", keep=8), f"tokenizer-info|{fingerprint}"
    if fingerprint is not None:
        text = store.read_text(key)
        if text is not None:
            try:
                return xgr.TokenizerInfo.deserialize_json(text)
            except Exception:  # noqa: BLE001 - unreadable: build it again
                store.forget(key)
    info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab_size)
    if fingerprint is not None:
        store.write_text(key, info.serialize_json())
    return info


class DiskGrammars:
    """Compiled program grammars of one tokenizer (``fingerprint``) in the start-up cache, one
    entry per grammar text (a region's size), the most recently used kept."""

    def __init__(self, fingerprint: str, cache: DiskCache | None = None):
        self.fingerprint = fingerprint
        self.cache = cache or DiskCache("grammars", keep=KEPT_GRAMMARS)

    def key(self, ebnf: str) -> str:
        return f"grammar|{self.fingerprint}|{hashlib.sha256(ebnf.encode('utf-8')).hexdigest()}"

    def load(self, ebnf: str, info: Any) -> Any | None:
        import xgrammar as xgr

        text = self.cache.read_text(self.key(ebnf))
        if text is None:
            return None
        try:
            return xgr.CompiledGrammar.deserialize_json(text, info)
        except Exception:  # noqa: BLE001 - unreadable: compile it again
            self.cache.forget(self.key(ebnf))
            return None

    def save(self, ebnf: str, compiled: Any) -> None:
        self.cache.write_text(self.key(ebnf), compiled.serialize_json())


def special_token_ids(tokenizer: Any, vocab_size: int) -> set[int]:
    """Ids no output may contain: the tokenizer's special tokens, its added tokens (chat-template
    markers like ``<|im_start|>``; an added token that is only whitespace is ordinary text for
    code models that add indentation runs, so it stays) and the rows past the tokenizer (padding
    of the embedding matrix). Their text is markup for the model, never code."""
    ids = {int(i) for i in (getattr(tokenizer, "all_special_ids", None) or [])}
    added = getattr(tokenizer, "added_tokens_decoder", None) or {}
    for tid, token in added.items():
        content = getattr(token, "content", str(token))
        if getattr(token, "special", True) or content.strip():
            ids.add(int(tid))
    ids.update(range(len(tokenizer), vocab_size))
    return {i for i in ids if 0 <= i < vocab_size}


def content_bitmask(blocked: set[int], vocab_size: int) -> Any:
    """A token bitmask (xgrammar's layout: int32 words, bit ``i % 32`` of word ``i // 32``) with
    every bit set but those of ``blocked``."""
    words = np.full((vocab_size + 31) // 32, 0xFFFFFFFF, dtype=np.uint32)
    for tok in blocked:
        words[tok // 32] &= np.uint32(~(1 << (tok % 32)) & 0xFFFFFFFF)
    import torch

    return torch.from_numpy(words.view(np.int32).copy()).unsqueeze(0)


def stop_token_ids(loaded: LoadedModel) -> set[int]:
    """End-of-turn tokens: the tokenizer's EOS, the generation config's, and ``<|im_end|>``."""
    tok: Any = loaded.tokenizer
    ids: set[int] = set()
    if tok.eos_token_id is not None:
        ids.add(int(tok.eos_token_id))
    ids.update(loaded.runtime.eos_ids())
    for name in ("<|im_end|>", "<|endoftext|>"):
        tid = tok.convert_tokens_to_ids(name)
        if isinstance(tid, int) and tid != getattr(tok, "unk_token_id", None) and tid >= 0:
            ids.add(tid)
    return ids


def bit_is_set(bitmask: Any, token: int) -> bool:
    word = int(bitmask[0, token // 32])
    return bool((word >> (token % 32)) & 1)


def unpack_allowed(bitmask: Any, vocab_size: int) -> np.ndarray:
    bits = np.unpackbits(bitmask.numpy().view(np.uint8), bitorder="little")[:vocab_size]
    return np.flatnonzero(bits)
