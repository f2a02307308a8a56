"""Where is the problem? Per-line surprise of the region under the program-mode model.

Buggy lines are often the least natural ones: a model that read the instruction ("Fix the bug
in add") finds ``return a - b`` more surprising than the docstring above it. The signal is the
negative log-likelihood of each region line's code tokens (the ``K| `` line numbers aside) in
the program-mode prompt, so the forward is the prefill the edit runs anyway, and its KV goes to
the runtime's prefix cache for the edit that follows:

* a cursor on a code line keeps its hint (see :func:`plan_focus`), so the forward reads the
  program prompt itself, hint and forced opening included, and keeps the logits after its last
  token: the edit's own prefill then forwards nothing (engine.runtime.prefix_cache);
* no cursor, or a cursor on prose (the hint may move): the hintless prompt. With the
  ``hint-after`` layout (engine.decoding.prompt.HINT_AFTER, the shipped adapter's) that is
  the hinted prompt's prefix; adapters trained on ``hint-before`` prefill the region again (one
  extra forward).

Scores per line (1-based): ``mean`` (NLL per token), ``max`` (the worst token), ``total``.
:func:`rank_lines` orders candidate lines (non-blank, and not prose: :func:`prose_lines`) by a
score, optionally weighted by a cursor prior ``1 / (1 + distance / scale)`` (the user's cursor is
near the bug, seldom on it). Prose is left out because docstrings and comments are the least
natural lines of all (a docstring's opening quotes surprise the model more than any bug), and a
fix of the code is what the hint is for.
"""

from __future__ import annotations

import ast
import math
import warnings
import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from engine.core.choices import never_cancelled
from engine.core.lines import split_lines
from engine.core.tokens import encode
from engine.core.choices import DEFAULT_FOCUS_POLICY, FOCUS_POLICIES
from engine.decoding.prompt import (
    HINT_AFTER,
    PromptParts,
    focus_free_prefix,
    focus_in_region,
    numbered,
    render,
    selector_messages,
)
from engine.language.program import PROGRAM_OPENING
from engine.runtime.selector.adapter import prompt_layout

STATISTICS = ("mean", "max", "total")


@dataclass(frozen=True)
class LineSurprise:
    """The NLL (nats) of one region line's code tokens."""

    line: int
    tokens: int
    mean: float
    max: float
    total: float

    def score(self, statistic: str) -> float:
        return float(getattr(self, statistic))


@dataclass(frozen=True)
class Surprise:
    """Per-line surprise of a region, with what the forward cost."""

    lines: list[LineSurprise]
    prompt_tokens: int
    region_tokens: int
    seconds: float
    forwards: int = 0  # the forwards it ran (its prompt's chunks; 0 when kept from an earlier edit)


_SURPRISES: weakref.WeakKeyDictionary[Any, OrderedDict[tuple[Any, ...], Surprise]] = weakref.WeakKeyDictionary()
_SURPRISES_KEPT = 4  # per runtime: the last few prompts' surprises


class LocalizeError(ValueError):
    """The prompt does not contain the region as the numbered input (a template that rewrites it)."""


def prompt_with_lines(tokenizer: Any, parts: PromptParts, layout: str | None = None
                      ) -> tuple[list[int], list[list[int]]]:
    """The selector prompt's ids and, per region line, the positions of its code tokens (tokens
    that overlap the line's text after ``K| ``, its terminator excluded). ``layout`` None: the
    hintless prompt; a layout (engine.decoding.prompt.SELECTOR_LAYOUTS): the prompt with ``parts``' focus
    hint in that layout followed by the program's forced opening, i.e. exactly what the program
    decoder's prefill forwards."""
    hinted = layout is not None
    if layout is None:
        parts, layout = replace(parts, focus_line=None), HINT_AFTER  # hintless: the same in every layout
    messages = selector_messages(parts, layout)
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    ids = list(encoded["input_ids"])
    if ids != render(tokenizer, messages):
        raise LocalizeError("the offsets tokenization differs from the prompt's")
    opening = encode(tokenizer, PROGRAM_OPENING) if hinted else []
    shown = numbered(parts.region)
    start = text.rfind(shown)
    if start < 0:
        raise LocalizeError("the chat template does not show the numbered region verbatim")
    spans = []
    pos = start
    for number, line in enumerate(split_lines(parts.region), start=1):
        code = line.rstrip("\r\n")
        begin = pos + len(f"{number}| ")
        spans.append((begin, begin + len(code)))
        pos = begin + len(line) + (0 if line.endswith("\n") else 1)
    lines: list[list[int]] = [[] for _ in spans]
    k = 0
    for index, (a, b) in enumerate(encoded["offset_mapping"]):
        while k < len(spans) and a >= spans[k][1]:
            k += 1
        if k < len(spans) and index > 0 and a < spans[k][1] and b > spans[k][0]:  # overlaps the line's code
            lines[k].append(index)
    return ids + opening, lines


