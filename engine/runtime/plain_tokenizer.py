"""A saved fast tokenizer read with the ``tokenizers`` library alone, without transformers.

Importing transformers costs about a second of a headless edit's start, and the text modes use
only a few of a tokenizer's methods: ``encode`` and ``decode`` (engine.core.tokens), the chat
template (engine.decoding.prompt.render) and the special and end tokens (engine.decoding.tables).
:class:`PlainTokenizer` does those from the folder transformers saved (``tokenizer.json``,
``tokenizer_config.json``, ``chat_template.jinja``): the same ``tokenizers`` object underneath, the
template rendered in the sandboxed jinja environment transformers uses. The start-up cache
(:mod:`engine.runtime.tokenizer_cache`) hands one out only after checking, once, that it answers
a probe exactly as transformers' tokenizer does.

Anything else (program mode's grammar tables, which xgrammar builds from a transformers
tokenizer) goes to :attr:`PlainTokenizer.full`, transformers' own tokenizer of the same folder,
loaded on first use.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any, Sequence

NAMED_SPECIAL = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")


def _content(value: Any) -> str | None:
    """A special token's text as tokenizer_config.json writes it (a string or an AddedToken dict)."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


class PlainTokenizer:
    """The engine's tokenizer surface over ``folder`` (a tokenizer saved by transformers)."""

    def __init__(self, folder: Path):
        from tokenizers import Tokenizer

        self.folder = Path(folder)
        self.backend_tokenizer = Tokenizer.from_file(str(self.folder / "tokenizer.json"))
        config = json.loads((self.folder / "tokenizer_config.json").read_text(encoding="utf-8"))
        template = self.folder / "chat_template.jinja"
        self.chat_template: str | None = (template.read_text(encoding="utf-8") if template.is_file()
                                          else config.get("chat_template"))
        self.special_tokens_map = {name: text for name in NAMED_SPECIAL
                                   if (text := _content(config.get(name))) is not None}
        extra = config.get("extra_special_tokens") or config.get("additional_special_tokens") or []
        extra = [_content(t) for t in (extra.values() if isinstance(extra, dict) else extra)]
        self.all_special_tokens = list(dict.fromkeys([*self.special_tokens_map.values(), *[t for t in extra if t]]))
        self._template: Any = None
        self._full: Any = None

    # --- what the engine calls on a tokenizer ---------------------------------------------------

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return list(self.backend_tokenizer.encode(text, add_special_tokens=add_special_tokens).ids)

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False,
               clean_up_tokenization_spaces: bool | None = None) -> str:
        if clean_up_tokenization_spaces:
            return self.full.decode(list(ids), skip_special_tokens=skip_special_tokens,
                                    clean_up_tokenization_spaces=True)
        return self.backend_tokenizer.decode(list(ids), skip_special_tokens=skip_special_tokens)

    def apply_chat_template(self, messages: list[dict[str, str]], add_generation_prompt: bool = False,
                            tokenize: bool = True, **kwargs: Any) -> Any:
        """The chat rendered as transformers renders plain string messages (``tokenize``: its ids)."""
        if self.chat_template is None:
            raise ValueError("this tokenizer has no chat template")
        chat = [{k: v for k, v in m.items() if v is not None} for m in messages]
        text = self._compiled().render(messages=chat, add_generation_prompt=add_generation_prompt,
                                       **{**self.special_tokens_map, **kwargs})
        return self.encode(text, add_special_tokens=False) if tokenize else text

    def convert_tokens_to_ids(self, token: str) -> int | None:
        index = self.backend_tokenizer.token_to_id(token)
        return self.unk_token_id if index is None else index

    def _id(self, name: str) -> int | None:
        text = self.special_tokens_map.get(name)
        return None if text is None else self.convert_tokens_to_ids(text)

    @property
    def eos_token_id(self) -> int | None:
        return self._id("eos_token")

    @property
    def unk_token_id(self) -> int | None:
        text = self.special_tokens_map.get("unk_token")
        return None if text is None else self.backend_tokenizer.token_to_id(text)

    @property
    def bos_token_id(self) -> int | None:
        return self._id("bos_token")

    @property
    def pad_token_id(self) -> int | None:
        return self._id("pad_token")

    @property
    def all_special_ids(self) -> list[int]:
        return [self.convert_tokens_to_ids(t) for t in self.all_special_tokens]

    @property
    def added_tokens_decoder(self) -> dict[int, Any]:
        return dict(sorted(self.backend_tokenizer.get_added_tokens_decoder().items()))

    def __len__(self) -> int:
        return self.backend_tokenizer.get_vocab_size(with_added_tokens=True)

    # --- everything else: transformers' own tokenizer -------------------------------------------

    @property
    def full(self) -> Any:
        """transformers' tokenizer of the same folder (imports transformers; loaded once)."""
        if self._full is None:
            from transformers import PreTrainedTokenizerFast

            self._full = PreTrainedTokenizerFast.from_pretrained(str(self.folder), local_files_only=True)
        return self._full

    def __call__(self, *args: Any, **kwargs: Any) -> Any:  # offsets and batches (the localizer)
        return self.full(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # not ours (copy, pickle): never load transformers for those
            raise AttributeError(name)
        return getattr(self.full, name)

    def _compiled(self) -> Any:
        """The chat template in the environment transformers compiles templates in (sandboxed,
        trim_blocks and lstrip_blocks, loop controls, its tojson, raise_exception, strftime_now)."""
        if self._template is None:
            import jinja2
            import jinja2.ext
            from jinja2.sandbox import ImmutableSandboxedEnvironment

            def raise_exception(message: str) -> None:
                raise jinja2.exceptions.TemplateError(message)

            def tojson(x: Any, ensure_ascii: bool = False, indent: Any = None, separators: Any = None,
                       sort_keys: bool = False) -> str:
                return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                                  sort_keys=sort_keys)

            env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                extensions=[jinja2.ext.loopcontrols])
            env.filters["tojson"] = tojson
            env.globals["raise_exception"] = raise_exception
            env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
            self._template = env.from_string(self.chat_template)
        return self._template


def full_tokenizer(tokenizer: Any) -> Any:
    """``tokenizer`` as transformers' object (what xgrammar reads): a plain one's :attr:`PlainTokenizer.full`."""
    return tokenizer.full if isinstance(tokenizer, PlainTokenizer) else tokenizer
