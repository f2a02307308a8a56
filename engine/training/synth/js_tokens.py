"""A lossless JavaScript tokenizer for token-level rewrites (``"".join(t.text for t in tokens) == source``).

Why not a parser: the JavaScript bug injectors only swap or insert single tokens and whole lines, and
every rewritten function is re-parsed afterwards (acorn at build time, ``node --check`` in the tests),
so a tokenizer that keeps whitespace and comments is all the rewriting needs. It knows the lexical
corners that would otherwise corrupt a rewrite: strings, template literals with ``${...}`` nesting,
comments, and the regex-literal vs division ambiguity (decided by the previous significant token).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

WS, COMMENT, STRING, TEMPLATE, REGEX, NUMBER, NAME, PUNCT = (
    "ws", "comment", "string", "template", "regex", "number", "name", "punct")

_PUNCTUATORS = sorted("""
>>>= ... === !== **= <<= >>= >>> &&= ||= ??= => == != <= >= && || ?? ?. ++ -- += -= *= /= %= &= |= ^= ** << >>
{ } ( ) [ ] ; , < > + - * / % & | ^ ! ~ ? : = . @ #
""".split(), key=len, reverse=True)
_NUMBER = re.compile(r"0[xX][0-9a-fA-F_]+n?|0[bB][01_]+n?|0[oO][0-7_]+n?|(?:\d[\d_]*\.?[\d_]*|\.\d[\d_]*)(?:[eE][+-]?\d+)?n?")
_NAME = re.compile(r"(?:[A-Za-z_$]|[^\x00-\x7f])(?:[\w$]|[^\x00-\x7f])*")
_WS = re.compile(r"\s+")
# After these keywords a "/" starts a regex literal, after any other name it divides.
_REGEX_AFTER_NAMES = {"return", "typeof", "instanceof", "in", "of", "new", "delete", "void", "throw", "case",
                      "do", "else", "yield", "await"}


class JsTokenizeError(ValueError):
    """Source the tokenizer cannot split (an unterminated string, comment, template or regex)."""


@dataclass(frozen=True)
class Token:
    kind: str
    text: str
    start: int  # character offset in the source
    line: int   # 1-based line of the token's first character

    @property
    def end(self) -> int:
        return self.start + len(self.text)


def _scan_string(src: str, i: int) -> int:
    quote = src[i]
    j = i + 1
    while j < len(src):
        c = src[j]
        if c == "\\":
            j += 2
            continue
        if c == quote:
            return j + 1
        if c == "\n":
            break
        j += 1
    raise JsTokenizeError(f"unterminated string at offset {i}")


def _scan_template(src: str, i: int) -> int:
    """End of the template literal starting at ``src[i] == "`"``, nested ``${...}`` included."""
    j = i + 1
    while j < len(src):
        c = src[j]
        if c == "\\":
            j += 2
            continue
        if c == "`":
            return j + 1
        if c == "$" and src.startswith("${", j):
            j = _scan_braced_expression(src, j + 2)
            continue
        j += 1
    raise JsTokenizeError(f"unterminated template literal at offset {i}")


def _scan_braced_expression(src: str, j: int) -> int:
    """Offset just past the ``}`` that closes a template substitution opened before ``j``."""
    depth = 1
    for token in _tokens(src, j):
        if token.kind == PUNCT and token.text == "{":
            depth += 1
        elif token.kind == PUNCT and token.text == "}":
            depth -= 1
            if depth == 0:
                return token.end
    raise JsTokenizeError(f"unterminated template substitution at offset {j}")


def _scan_regex(src: str, i: int) -> int:
    j = i + 1
    in_class = False
    while j < len(src):
        c = src[j]
        if c == "\\":
            j += 2
            continue
        if c == "\n":
            break
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
        elif c == "/":
            j += 1
            while j < len(src) and (src[j].isalnum() or src[j] == "_"):
                j += 1
            return j
        j += 1
    raise JsTokenizeError(f"unterminated regex literal at offset {i}")


def _regex_allowed(previous: Token | None) -> bool:
    if previous is None:
        return True
    if previous.kind == PUNCT:
        return previous.text not in (")", "]", "}")
    if previous.kind == NAME:
        return previous.text in _REGEX_AFTER_NAMES
    return False


def _tokens(src: str, i: int = 0):
    previous: Token | None = None
    line = src.count("\n", 0, i) + 1
    while i < len(src):
        c = src[i]
        if c.isspace():
            end = _WS.match(src, i).end()
            kind = WS
        elif src.startswith("//", i):
            end = src.find("\n", i)
            end = len(src) if end < 0 else end
            kind = COMMENT
        elif src.startswith("/*", i):
            end = src.find("*/", i + 2)
            if end < 0:
                raise JsTokenizeError(f"unterminated comment at offset {i}")
            end += 2
            kind = COMMENT
        elif c in "'\"":
            end, kind = _scan_string(src, i), STRING
        elif c == "`":
            end, kind = _scan_template(src, i), TEMPLATE
        elif c == "/" and _regex_allowed(previous):
            end, kind = _scan_regex(src, i), REGEX
        elif c.isdigit() or (c == "." and i + 1 < len(src) and src[i + 1].isdigit()):
            end, kind = _NUMBER.match(src, i).end(), NUMBER
        elif (match := _NAME.match(src, i)) is not None:
            end, kind = match.end(), NAME
        else:
            text = next((p for p in _PUNCTUATORS if src.startswith(p, i)), None)
            if text is None:
                raise JsTokenizeError(f"unexpected character {c!r} at offset {i}")
            if text == "?." and i + 2 < len(src) and src[i + 2].isdigit():
                text = "?"  # `a ?.5 : b` is a conditional, not optional chaining
            end, kind = i + len(text), PUNCT
        token = Token(kind, src[i:end], i, line)
        yield token
        line += token.text.count("\n")
        if kind not in (WS, COMMENT):
            previous = token
        i = end


def tokenize(src: str) -> list[Token]:
    """Every token of ``src``, whitespace and comments included; raises :class:`JsTokenizeError`."""
    return list(_tokens(src))