def line_surprise(loaded: Any, parts: PromptParts, only: frozenset[int] | None = None,
                  layout: str | None = None, cancelled: Callable[[], bool] = never_cancelled) -> Surprise:
    """Per-line NLL of ``parts.region`` in the selector prompt (hintless, or hinted in ``layout``:
    see :func:`prompt_with_lines`), one forward on ``loaded`` (the prompt's logits at the rows
    before each region code token only). ``only``: score just these lines (the others come back
    with ``tokens == 0``, never ranked): the LM head then runs on a few rows instead of every
    region token's, and the forward costs about a plain prefill. Its KV goes to the runtime's
    prefix cache, so the edit that follows with the same prompt prefills nothing again.
    ``cancelled`` is polled between the forward's chunks: once True it raises
    engine.core.errors.Cancelled, and the chunks read so far stay in the prefix cache."""
    import time

    ids, lines = prompt_with_lines(loaded.tokenizer, parts, layout)
    if only is not None:
        lines = [members if number in only else [] for number, members in enumerate(lines, start=1)]
    # An editor asks again on an unchanged buffer: the same prompt gives the same surprise (the
    # prefill is bit-identical, engine.runtime.session), and this forward's rows cannot come from a KV
    # cache. Kept while the runtime keeps prompts (in process, off with prefix_cache_tokens=0; a
    # server keeps its own prompt cache, so a warm-up's request spares the fix one).
    runtime = loaded.runtime
    kept = runtime.keeps_prompts
    memo = _SURPRISES.setdefault(runtime, OrderedDict())
    key = (tuple(ids), only)
    if not kept:
        memo.clear()
    elif key in memo:
        memo.move_to_end(key)
        return replace(memo[key], seconds=0.0, forwards=0)
    positions = sorted(p for line in lines for p in line)
    start = time.perf_counter()
    nll: dict[int, float] = {}
    forwards = 0
    if positions:
        # Cut where the hinted program prompt goes on differently: its prefill reuses all before.
        marks = [focus_free_prefix(loaded.tokenizer, parts, layout or HINT_AFTER)]
        nll, forwards = runtime.prompt_nll(ids, positions, marks, cancelled)
    seconds = time.perf_counter() - start
    out = []
    for number, members in enumerate(lines, start=1):
        values = [nll[p] for p in members]
        out.append(LineSurprise(number, len(values), sum(values) / len(values) if values else 0.0,
                                max(values, default=0.0), sum(values)))
    result = Surprise(out, len(ids), len(positions), seconds, forwards)
    if kept:
        memo[key] = result
        while len(memo) > _SURPRISES_KEPT:
            memo.popitem(last=False)
    return result


COMMENT_PREFIXES = ("#", "//", "/*", "*", "*/", "<!--")


def prose_lines(region: str, language: str = "") -> set[int]:
    """1-based lines that hold only a comment, or (Python, when the region parses) lie in a
    docstring or another string statement: text for readers, not code to fix."""
    lines = split_lines(region)
    out = {i for i, line in enumerate(lines, start=1) if line.strip().startswith(COMMENT_PREFIXES)}
    if language.lower() in ("python", "py", ""):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tree = ast.parse(region)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return out
        for node in ast.walk(tree):
            if (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
                    and isinstance(node.value.value, str)):
                out.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return out


def cursor_prior(distance: int, scale: float) -> float:
    """How much a line ``distance`` lines from the cursor is believed: 1 at the cursor, halved at ``scale``."""
    return 1.0 / (1.0 + abs(distance) / scale)


