"""JavaScript edit generators: token-level rewrites (see js_tokens.py), the same kinds as python_edits.py.

A rewrite replaces, inserts or deletes whole tokens or whole lines, so everything else keeps its
original bytes. The tokenizer does not know the grammar, so every built edit goes through ``check``
(a real parser: acorn at build time, ``node --check`` in the tests) and is dropped when it fails.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Callable

from engine.core.lines import line_offsets, split_lines
from engine.training.synth.edits import Edit, Site
from engine.training.synth.js_tokens import (
    COMMENT,
    NAME,
    NUMBER,
    PUNCT,
    REGEX,
    STRING,
    TEMPLATE,
    JsTokenizeError,
    Token,
    tokenize,
)

SyntaxCheck = Callable[[str], bool]

_KEYWORDS = set("""
break case catch class const continue debugger default delete do else export extends finally for function if
import in instanceof new return super switch this throw try typeof var void while with yield let static enum
await implements package protected interface private public null true false undefined NaN Infinity arguments
async of get set
""".split())
_OPERATOR_SWAPS = {"+": ["-"], "-": ["+"], "*": ["/"], "/": ["*"], "<": ["<=", ">"], "<=": ["<", ">="],
                   ">": [">=", "<"], ">=": [">", "<="], "===": ["!=="], "!==": ["==="], "==": ["!="], "!=": ["=="],
                   "&&": ["||"], "||": ["&&"], "??": ["||"], "+=": ["-="], "-=": ["+="], "*=": ["/="], "%": ["/"]}
_CALL_SWAPS = {
    "min": "max", "max": "min", "floor": "ceil", "ceil": "floor", "push": "unshift", "unshift": "push",
    "pop": "shift", "shift": "pop", "indexOf": "lastIndexOf", "lastIndexOf": "indexOf", "some": "every",
    "every": "some", "startsWith": "endsWith", "endsWith": "startsWith", "toLowerCase": "toUpperCase",
    "toUpperCase": "toLowerCase", "trimStart": "trimEnd", "trimEnd": "trimStart", "map": "forEach",
    "forEach": "map", "filter": "find", "find": "filter", "charAt": "charCodeAt", "charCodeAt": "charAt",
    "keys": "values", "values": "keys", "parseInt": "parseFloat", "parseFloat": "parseInt",
    "reduce": "reduceRight", "reduceRight": "reduce", "isNaN": "isFinite", "isFinite": "isNaN",
    "slice": "splice", "splice": "slice", "substring": "substr", "findIndex": "indexOf", "includes": "indexOf",
    "round": "floor", "abs": "sign", "test": "exec", "concat": "push", "hasOwnProperty": "propertyIsEnumerable",
}
_DUPLICABLE_CALLS = {"push", "unshift", "pop", "shift", "splice", "set", "add", "delete", "write", "emit",
                     "sort", "reverse"}
_RENAMES = {"i": "idx", "j": "k", "n": "count", "x": "item", "s": "str", "value": "val", "val": "value",
            "result": "res", "res": "result", "key": "k", "index": "position", "length": "len", "array": "arr",
            "arr": "array", "obj": "target", "object": "target", "str": "text", "string": "text", "fn": "callback",
            "func": "callback", "callback": "cb", "data": "payload", "name": "label", "options": "opts",
            "opts": "options", "args": "params", "start": "begin", "end": "stop", "node": "current"}
_BINARY_LEFT_KINDS = (NAME, NUMBER, STRING, TEMPLATE, REGEX)


@dataclass
class _JsFunc:
    """One tokenized function: text, tokens, the significant ones, and params and declared names by line."""

    text: str
    tokens: list[Token]
    sig: list[Token]
    params: list[str]
    defined_at: dict[str, int]
    lines: list[str]
    starts: list[int]
    semicolons: bool

    def replaced(self, start: int, end: int, new: str) -> str:
        return self.text[:start] + new + self.text[end:]

    def line_tokens(self, line: int) -> list[Token]:
        return [t for t in self.sig if t.line == line]


def parse_js_function(text: str) -> _JsFunc | None:
    """The token view of one JavaScript function, or ``None`` when the tokenizer rejects it."""
    try:
        tokens = tokenize(text)
    except JsTokenizeError:
        return None
    sig = [t for t in tokens if t.kind not in ("ws", COMMENT)]
    params: list[str] = []
    opened = next((k for k, t in enumerate(sig) if t.kind == PUNCT and t.text == "("), None)
    arrow_single = next((k for k, t in enumerate(sig[:6]) if t.text == "=>"), None)
    if arrow_single is not None and (opened is None or opened > arrow_single) and sig[arrow_single - 1].kind == NAME:
        params.append(sig[arrow_single - 1].text)
    elif opened is not None:
        depth = 0
        for k in range(opened, len(sig)):
            t = sig[k]
            if t.kind == PUNCT and t.text in "([{":
                depth += 1
            elif t.kind == PUNCT and t.text in ")]}":
                depth -= 1
                if depth == 0:
                    break
            elif t.kind == NAME and depth >= 1 and sig[k - 1].text in ("(", ",", "...", "{", "[") \
                    and t.text not in _KEYWORDS and sig[k + 1].text in (",", ")", "=", "}", "]"):
                params.append(t.text)
    defined_at = {p: 1 for p in params}
    for k, t in enumerate(sig[1:], 1):
        if t.kind == NAME and t.text not in _KEYWORDS and sig[k - 1].text in ("var", "let", "const", "function"):
            defined_at.setdefault(t.text, t.line)
    last_tokens = [ts[-1].text for line in range(1, text.count("\n") + 2) if (ts := [t for t in sig if t.line == line])]
    semicolons = sum(x == ";" for x in last_tokens) >= 1
    return _JsFunc(text=text, tokens=tokens, sig=sig, params=params, defined_at=defined_at,
                   lines=split_lines(text), starts=line_offsets(text), semicolons=semicolons)


def _checked(check: SyntaxCheck, edit: Edit) -> Edit | None:
    if edit.input == edit.gold:
        return None
    return edit if check(edit.input) and check(edit.gold) else None


def _bug_site(f: _JsFunc, check: SyntaxCheck, line: int, make: Callable[[], str | None]) -> Site:
    def build() -> Edit | None:
        text = make()
        return None if text is None else _checked(check, Edit(input=text, gold=f.text))
    return Site(line, build)


def _edit_site(f: _JsFunc, check: SyntaxCheck, line: int, gold: str, instruction: str) -> Site:
    return Site(line, lambda: _checked(check, Edit(input=f.text, gold=gold, instruction=instruction)))


def _is_binary(f: _JsFunc, k: int) -> bool:
    prev = f.sig[k - 1] if k else None
    return prev is not None and ((prev.kind in _BINARY_LEFT_KINDS and prev.text not in _KEYWORDS - {"this", "null", "true", "false", "undefined"})
                                 or prev.text in (")", "]"))


def operator_misuse(f: _JsFunc, rng: random.Random, check: SyntaxCheck) -> list[Site]:
    sites = []
    for k, t in enumerate(f.sig):
        if t.kind == PUNCT and t.text in _OPERATOR_SWAPS and (t.text not in ("+", "-") or _is_binary(f, k)):
            sites.append(_bug_site(f, check, t.line, lambda t=t: f.replaced(t.start, t.end, rng.choice(_OPERATOR_SWAPS[t.text]))))
    return sites


def _is_decimal_int(t: Token) -> bool:
    return t.kind == NUMBER and re.fullmatch(r"\d+", t.text) is not None and (t.text == "0" or t.text[0] != "0")


def off_by_one(f: _JsFunc, rng: random.Random, check: SyntaxCheck) -> list[Site]:
    sites = []
    for k, t in enumerate(f.sig):
        if _is_decimal_int(t):
            v = int(t.text)
            sites.append(_bug_site(f, check, t.line, lambda t=t, v=v: f.replaced(
                t.start, t.end, str(v - 1 if v > 0 and rng.random() < 0.5 else v + 1))))
        elif (t.kind == NAME and t.text == "length" and k and f.sig[k - 1].text == "." and k + 1 < len(f.sig)
              and f.sig[k + 1].text in (")", "]", ";", ",", "<", "<=", ">", ">=", "===", "!==")):
            sites.append(_bug_site(f, check, t.line, lambda t=t: f.replaced(t.end, t.end, rng.choice([" - 1", " + 1"]))))
    return sites


def value_misuse(f: _JsFunc, rng: random.Random, check: SyntaxCheck) -> list[Site]:
    swaps = {"true": "false", "false": "true", "null": "undefined", "undefined": "null"}
    strings = sorted({t.text for t in f.sig if t.kind == STRING and "\\" not in t.text})
    sites = []
    for k, t in enumerate(f.sig):
        if t.kind == NAME and t.text in swaps and not (k and f.sig[k - 1].text in (".", "?.")):
            sites.append(_bug_site(f, check, t.line, lambda t=t: f.replaced(t.start, t.end, swaps[t.text])))
        elif _is_decimal_int(t):
            v = int(t.text)
            options = [str(1 - v)] if v in (0, 1) else [str(v * 2), str(v * 10)]
            sites.append(_bug_site(f, check, t.line, lambda t=t, o=options: f.replaced(t.start, t.end, rng.choice(o))))
        elif t.kind == STRING and "\\" not in t.text and not (k + 1 < len(f.sig) and f.sig[k + 1].text == ":"):
            quote, body = t.text[0], t.text[1:-1]
            options = [s for s in strings if s != t.text and s[0] == quote]
            if body in ("", " ", ",", ".", ":", ";", "-", "_", "/"):
                options.append(quote + {"": " ", " ": "", ",": ";", ".": ",", ":": ";", ";": ",", "-": "_",
                                        "_": "-", "/": "."}[body] + quote)
            if options:
                sites.append(_bug_site(f, check, t.line, lambda t=t, o=options: f.replaced(t.start, t.end, rng.choice(o))))
    return sites


def _usage_positions(f: _JsFunc) -> list[int]:
    """Indexes into ``sig`` of name tokens that read or write a local (not declarations, keys or properties)."""
    out = []
    for k, t in enumerate(f.sig):
        if t.kind != NAME or t.text not in f.defined_at or k == 0:
            continue
        prev = f.sig[k - 1].text
        nxt = f.sig[k + 1].text if k + 1 < len(f.sig) else ""
        if prev in (".", "?.", "var", "let", "const", "function") or nxt in (":", "=>") or t.line == 1 and t.text in f.params:
            continue
        out.append(k)
    return out


def variable_misuse(f: _JsFunc, rng: random.Random, check: SyntaxCheck) -> list[Site]:
    names = sorted(f.defined_at)
    sites = []
    for k in _usage_positions(f):
        t = f.sig[k]
        others = [n for n in names if n != t.text and f.defined_at[n] <= t.line]
        if others:
            sites.append(_bug_site(f, check, t.line, lambda t=t, o=others: f.replaced(t.start, t.end, rng.choice(o))))
    return sites


def function_misuse(f: _JsFunc, rng: random.Random, check: SyntaxCheck) -> list[Site]:
    sites = []
    for k, t in enumerate(f.sig[:-1]):
        if t.kind == NAME and t.text in _CALL_SWAPS and f.sig[k + 1].text == "(" and t.text not in f.defined_at \
                and not (k and f.sig[k - 1].text == "function"):
            sites.append(_bug_site(f, check, t.line, lambda t=t: f.replaced(t.start, t.end, _CALL_SWAPS[t.text])))
    return sites


def _balanced(tokens: list[Token]) -> bool:
    depth = 0
    for t in tokens:
        if t.kind == PUNCT and t.text in "([{":
            depth += 1
        elif t.kind == PUNCT and t.text in ")]}":
            depth -= 1
            if depth < 0:
                return False
    return depth == 0


_CONTINUES = set("+ - * / % = == === != !== < > <= >= && || ?? ? : , . ?. ( [ { => & | ^ += -= *=".split())


def _statement_lines(f: _JsFunc) -> list[int]:
    """Lines (not the first or last) that hold exactly one complete simple statement."""
    out = []
    n_lines = len(f.lines)
    for line in range(2, n_lines):
        toks = f.line_tokens(line)
        if not toks or not _balanced(toks):
            continue
        first, last = toks[0], toks[-1]
        prev_line = f.line_tokens(line - 1)
        next_line = f.line_tokens(line + 1)
        if first.kind != NAME or first.text in ("var", "let", "const", "function", "else", "case", "default",
                                                 "for", "while", "do", "switch", "try", "catch", "finally", "class"):
            continue
        if last.text in _CONTINUES or (next_line and next_line[0].text in _CONTINUES | {"`"}):
            continue
        if prev_line and prev_line[-1].text not in (";", "{", "}") and (f.semicolons or prev_line[-1].text in _CONTINUES):
            continue
        if f.semicolons and last.text not in (";", "}"):
            continue
        out.append(line)
    return out


def _condition_spans(f: _JsFunc) -> list[tuple[int, int]]:
    """``(open, close)`` sig indexes of the parentheses of every ``if (...)`` and ``while (...)``."""
    spans = []
    for k, t in enumerate(f.sig[:-1]):
        if t.kind == NAME and t.text in ("if", "while") and f.sig[k + 1].text == "(":
            depth = 0
            for j in range(k + 1, len(f.sig)):
                if f.sig[j].text == "(":
                    depth += 1
                elif f.sig[j].text == ")":
                    depth -= 1
                    if depth == 0:
                        spans.append((k + 1, j))
                        break
    return spans


def missing_logic(f: _JsFunc, rng: random.Random, check: SyntaxCheck) -> list[Site]:
    sites = []
    if len(f.lines) >= 4:
        for line in _statement_lines(f):
            start, end = f.starts[line - 1], f.starts[line]
            sites.append(_bug_site(f, check, line, lambda s=start, e=end: f.replaced(s, e, "")))
    for open_k, close_k in _condition_spans(f):
        depth = 0
        for j in range(open_k + 1, close_k):
            t = f.sig[j]
            depth += t.text in ("(", "[", "{")
            depth -= t.text in (")", "]", "}")
            if depth == 0 and t.text in ("&&", "||"):
                stop = j + 1
                inner = 0
                while stop < close_k:
                    s = f.sig[stop]
                    inner += s.text in ("(", "[", "{")
                    inner -= s.text in (")", "]", "}")
                    if inner == 0 and s.text in ("&&", "||"):
                        break
                    stop += 1
                start, end = f.sig[j - 1].end, f.sig[stop - 1].end
                sites.append(_bug_site(f, check, t.line, lambda s=start, e=end: f.replaced(s, e, "")))
    return sites


def excess_logic(f: _JsFunc, rng: random.Random, check: SyntaxCheck) -> list[Site]:
    sites = []
    params = list(f.params)
    for open_k, close_k in _condition_spans(f):
        used = {t.text for t in f.sig[open_k:close_k] if t.kind == NAME}
        extras = [p for p in params if p not in used]
        if extras and f.sig[open_k].line == f.sig[close_k].line:
            at = f.sig[close_k - 1].end

            def make(at=at, extras=extras) -> str:
                name = rng.choice(extras)
                return f.replaced(at, at, rng.choice([f" && {name}", f" && !{name}", f" || {name} == null"]))
            sites.append(_bug_site(f, check, f.sig[close_k].line, make))
    for line in _statement_lines(f):
        toks = f.line_tokens(line)
        names = [t.text for t in toks]
        duplicable = any(op in names for op in ("++", "--", "+=", "-=")) or any(
            names[i] == "." and names[i + 1] in _DUPLICABLE_CALLS for i in range(len(names) - 1))
        if duplicable and "return" not in names:
            start, end = f.starts[line - 1], f.starts[line]
            chunk = f.text[start:end]
            sites.append(_bug_site(f, check, line, lambda e=end, c=chunk: f.replaced(e, e, c)))
    return sites


# -- instructed edits ------------------------------------------------------------------------

def _camel_new_name(old: str, taken: set[str]) -> str | None:
    options = [_RENAMES.get(old, ""), f"{old}Value", "new" + old[:1].upper() + old[1:], f"{old}2"]
    return next((o for o in options if o and o not in taken and o not in _KEYWORDS), None)


def rename_identifier(f: _JsFunc, rng: random.Random, check: SyntaxCheck) -> list[Site]:
    protected: set[str] = set()
    for t in f.tokens:
        if t.kind in (STRING, TEMPLATE, COMMENT, REGEX):
            protected.update(re.findall(r"[A-Za-z_$][\w$]*", t.text))
    taken = {t.text for t in f.tokens if t.kind == NAME}
    stack: list[str] = []
    enclosing: list[str] = []
    for t in f.sig:
        enclosing.append(stack[-1] if stack else "")
        if t.kind == PUNCT and t.text in "([{":
            stack.append(t.text)
        elif t.kind == PUNCT and t.text in ")]}" and stack:
            stack.pop()
    sites = []
    for old in sorted(f.defined_at):
        if old in protected:
            continue
        occurrences = [k for k, t in enumerate(f.sig) if t.kind == NAME and t.text == old
                       and not (k and f.sig[k - 1].text in (".", "?."))]
        ambiguous = any(
            (k + 1 < len(f.sig) and f.sig[k + 1].text == ":")
            or (enclosing[k] == "{" and f.sig[k - 1].text in ("{", ",") and k + 1 < len(f.sig)
                and f.sig[k + 1].text in ("}", ",", "="))
            for k in occurrences)
        new = _camel_new_name(old, taken)
        if ambiguous or not occurrences or new is None:
            continue
        text = f.text
        for k in reversed(occurrences):
            t = f.sig[k]
            text = text[:t.start] + new + text[t.end:]
        what = "parameter" if old in f.params else "variable"
        instruction = rng.choice([f"Rename the {what} `{old}` to `{new}`.",
                                  f"Rename `{old}` to `{new}` everywhere in this function.",
                                  f"Use the name `{new}` instead of `{old}`."])
        sites.append(_edit_site(f, check, f.sig[occurrences[0]].line, text, instruction))
    return sites


def _indentation(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def add_guard_clause(f: _JsFunc, rng: random.Random, check: SyntaxCheck) -> list[Site]:
    first_line = f.line_tokens(1)
    if not first_line or first_line[-1].text != "{" or len(f.lines) < 3 or not f.lines[1].strip():
        return []
    indent = _indentation(f.lines[1])
    step = indent[len(_indentation(f.lines[0])):]
    if not step:
        return []
    semi = ";" if f.semicolons else ""
    sites = []
    for p in f.params:
        templates = [
            (f"Return null early if `{p}` is null or undefined.", f"if ({p} == null) {{", f"return null{semi}"),
            (f"Add a guard clause: throw a TypeError if `{p}` is null or undefined.", f"if ({p} == null) {{",
             f"throw new TypeError('{p} is required'){semi}"),
        ]
        if any(t.text == p and k + 1 < len(f.sig) and f.sig[k + 1].text == "(" for k, t in enumerate(f.sig)):
            templates.append((f"Throw a TypeError if `{p}` is not a function.",
                              f"if (typeof {p} !== 'function') {{", f"throw new TypeError('{p} must be a function'){semi}"))
        for instruction, test, action in templates:
            if test.rstrip(" {") in f.text:
                continue
            guard = f"{indent}{test}\n{indent}{step}{action}\n{indent}}}\n"
            at = f.starts[1]
            sites.append(_edit_site(f, check, 2, f.replaced(at, at, guard), instruction))
    return sites


def change_constant(f: _JsFunc, rng: random.Random, check: SyntaxCheck) -> list[Site]:
    counts: dict[str, int] = {}
    for t in f.sig:
        if t.kind == NUMBER:
            counts[t.text] = counts.get(t.text, 0) + 1
    sites = []
    for t in f.sig:
        if _is_decimal_int(t) and counts[t.text] == 1:
            v = int(t.text)
            new = str(rng.choice([v * 2, v * 10, v + 5]) if v else rng.choice([1, 2, 10]))
            instruction = rng.choice([f"Change the constant {t.text} to {new}.", f"Replace {t.text} with {new}.",
                                      f"Use {new} instead of {t.text}."])
            sites.append(_edit_site(f, check, t.line, f.replaced(t.start, t.end, new), instruction))
    return sites


def swap_arguments(f: _JsFunc, rng: random.Random, check: SyntaxCheck) -> list[Site]:
    sites = []
    sig = f.sig
    for k in range(1, len(sig) - 5):
        if not (sig[k].kind == NAME and sig[k].text not in _KEYWORDS and sig[k + 1].text == "("):
            continue
        depth, comma, close = 0, None, None
        for j in range(k + 1, len(sig)):
            s = sig[j].text
            if s in ("(", "[", "{"):
                depth += 1
            elif s in (")", "]", "}"):
                depth -= 1
                if depth == 0:
                    close = j
                    break
            elif s == "," and depth == 1:
                if comma is not None:
                    comma = -1
                    break
                comma = j
        if close is None or comma is None or comma < 0 or comma in (k + 2, close - 1):
            continue
        if sig[k].line != sig[close].line or sig[k - 1].text == "function":
            continue
        call_start = sig[k].start
        while k > 1 and sig[k - 1].text == "." and sig[k - 2].kind == NAME:
            k -= 2
            call_start = sig[k].start
        call = f.text[call_start:sig[close].end]
        open_k = next(j for j in range(k, close) if sig[j].text == "(")
        a_start, a_end = sig[open_k + 1].start, sig[comma - 1].end
        b_start, b_end = sig[comma + 1].start, sig[close - 1].end
        a, b = f.text[a_start:a_end], f.text[b_start:b_end]
        if a == b or len(call) > 70 or f.text.count(call) != 1 or "\n" in call:
            continue
        gold = f.text[:a_start] + b + f.text[a_end:b_start] + a + f.text[b_end:]
        instruction = rng.choice([f"Swap the two arguments of `{call}`.", f"In `{call}`, swap the arguments.",
                                  f"Swap the arguments `{a}` and `{b}` in the call `{call}`."])
        sites.append(_edit_site(f, check, sig[k].line, gold, instruction))
    return sites


GENERATORS: dict[str, Callable[[_JsFunc, random.Random, SyntaxCheck], list[Site]]] = {
    "bug/missing_logic": missing_logic,
    "bug/excess_logic": excess_logic,
    "bug/value_misuse": value_misuse,
    "bug/off_by_one": off_by_one,
    "bug/operator_misuse": operator_misuse,
    "bug/variable_misuse": variable_misuse,
    "bug/function_misuse": function_misuse,
    "edit/rename_identifier": rename_identifier,
    "edit/add_guard_clause": add_guard_clause,
    "edit/change_constant": change_constant,
    "edit/swap_arguments": swap_arguments,
}


def js_sites(code: str, kind: str, rng: random.Random, check: SyntaxCheck) -> list[Site]:
    """Every site where edit ``kind`` can apply to the one-function JavaScript ``code``; edits are re-parsed by ``check``."""
    f = parse_js_function(code)
    return GENERATORS[kind](f, rng, check) if f is not None else []
