"""engine.runtime.plain_tokenizer: the embedded model's tokenizer read with ``tokenizers`` alone
answers as transformers' does on everything the engine asks of it (ids, text back, the rendered
prompts, special and end tokens), on code the probe never saw; anything else goes to transformers'."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.core.tokens import IncrementalDetokenizer, decode, encode, token_pieces
from engine.decoding.prompt import PromptParts, program_messages, render, text_messages
from engine.decoding.tables import special_token_ids
from engine.runtime.plain_tokenizer import PlainTokenizer, full_tokenizer

TEXTS = [
    "def add(a, b):\n    return a - b\n",
    "\tif x:\n\t\ty = '日本語 ünïcödé ✓'\n\r\n  \n",
    "class A:\n    <|im_start|>not a turn<|im_end|> <|endoftext|>\n",
    "x = 1  # {{ jinja }} {% if %} </gen> <copy lines=\"1-2\"/>\n" * 3,
    "   leading spaces and trailing   \n\n\n",
    "emoji 🙂 and a lone surrogate-free mix: a\u00a0b\u2028c",
]


@pytest.fixture(scope="module")
def plain(tokenizer, tmp_path_factory) -> PlainTokenizer:
    folder = Path(tmp_path_factory.mktemp("tok"))
    tokenizer.save_pretrained(str(folder))
    return PlainTokenizer(folder)


@pytest.mark.parametrize("text", TEXTS)
def test_ids_and_text_back_are_transformers(tokenizer, plain: PlainTokenizer, text: str) -> None:
    ids = encode(tokenizer, text)
    assert encode(plain, text) == ids
    assert decode(plain, ids) == decode(tokenizer, ids)
    assert token_pieces(plain, ids) == token_pieces(tokenizer, ids)
    a, b = IncrementalDetokenizer(tokenizer), IncrementalDetokenizer(plain)
    for i in range(0, len(ids), 3):
        assert b.push(ids[i:i + 3]) == a.push(ids[i:i + 3])
    assert plain._full is None


@pytest.mark.parametrize("text", TEXTS)
def test_the_rendered_prompts_are_transformers(tokenizer, plain: PlainTokenizer, text: str) -> None:
    parts = PromptParts(instruction="Fix the bug.", region=text, before="import os\n", after="", first_line=3,
                        language="python", focus_line=1)
    for messages in (text_messages(parts), program_messages(parts)):
        assert render(plain, messages, assistant_prefix=parts.fence()) == render(tokenizer, messages,
                                                                                 assistant_prefix=parts.fence())
    assert plain._full is None


def test_special_and_end_tokens_are_transformers(tokenizer, plain: PlainTokenizer) -> None:
    assert special_token_ids(plain, 49152 + 64) == special_token_ids(tokenizer, 49152 + 64)
    assert (plain.eos_token_id, plain.unk_token_id, plain.bos_token_id, plain.pad_token_id, len(plain)) == (
        tokenizer.eos_token_id, tokenizer.unk_token_id, tokenizer.bos_token_id, tokenizer.pad_token_id,
        len(tokenizer))
    assert plain.all_special_ids == tokenizer.all_special_ids
    for name in ("<|im_end|>", "<|endoftext|>", "no such token"):
        assert plain.convert_tokens_to_ids(name) == tokenizer.convert_tokens_to_ids(name)
    assert plain._full is None


def test_anything_else_is_transformers_own(tokenizer, plain: PlainTokenizer) -> None:
    assert plain.get_vocab() == tokenizer.get_vocab()  # not ours: transformers' tokenizer answers
    text = TEXTS[1]
    assert (plain(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
            == tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"])
    assert type(full_tokenizer(plain)).__name__ == type(tokenizer).__name__
    assert full_tokenizer(tokenizer) is tokenizer
    with pytest.raises(AttributeError):
        plain._no_such_thing  # noqa: B018 - private names never load transformers