def rank_lines(surprise: Sequence[LineSurprise], region: str, statistic: str = "mean", cursor: int | None = None,
               scale: float = 2.0, window: int | None = None, exclude: set[int] | frozenset[int] = frozenset()
               ) -> list[int]:
    """Candidate lines (non-blank, with code tokens, not in ``exclude``) best first: by
    ``statistic``, times the cursor prior when a cursor is given; ``window`` keeps only lines
    within that distance of the cursor."""
    if statistic not in STATISTICS:
        raise ValueError(f"unknown statistic {statistic!r}; choose from {', '.join(STATISTICS)}")
    text = split_lines(region)
    scored = []
    for s in surprise:
        if s.tokens == 0 or not text[s.line - 1].strip() or s.line in exclude:
            continue
        if cursor is not None and window is not None and abs(s.line - cursor) > window:
            continue
        value = s.score(statistic)
        if cursor is not None:
            value *= cursor_prior(s.line - cursor, scale)
        scored.append((-value if math.isfinite(value) else math.inf, s.line))
    return [line for _, line in sorted(scored)]


# --- The focus an edit runs with ---------------------------------------------------------------
# Chosen by measurement (results/localize/, `copy-as-decode bench localize`): see plan_focus.
STATISTIC = "total"
CURSOR_SCALE = 4.0
CURSOR_WINDOW = 3
# ``hold``: the cursor's line stays the hint while its prior-weighted surprise is at least this
# share of the best line's (a cursor on the bug is often a close second; see plan_focus).
HOLD_SHARE = 0.5


@dataclass(frozen=True)
class FocusPlan:
    """What a program edit is told and guards. ``hint``: the region line the prompt names (None:
    no hint); ``noop_line``: the line whose no-op gen deviates (engine/decoding/noop_gen.py; None: none);
    ``source``: ``none``, ``user`` (the request's focus, kept), ``moved`` (the request's focus
    moved to a likelier line near it) or ``localized`` (no focus given: the likeliest line);
    ``seconds``: the localizer's forward."""

    hint: int | None
    noop_line: int | None
    source: str
    seconds: float = 0.0
    cursor_share: float | None = None  # a cursor on code: its weighted surprise / the best line's
    forwards: int = 0  # the localizer's forwards (its prompt's chunks)
    ranked: tuple[int, ...] = ()  # the localizer's candidate lines, best first (engine.candidates tries several)


