"""The program grammar for xgrammar, compiled per request, plus the per-step range constraint.

Three objects with the xgrammar lifecycle (see STYLE.md): :class:`GrammarCompilerCache` is built
once per tokenizer, :func:`program_ebnf` describes one request's grammar (line numbers limited to
``1..n`` without leading zeros; gen bodies that can never contain a reserved literal), and
:class:`RangeConstraint` adds what a context-free grammar cannot say cheaply: ``I <= J``.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from typing import Any, Protocol, Sequence

import numpy as np

from engine.core.lines import near_copy, split_lines
from engine.language.program import RESERVED_LITERALS, CopyLines, CopyTokens, Gen, Op, may_end_after


def int_range_ebnf(n: int) -> str:
    """EBNF alternatives matching exactly the decimal integers ``1..n`` (no leading zeros)."""
    if n < 1:
        raise ValueError("an integer range needs n >= 1")
    digits = str(n)
    alts: list[str] = []
    for width in range(1, len(digits)):  # every shorter number
        alts.append("[1-9]" + "[0-9]" * (width - 1))
    for i, ch in enumerate(digits):  # numbers of full width below n, by first differing digit
        low = "1" if i == 0 else "0"
        if ch > low:
            top = chr(ord(ch) - 1)
            cls = f"[{low}-{top}]" if top != low else f'"{low}"'
            prefix = f'"{digits[:i]}" ' if i else ""
            alts.append(prefix + cls + " [0-9]" * (len(digits) - i - 1))
    alts.append(f'"{digits}"')
    return " | ".join(f"({a})" for a in alts)


def int_between_ebnf(low: int, high: int) -> str:
    """EBNF alternatives matching exactly the decimal integers ``low..high`` (no leading zeros):
    the classic split into runs of equal length, then by first differing digit."""
    if not 1 <= low <= high:
        raise ValueError(f"an integer range needs 1 <= low <= high, got {low}..{high}")
    alts: list[str] = []
    while low <= high:
        top = min(high, 10 ** len(str(low)) - 1)
        alts += _same_length(str(low), str(top))
        low = top + 1
    return " | ".join(f"({a})" for a in alts)


def _digit_class(a: str, b: str) -> str:
    return f'"{a}"' if a == b else f"[{a}-{b}]"


def _same_length(a: str, b: str) -> list[str]:
    """Sequences matching the numbers a..b, which have the same number of digits."""
    if a == b:
        return [f'"{a}"']
    i = 0
    while a[i] == b[i]:
        i += 1
    prefix = f'"{a[:i]}" ' if i else ""
    head_a, head_b, rest = a[i], b[i], len(a) - i - 1
    if rest == 0:
        return [prefix + _digit_class(head_a, head_b)]
    if a[i + 1:] == "0" * rest and b[i + 1:] == "9" * rest:
        return [prefix + _digit_class(head_a, head_b) + " [0-9]" * rest]
    out = [prefix + f'"{head_a}" ' + tail for tail in _same_length(a[i + 1:], "9" * rest)]
    if int(head_b) - int(head_a) > 1:
        out.append(prefix + _digit_class(str(int(head_a) + 1), str(int(head_b) - 1)) + " [0-9]" * rest)
    out += [prefix + f'"{head_b}" ' + tail for tail in _same_length("0" * rest, b[i + 1:])]
    return out


def _escape_class_char(ch: str) -> str:
    return "\\" + ch if ch in "\\]^-[" else ch


def _literal_prefixes() -> list[str]:
    """The proper prefixes of the reserved literals: the states of the gen-body automaton."""
    return sorted({lit[:i] for lit in RESERVED_LITERALS for i in range(len(lit))}, key=lambda s: (len(s), s))


def body_rule_after(text: str) -> str:
    """The body rule (``bodyK``) that continues a gen body which so far reads ``text``: its state is
    the longest suffix of ``text`` that is a proper prefix of a reserved literal."""
    index = {p: i for i, p in enumerate(_literal_prefixes())}
    for k in range(min(len(text), max(len(p) for p in index)), -1, -1):
        tail = text[len(text) - k:] if k else ""
        if tail in index:
            return f"body{index[tail]}"
    return "body0"


@lru_cache(maxsize=1)
def gen_body_ebnf() -> str:
    """Rules ``body0..bodyK``: strings that contain no reserved literal (an automaton over the
    proper prefixes of the literals, written as right-recursive rules; ``body0`` starts it), and
    ``bodyne``: the same strings but the empty one."""
    prefixes = _literal_prefixes()
    index = {p: i for i, p in enumerate(prefixes)}
    alphabet = sorted({c for lit in RESERVED_LITERALS for c in lit})

    def step(state: str, ch: str) -> str | None:
        text = state + ch
        if any(text.endswith(lit) for lit in RESERVED_LITERALS):
            return None  # would complete a reserved literal: not allowed
        for k in range(len(text), -1, -1):  # longest suffix that is a prefix of a literal
            if text[len(text) - k:] in index:
                return text[len(text) - k:]
        return ""

    rules = []
    for state in prefixes:
        alts = ['""']
        special = []
        for ch in alphabet:
            nxt = step(state, ch)
            if nxt == "":
                continue
            special.append(ch)
            if nxt is not None:
                alts.append(f'"{ch}" body{index[nxt]}')
        other = "".join(_escape_class_char(c) for c in special)
        alts.append((f"[^{other}]" if other else "[\\s\\S]") + " body0")
        rules.append(f"body{index[state]} ::= " + " | ".join(alts))
        if state == "":  # a gen body is never empty: an empty gen adds nothing
            rules.append("bodyne ::= " + " | ".join(alts[1:]))
    return "\n".join(rules)


def program_ebnf(n_lines: int, n_tokens: int = 0) -> str:
    """The grammar of programs over an input with ``n_lines`` lines (and ``n_tokens`` tokens, if
    token copies are on). With no lines, only gens are possible."""
    copies = []
    if n_lines >= 1:
        copies.append('"lines=\\"" lnum "-" lnum')
    if n_tokens >= 1:
        copies.append('"tokens=\\"" tnum "-" tnum')
    op = '"<gen>" bodyne "</gen>"'
    rules = [
        'root ::= "<program>" ops "</program>"',
        "ops ::= \"\" | op ops",
    ]
    if copies:
        op = '"<copy " (' + " | ".join(copies) + ') "\\"/>" | ' + op
        if n_lines >= 1:
            rules.append("lnum ::= " + int_range_ebnf(n_lines))
        if n_tokens >= 1:
            rules.append("tnum ::= " + int_range_ebnf(n_tokens))
    rules.append("op ::= " + op)
    rules.append(gen_body_ebnf())
    return "\n".join(rules)


KEPT_COMPILED = 64  # compiled grammars a model keeps at hand (a region size each)


class CompiledStore(Protocol):
    """Where compiled grammars outlive the process (engine.decoding.tables gives the start-up
    cache's): ``load`` returns None when it has none for ``ebnf`` or it does not load."""

    def load(self, ebnf: str, info: Any) -> Any | None: ...

    def save(self, ebnf: str, compiled: Any) -> None: ...


class GrammarCompilerCache:
    """xgrammar state that lives as long as a model: its TokenizerInfo and a GrammarCompiler
    (which caches compiled grammars, so repeated sizes are free).

    A new region size costs a compile (0.14-0.3 s on this CPU for the embedded model's
    vocabulary). ``store`` keeps compiled grammars across processes (read back in a few ms).
    :meth:`prefetch` starts the compile on a worker thread when the edit starts, so that it
    runs while the localizer's forward and the prompt's prefill do (xgrammar releases the GIL),
    and :meth:`matcher` then finds it in this object's cache instead of compiling on the critical path.
    ``info``: a TokenizerInfo already built for ``tokenizer`` (else built here).
    """

    def __init__(self, tokenizer: Any, vocab_size: int, info: Any = None, store: CompiledStore | None = None):
        import xgrammar as xgr

        self.xgr = xgr
        self.info = info if info is not None else xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab_size)
        self.compiler = xgr.GrammarCompiler(self.info)
        self.vocab_size = vocab_size
        self.store = store
        self._compiled: OrderedDict[str, Any] = OrderedDict()  # the most recent, beside xgrammar's own cache
        self._lock = threading.Lock()
        self._worker: ThreadPoolExecutor | None = None

    def _compile(self, ebnf: str) -> Any:
        with self._lock:  # a matcher asked for while its prefetch runs waits here, then finds it
            compiled = self._compiled.get(ebnf)
            if compiled is None and self.store is not None:
                compiled = self.store.load(ebnf, self.info)
            if compiled is None:
                compiled = self.compiler.compile_grammar(ebnf)
                if self.store is not None:
                    self.store.save(ebnf, compiled)
            self._compiled[ebnf] = compiled
            self._compiled.move_to_end(ebnf)
            while len(self._compiled) > KEPT_COMPILED:
                self._compiled.popitem(last=False)
            return compiled

    def prefetch(self, n_lines: int, n_tokens: int = 0) -> None:
        """Compile the grammar :meth:`matcher` will ask for with these sizes, in the background."""
        if self._worker is None:
            self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="grammar-prefetch")
        self._worker.submit(self._compile, program_ebnf(n_lines, n_tokens))

    def matcher(self, n_lines: int, n_tokens: int = 0) -> Any:
        compiled = self._compile(program_ebnf(n_lines, n_tokens))
        return self.xgr.GrammarMatcher(compiled, terminate_without_stop_token=True)

    def new_bitmask(self) -> Any:
        return self.xgr.allocate_token_bitmask(1, self.info.vocab_size)


