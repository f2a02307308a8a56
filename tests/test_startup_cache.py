"""The start-up cache (engine.runtime.disk_cache) and what a headless edit reads from it: the
GGUF's converted tokenizer, xgrammar's tokenizer tables, compiled grammars and the measured
thread count. Each is read back when its key matches, rebuilt when it is absent, corrupt,
partial or another key's."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from engine.runtime import disk_cache, tokenizer_cache
from engine.runtime.disk_cache import DiskCache
from engine.runtime.plain_tokenizer import PlainTokenizer
from engine.runtime.threads import REMEMBER_S, ThreadChoice, remember, remembered


@pytest.fixture
def cache(tmp_path: Path) -> DiskCache:
    return DiskCache("things", keep=3, root=tmp_path)


def test_an_entry_reads_back_under_its_key_only(cache: DiskCache):
    assert cache.read("a") is None
    cache.write("a", b"alpha\nbeta")
    assert cache.read("a") == b"alpha\nbeta"
    assert cache.read("b") is None


@pytest.mark.parametrize("damage", ["flip a body byte", "truncate", "empty", "no header", "another key"])
def test_a_damaged_entry_is_ignored_and_removed(cache: DiskCache, damage: str):
    path = cache.write("a", b"x" * 1000)
    raw = path.read_bytes()
    if damage == "flip a body byte":
        raw = raw[:-10] + b"y" + raw[-9:]
    elif damage == "truncate":
        raw = raw[:len(raw) // 2]
    elif damage == "empty":
        raw = b""
    elif damage == "no header":
        raw = b"x" * 1000
    else:  # a file whose header names another key (a digest collision, or a file moved by hand)
        head, _, body = raw.partition(b"\n")
        header = json.loads(head)
        header["key"] = "b"
        raw = json.dumps(header).encode() + b"\n" + body
    path.write_bytes(raw)
    assert cache.read("a") is None
    assert not path.exists()
    cache.write("a", b"again")
    assert cache.read("a") == b"again"


def test_the_least_recently_used_entries_go_beyond_keep(cache: DiskCache):
    for i in range(5):
        path = cache.write(f"k{i}", b"v")
        stamp = time.time() - 100 + i
        os.utime(path, (stamp, stamp))
    cache.prune()
    assert [cache.read(f"k{i}") for i in range(5)] == [None, None, b"v", b"v", b"v"]


def test_the_cache_can_be_turned_off(cache: DiskCache, monkeypatch: pytest.MonkeyPatch):
    cache.write("a", b"v")
    monkeypatch.setenv(disk_cache.OFF_VARIABLE, "1")
    assert cache.read("a") is None
    assert cache.write("b", b"v") is None


def test_an_unwritable_cache_costs_only_the_next_run(tmp_path: Path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    cache = DiskCache("things", root=blocker)
    assert cache.write("a", b"v") is None
    assert cache.read("a") is None


def test_a_measured_thread_count_is_remembered_for_a_while(cache: DiskCache):
    choice = ThreadChoice(2, "measured: 1 thread 14 ms/token, 2 threads 10 ms/token")
    now = time.time()
    assert remembered("model|cpus 0,1|counts 1,2", now, cache) is None
    remember("model|cpus 0,1|counts 1,2", choice, now, cache)
    again = remembered("model|cpus 0,1|counts 1,2", now + 120, cache)
    assert again is not None and again.threads == 2
    assert again.reason.startswith(choice.reason) and "remembered from 2 min ago" in again.reason
    assert remembered("model|cpus 0,1|counts 1", now + 120, cache) is None  # the load leaves other counts
    assert remembered("model|cpus 0,1|counts 1,2", now + REMEMBER_S + 1, cache) is None


def test_a_garbled_thread_entry_is_measured_again(cache: DiskCache):
    cache.write_text("k", json.dumps({"threads": "many"}))
    assert remembered("k", time.time(), cache) is None
    assert cache.read("k") is None


# -- the GGUF's tokenizer ----------------------------------------------------------------------


def test_a_gguf_tokenizer_is_converted_once_then_read_back(tokenizer, tmp_path: Path):
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF stand-in: the key reads its path, size and time")
    conversions = []

    def convert():
        conversions.append(1)
        return tokenizer

    root = tmp_path / "cache"
    first = tokenizer_cache.cached_tokenizer(gguf, convert, root)
    assert first is tokenizer and len(conversions) == 1
    again = tokenizer_cache.cached_tokenizer(gguf, convert, root)
    assert len(conversions) == 1 and again is not tokenizer
    assert isinstance(again, PlainTokenizer) and again._full is None  # read without transformers
    text = 'def f(x):\n\treturn x  # "é"\n'
    assert again.encode(text, add_special_tokens=False) == tokenizer(text, add_special_tokens=False)["input_ids"]
    messages = [{"role": "user", "content": text}]
    assert (again.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
            == tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False))
    assert again.eos_token_id == tokenizer.eos_token_id and len(again) == len(tokenizer)

    # A changed file (another size) is another key: converted again.
    gguf.write_bytes(b"GGUF stand-in, a new version of the file")
    tokenizer_cache.cached_tokenizer(gguf, convert, root)
    assert len(conversions) == 2


def test_a_corrupt_saved_tokenizer_is_converted_again(tokenizer, tmp_path: Path):
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF stand-in")
    root = tmp_path / "cache"
    tokenizer_cache.cached_tokenizer(gguf, lambda: tokenizer, root)
    folder = tokenizer_cache.folder_for(gguf, root)
    saved = folder / "tokenizer.json"
    saved.write_text(saved.read_text()[:1000])  # a partial write
    conversions = []
    assert tokenizer_cache.cached_tokenizer(gguf, lambda: conversions.append(1) or tokenizer, root) is tokenizer
    assert conversions == [1]
    assert (folder / tokenizer_cache.MARKER).is_file()  # written afresh
    assert tokenizer_cache.cached_tokenizer(gguf, lambda: pytest.fail("converted again"), root) is not None


# -- xgrammar's tables and compiled grammars -------------------------------------------------


def _program_accepted(grammar_cache, n_lines: int, program: str) -> bool:
    matcher = grammar_cache.matcher(n_lines)
    return bool(matcher.accept_string(program)) and matcher.is_terminated()


def test_compiled_grammars_and_tokenizer_tables_are_read_back(tokenizer, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch):
    from engine.decoding import tables
    from engine.language.grammar import GrammarCompilerCache, program_ebnf

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    vocab = 49152
    fingerprint = tables.tokenizer_fingerprint(tokenizer, vocab)
    assert fingerprint is not None and fingerprint == tables.tokenizer_fingerprint(tokenizer, vocab)
    assert fingerprint != tables.tokenizer_fingerprint(tokenizer, vocab + 64)

    info = tables.tokenizer_info(tokenizer, vocab, fingerprint)
    entries = list((disk_cache.startup_dir() / "tokenizer-info").glob("*.entry"))
    assert len(entries) == 1
    read = tables.tokenizer_info(tokenizer, vocab, fingerprint)
    assert read.vocab_size == info.vocab_size and read.decoded_vocab == info.decoded_vocab

    store = tables.DiskGrammars(fingerprint)
    program = '<program><copy lines="1-2"/><gen>    return a + b\n</gen></program>'
    built = GrammarCompilerCache(tokenizer, vocab, info=info, store=store)
    assert _program_accepted(built, 3, program)
    assert len(list(store.cache.folder.glob("*.entry"))) == 1

    class NoCompiler:  # a fake compiler: reading back must not compile
        def compile_grammar(self, ebnf):
            raise AssertionError("compiled although the grammar was stored")

    read_back = GrammarCompilerCache(tokenizer, vocab, info=read, store=store)
    read_back.compiler = NoCompiler()
    assert _program_accepted(read_back, 3, program)
    assert not read_back.matcher(3).accept_string('<program><copy lines="4-4"/>')

    # A corrupt entry is compiled again (and stored afresh).
    (entry,) = store.cache.folder.glob("*.entry")
    entry.write_bytes(entry.read_bytes()[:-100])
    rebuilt = GrammarCompilerCache(tokenizer, vocab, info=read, store=store)
    assert _program_accepted(rebuilt, 3, program)
    assert len(list(store.cache.folder.glob("*.entry"))) == 1
    assert store.load(program_ebnf(3), read) is not None


# -- what a llama.cpp load imports -------------------------------------------------------------


@pytest.mark.model
def test_a_llamacpp_load_imports_no_torch(tmp_path: Path):
    """Loading the embedded GGUF on llama.cpp (model, selector copy, tokenizer) imports no torch:
    it comes with xgrammar (program mode) or a caller that asks for tensors (the text modes decode
    numpy logits: tests/test_loaded_modules.py).
    Run twice, so the second load reads the start-up cache as a user's second edit does."""
    import subprocess
    import sys

    from engine.runtime.backends import llamacpp_available

    if not llamacpp_available():
        pytest.skip("llama-cpp-python is not installed (scripts/install-llamacpp.sh; make test installs it)")
    code = ("import sys\nfrom engine.api import Engine\nfrom engine.runtime.backends import BackendOptions\n"
            "engine = Engine.load('default', backend='llamacpp', options=BackendOptions(threads=1))\n"
            "assert engine.selector_model is not None\n"
            "print(sorted(m for m in ('torch', 'xgrammar') if m in sys.modules))\n")
    root = Path(__file__).resolve().parent.parent
    for _ in range(2):
        run = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=300,
                             env={**os.environ, "PYTHONPATH": str(root)})
        assert run.returncode == 0, run.stderr[-3000:]
        assert run.stdout.strip() == "[]", run.stdout