def plan_focus(loaded: Any, parts: PromptParts, localize: bool = True, noop: bool = True,
               policy: str = DEFAULT_FOCUS_POLICY, cancelled: Callable[[], bool] = never_cancelled) -> FocusPlan:
    """The focus of a program edit on ``loaded`` (``parts.focus_line``: the user's, region lines).

    With ``localize`` (a model with a span selector, the model the signal was measured on, and a
    region of more than one line) the localizer finds the best line: the code line of highest
    surprise, or with a focus, of highest surprise x cursor prior within ``CURSOR_WINDOW`` lines of
    it (blank lines, comments and docstrings are never candidates). ``policy`` says what is done
    with it:

    * ``guard``: the hint goes to the best line and the no-op deviation guards it
      there (``localized`` without a focus, ``moved`` or ``user``), as the exact hint of the
      oracle arm is guarded; the deviation's cap (engine.decoding.noop_gen.MAX_GAP) keeps a line the model
      finds right. All 164 HumanEvalFix-Python cases against ``keep``: pass / exact with no hint
      15 / 10 vs 9 / 8, with a near cursor 20 / 14 vs 17 / 12, with the cursor exactly on the bug
      25 / 19 vs 31 / 24 (measured against keep on whole corpora: docs/benchmarks.md);
    * ``keep``: a focus on code stays the hint, guarded only where the best line is the cursor's
      (a moved hint and one chosen without a focus are unguarded);
    * ``move``: like ``keep``, but a focus on code moves to the best line unguarded (the first
      policy; the benchmarks' ``-moved`` arms);
    * ``hold``: ``guard``, except that a cursor on code whose prior-weighted surprise is at least
      ``HOLD_SHARE`` of the best line's stays as under ``keep``: users often click the very line,
      and ``guard`` moved such a cursor off the bug where ``keep`` fixed it. The default: on all 164
      cases of HumanEvalFix-Python / -JS (keep's and guard's edits of whole-corpus runs, chosen per
      case by the share: scripts/eval_hold_share.py, results/insertions/) 30 / 20 passes with the cursor on the bug
      (keep 31 / 22, guard 25 / 15), 18 / 8 near it (17 / 5, 20 / 10), 48 / 28 on the mix of both
      (keep 48 / 27, guard 45 / 25); without a cursor it is guard (15 / 9 passes; keep's unguarded
      hint gave 9 on Python).

    Without ``localize``: the hint is the user's focus, guarded when ``noop``. ``cancelled``: see
    :func:`line_surprise` (raises engine.core.errors.Cancelled).
    """
    if policy not in FOCUS_POLICIES:
        raise ValueError(f"unknown focus policy {policy!r}; choose from {', '.join(FOCUS_POLICIES)}")
    guard = policy in ("guard", "hold") and noop
    user = focus_in_region(parts)
    lines = split_lines(parts.region)
    if not localize or not loaded.selector or len(lines) < 2:
        return FocusPlan(user, user if noop else None, "user" if user else "none")
    prose = prose_lines(parts.region, parts.language)
    # Only candidates are ever ranked: the LM head runs on their rows alone (not on docstrings).
    candidates = frozenset(i for i, line in enumerate(lines, start=1) if line.strip() and i not in prose)
    if user is None:
        surprise = line_surprise(loaded, parts, candidates, cancelled=cancelled)
        ranked = rank_lines(surprise.lines, parts.region, STATISTIC, exclude=prose)
        best = ranked[0] if ranked else None
        return FocusPlan(best, best if guard else None, "localized" if ranked else "none", surprise.seconds,
                         forwards=surprise.forwards, ranked=tuple(ranked))
    # With a cursor only the lines near it are ever ranked: score just those (a few LM-head rows).
    # A cursor on code reads the program prompt hinted at the cursor (hint and all): where the hint
    # stays there (keep, or guard when the best line is the cursor's: about half the time) the
    # edit's prefill then comes from the prefix cache. move keeps the hintless read it was measured with.
    on_code = bool(lines[user - 1].strip()) and user not in prose
    may_move = policy != "keep"
    layout = prompt_layout(loaded.selector) if on_code and policy != "move" else None
    near = frozenset(range(user - CURSOR_WINDOW, user + CURSOR_WINDOW + 1)) & candidates
    surprise = line_surprise(loaded, replace(parts, focus_line=user), near, layout, cancelled)
    ranked = rank_lines(surprise.lines, parts.region, STATISTIC, cursor=user, scale=CURSOR_SCALE,
                        window=CURSOR_WINDOW, exclude=prose)
    best = ranked[0] if ranked else user
    share = _share(surprise.lines, user, best) if on_code else None
    if policy == "hold" and share is not None and share >= HOLD_SHARE:
        may_move = False  # close enough to the best: the user's line stays, as under keep
    if not on_code or (may_move and best != user):
        return FocusPlan(best, best if guard and ranked else None, "moved" if best != user else "user",
                         surprise.seconds, share, surprise.forwards, tuple(ranked))
    agree = best == user  # the localizer's best line near the cursor is the cursor's: guard it
    return FocusPlan(user, user if noop and agree else None, "user", surprise.seconds, share, surprise.forwards,
                     tuple(ranked))


def _share(surprise: Sequence[LineSurprise], cursor: int, best: int) -> float | None:
    """The cursor line's prior-weighted score over the best line's (1.0 when they are one)."""
    def weighted(line: int) -> float:
        return surprise[line - 1].score(STATISTIC) * cursor_prior(line - cursor, CURSOR_SCALE)

    if best == cursor:
        return 1.0
    top = weighted(best)
    return weighted(cursor) / top if top > 0 and surprise[cursor - 1].tokens else None


def forget_surprises(runtime: Any) -> None:
    """Drop the surprises kept for ``runtime`` (a benchmark measures every edit as a first edit)."""
    _SURPRISES.pop(runtime, None)