OPEN_I = re.compile(r'<copy (lines|tokens)="([0-9]*)$')
OPEN_J = re.compile(r'<copy (lines|tokens)="([0-9]+)-([0-9]*)$')


class RangeConstraint:
    """Per-step mask for what a context-free grammar cannot say cheaply: ``I <= J``, no gen right
    after a gen, ``</program>`` only where the program may end (``engine.language.program.may_end_after``:
    after a gen, after a copy that reached the input's end, at once for an empty input), nothing
    else after such a copy (``must_end``: ``engine.language.program.must_end_after``), and
    (when ``monotonic``) line copies that move forward through the input, each starting after the
    previous one ended, so a program cannot copy a line twice or loop back.

    A gen that rewrote the next input line is a replacement (given ``lines``, the input's lines,
    when ``monotonic``): when the gen's last line is a variant of input line K (the next line a
    copy may start at; :func:`engine.core.lines.near_copy`), the copy after it starts at K + 1 at
    the earliest. Without this, ``<gen>fixed K</gen><copy lines="K-...`` is an insertion that keeps
    the bug next to its fix, and the model writes it (``return a + b`` above ``return a - b``): a
    fix it meant as a replacement, since no gold edit of the corpora writes such a pair.

    The grammar already limits every number to ``1..n`` without leading zeros; here a digit token
    is masked when no completion of the number lies in the allowed interval. ``tag_text`` is the
    text of the op being written, from its ``<``. Which op a token starts is read from the tag
    and the token together, so a token that merges ``<`` with what follows (``</``, ``<gen>``,
    ``</program>``) is masked like the ``<`` + letter it spells.
    """

    def __init__(self, vocab_texts: Sequence[str], n_lines: int, n_tokens: int, monotonic: bool = True,
                 lines: Sequence[str] | None = None):
        self.vocab_texts = vocab_texts
        self.lines = list(lines) if lines is not None and monotonic else None
        self.limits = {"lines": n_lines, "tokens": n_tokens}
        self.monotonic = monotonic
        self.next_line = 1  # smallest start allowed for the next line copy
        self.after_gen = False  # the last op was a gen
        self.may_end = may_end_after(None, n_lines, n_tokens)  # may </program> come next
        self.must_end = False  # must it: the last op was a copy that reached the input's end

    def op_finished(self, op: Op) -> None:
        """Update the state after an op of the program (the decoders' one entry point)."""
        if isinstance(op, CopyLines):
            self.copied("lines", op.end)
        elif isinstance(op, CopyTokens):
            self.copied("tokens", op.end)
        elif isinstance(op, Gen):
            self.gen_closed(op.text)
        else:
            self.gen_closed()

    def copied(self, kind: str, end: int) -> None:
        if kind == "lines" and self.monotonic:
            self.next_line = max(self.next_line, end + 1)
        self.after_gen = False
        self.may_end = self.must_end = end >= self.limits[kind]

    def gen_closed(self, text: str = "") -> None:
        self.after_gen = True
        self.may_end, self.must_end = True, False
        if self.rewrote_next_line(text):
            self.next_line += 1

    def rewrote_next_line(self, text: str) -> bool:
        """Does a gen writing ``text`` end with a whole line that is a variant of the next input
        line (so a copy starting there would keep the line it rewrote)?"""
        if self.lines is None or not text.endswith("\n") or self.next_line > len(self.lines):
            return False
        return near_copy(split_lines(text)[-1], self.lines[self.next_line - 1])

    def snapshot(self) -> tuple[int, bool, bool, bool]:
        return self.next_line, self.after_gen, self.may_end, self.must_end

    def restore(self, state: tuple[int, bool, bool, bool]) -> None:
        self.next_line, self.after_gen, self.may_end, self.must_end = state

    def banned_ops(self) -> str:
        """The second characters of the op literals not allowed next: ``g`` (``<gen>``), ``c``
        (``<copy``), ``/`` (``</program>``)."""
        # A gen never follows a gen (one gen says the same), so after the last copy at most
        # one gen adds text and then only the end is left; a line copy needs lines left.
        if self.must_end:
            return "gc"
        return (("g" if self.after_gen else "")
                + ("c" if self.next_line > self.limits["lines"] and not self.limits["tokens"] else "")
                + ("" if self.may_end else "/"))

    def banned(self, tag_text: str, candidates: np.ndarray) -> list[int]:
        if tag_text in ("", "<"):
            banned = self.banned_ops()
            if not banned:
                return []
            out = []
            for tok in candidates.tolist():
                spelled = tag_text + self.vocab_texts[tok]
                if len(spelled) >= 2 and spelled[0] == "<" and spelled[1] in banned:
                    out.append(tok)
            return out
        match = OPEN_J.search(tag_text)
        if match:
            prefix, low, high = match.group(3), int(match.group(2)), self.limits[match.group(1)]
        else:
            match = OPEN_I.search(tag_text)
            if not match or match.group(1) != "lines":
                return []
            prefix, low, high = match.group(2), self.next_line, self.limits["lines"]
        closer = '"' if match.re is OPEN_J else "-"
        return banned_digits(self.vocab_texts, candidates, prefix, closer, [(low, high)])


def banned_digits(vocab_texts: Sequence[str], candidates: np.ndarray, prefix: str, closer: str,
                  intervals: Sequence[tuple[int, int]]) -> list[int]:
    """The candidate tokens that would leave a number (written so far: ``prefix``; ended by
    ``closer``) with no completion inside any of ``intervals`` (inclusive bounds)."""
    out = []
    for tok in candidates.tolist():
        text = vocab_texts[tok]
        digits = len(text) - len(text.lstrip("0123456789"))
        new_prefix = prefix + text[:digits]
        closes = digits < len(text) and text[digits] == closer
        if not any(has_completion(new_prefix, closes, low, high) for low, high in intervals):
            out.append(tok)
    return out


def has_completion(prefix: str, closes: bool, low: int, high: int) -> bool:
    """Can a number starting with ``prefix`` (exactly ``prefix`` if ``closes``) lie in low..high?"""
    if not prefix:
        return not closes
    value = int(prefix)
    if closes:
        return low <= value <= high
    width = len(prefix)
    while width <= len(str(high)):
        span = 10 ** (width - len(prefix))
        if value * span <= high and (value + 1) * span - 1 >= low:
            return True
        width += 1
    return False