def test_a_tokenizer_whose_copy_reads_back_differently_is_not_kept(tokenizer, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch):
    """A tokenizer class with behaviour its saved files do not carry (the check, faked here: the
    embedded model's tokenizer reads back the same) is converted each run instead."""
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF stand-in")
    root = tmp_path / "cache"
    monkeypatch.setattr(tokenizer_cache, "_same", lambda a, b: False)
    conversions = []
    for _ in range(2):
        assert tokenizer_cache.cached_tokenizer(gguf, lambda: conversions.append(1) or tokenizer, root) is tokenizer
    assert conversions == [1, 1]
    assert not tokenizer_cache.folder_for(gguf, root).exists()
    assert not list((root / "tokenizers").glob(".tmp-*"))


def test_a_tokenizer_that_reads_back_differently_without_transformers_is_read_with_it(
        tokenizer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Where the ``tokenizers``-only reading would answer the probe differently (faked here: the
    embedded model's reads back the same), the saved copy is read with transformers."""
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF stand-in")
    root = tmp_path / "cache"
    same = tokenizer_cache._same
    monkeypatch.setattr(tokenizer_cache, "_same", lambda a, b: not isinstance(b, PlainTokenizer) and same(a, b))
    tokenizer_cache.cached_tokenizer(gguf, lambda: tokenizer, root)
    again = tokenizer_cache.cached_tokenizer(gguf, lambda: pytest.fail("converted again"), root)
    assert not isinstance(again, PlainTokenizer) and type(again).__name__ == type(tokenizer).__name__
