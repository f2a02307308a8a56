"""No special or added token of the tokenizer (chat markers, end tokens, padding) is ever written
into an edit: masked in the program grammar's bitmask and in the text modes' choices in process,
excluded in what the vLLM client asks for, and an error when a server sends one anyway. A NUL
byte in the buffer made program mode write ``<|im_start|>`` into a gen before they were masked."""

from __future__ import annotations

import pytest
from fake_completions_server import FakeCompletionsServer

from engine.api import EditRequest, Engine
from engine.decoding.greedy import DraftedDecode
from engine.decoding.tables import bit_is_set, content_bitmask, special_token_ids, tables_for
from engine.language.grammar import GrammarCompilerCache
from engine.runtime.backends import BackendError, BackendOptions, llamacpp_available
from engine.runtime.sources import load_tokenizer

NUL_BUFFER = "x = 1\n\0\0\0\nprint(x)\n"  # program mode wrote "<|im_start|><|im_start|>system" here
# After a finished chat turn the embedded model's likeliest next token is <|im_start|>.
CHAT_TURN = "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer("default")


def _markers(tokenizer) -> list[str]:
    return [t.content for t in tokenizer.added_tokens_decoder.values()]


def test_every_special_and_added_token_is_masked_in_a_gen_body(tokenizer):
    vocab = len(tokenizer)
    specials = special_token_ids(tokenizer, vocab)
    assert set(tokenizer.added_tokens_decoder) | set(tokenizer.all_special_ids) <= specials
    assert {tokenizer.convert_tokens_to_ids(m) for m in ("<|im_start|>", "<|im_end|>", "<|endoftext|>")} <= specials
    grammar = GrammarCompilerCache(tokenizer, vocab)
    matcher, bitmask = grammar.matcher(3), grammar.new_bitmask()
    for tok in tokenizer.encode("<program><gen>", add_special_tokens=False):
        assert matcher.accept_token(tok)
    matcher.fill_next_token_bitmask(bitmask)
    assert any(bit_is_set(bitmask, t) for t in specials)  # the grammar alone lets markers into a gen
    bitmask &= content_bitmask(specials, vocab)
    assert not any(bit_is_set(bitmask, t) for t in range(vocab) if t in specials)
    ordinary = tokenizer.encode("x = 1\n\0print(x)", add_special_tokens=False)
    assert all(bit_is_set(bitmask, t) for t in ordinary)  # control characters stay content


def test_text_modes_may_still_end_on_the_end_token(tokenizer):
    class _Loaded:  # what tables_for reads: tokenizer, vocabulary size, the runtime's end ids
        runtime = type("R", (), {"eos_ids": staticmethod(lambda: set())})()
        vocab_size = len(tokenizer)

    _Loaded.tokenizer = tokenizer
    tables = tables_for(_Loaded())  # type: ignore[arg-type]
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert end in tables.stop_ids and end in tables.special_ids
    assert end not in tables.text_blocked_ids()
    assert tokenizer.convert_tokens_to_ids("<|im_start|>") in tables.text_blocked_ids()


@pytest.mark.parametrize("mode", ["program", "ar"])
def test_vllm_requests_exclude_special_tokens_and_reject_them_when_sent(tokenizer, mode):
    start, end = (tokenizer.convert_tokens_to_ids(m) for m in ("<|im_start|>", "<|im_end|>"))
    with FakeCompletionsServer(tokenizer) as fake:
        engine = Engine.load("default", backend="vllm", selector="none",
                             options=BackendOptions(server_url=fake.url, timeout_s=3.0))
        fake.fault = "special_token"
        with pytest.raises(BackendError, match=r"special token 1 .*nothing was written"):
            engine.edit(EditRequest("def add(a, b):\n    return a - b\n", "Fix the bug", mode=mode, max_new_tokens=8))
        bias = fake.requests[-1]["logit_bias"]
        assert bias[str(start)] == -100.0
        assert str(end) not in bias  # the end token stops the completion: the client stops on it


@pytest.mark.model
@pytest.mark.parametrize("mode", ["program", "ar", "speculative", "pld"])
def test_a_nul_buffer_gets_no_chat_markers(default_engine: Engine, mode: str):
    result = default_engine.edit(EditRequest(NUL_BUFFER, "Fix the bug", mode=mode, max_new_tokens=64))
    for marker in _markers(default_engine.loaded.tokenizer):
        assert marker not in result.output_text and marker not in result.program.serialize(), (mode, marker)


@pytest.mark.model
def test_a_nul_buffer_gets_no_chat_markers_on_llamacpp():
    if not llamacpp_available():
        pytest.skip("llama-cpp-python is not installed")
    engine = Engine.load("default", backend="llamacpp", options=BackendOptions(threads=1, context_size=2048))
    try:
        for mode in ("program", "ar", "pld"):
            result = engine.edit(EditRequest(NUL_BUFFER, "Fix the bug", mode=mode, max_new_tokens=64))
            for marker in _markers(engine.loaded.tokenizer):
                assert marker not in result.program.serialize(), (mode, marker)
        _check_pld(engine)
    finally:
        engine.close()


def _check_pld(engine: Engine) -> None:
    tok, tables = engine.loaded.tokenizer, tables_for(engine.loaded)
    prompt = tok.encode(CHAT_TURN, add_special_tokens=False)
    free = engine.loaded.runtime.prompt_lookup(prompt, 4, sorted(tables.stop_ids), lambda ids: False, tok.eos_token_id)
    assert free[0] in tables.text_blocked_ids()  # the prompt provokes a marker
    out = engine.loaded.runtime.prompt_lookup(prompt, 4, sorted(tables.stop_ids), lambda ids: False,
                                              tok.eos_token_id, blocked=tables.text_blocked_ids())
    assert not set(out) & set(tables.text_blocked_ids())


@pytest.mark.model
def test_text_decoding_masks_markers_a_prompt_provokes(default_engine: Engine):
    loaded = default_engine.loaded
    tables = tables_for(loaded)
    prompt = loaded.tokenizer.encode(CHAT_TURN, add_special_tokens=False)
    outs = []
    for blocked in ((), tables.text_blocked_ids()):
        session = loaded.session()
        decode = DraftedDecode(session, prompt, frozenset(), 4, blocked=blocked)  # no stop: see what comes
        for _chunk in decode.chunks():
            pass
        session.close()
        outs.append(decode.out)
    assert outs[0][0] in tables.text_blocked_ids()
    assert not set(outs[1]) & set(tables.text_blocked_ids())
    _check_pld(default_engine)
