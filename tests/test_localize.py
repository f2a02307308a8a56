"""The localizer (engine/decoding/localize.py): which prompt tokens belong to which region line, how lines
are ranked, and the focus a program edit runs with, on the real embedded model."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.decoding.localize import LineSurprise, rank_lines

REGION = "def f(x):\n\n    y = x * 2\n    return y\r\nprint(f(3))"


def test_prompt_tokens_are_mapped_to_their_lines() -> None:
    from engine.decoding.localize import prompt_with_lines
    from engine.decoding.prompt import PromptParts, render, selector_messages
    from engine.runtime.sources import load_tokenizer

    tokenizer = load_tokenizer("default")
    parts = PromptParts(instruction="Fix the bug", region=REGION, focus_line=3)
    ids, lines = prompt_with_lines(tokenizer, parts)
    # the hintless selector prompt: what a program edit without a focus prefills
    assert ids == render(tokenizer, selector_messages(PromptParts(instruction="Fix the bug", region=REGION)))
    texts = [tokenizer.decode([ids[p] for p in members]) for members in lines]
    assert [t.strip() for t in texts] == ["def f(x):", "", "y = x * 2", "return y", "print(f(3))"]
    assert lines[1] == []  # a blank line has no code tokens
    assert all(p > 0 for members in lines for p in members)


def _surprise(means: list[float]) -> list[LineSurprise]:
    return [LineSurprise(i, 3 if m else 0, m, 2 * m, 3 * m) for i, m in enumerate(means, start=1)]


def test_rank_lines_by_surprise_and_cursor() -> None:
    scores = _surprise([1.0, 0.0, 3.0, 2.0, 0.5])
    assert rank_lines(scores, REGION, "mean") == [3, 4, 1, 5]  # the blank line 2 is never a candidate
    assert rank_lines(scores, REGION, "total") == [3, 4, 1, 5]
    # a cursor on line 4 with a tight prior keeps it; a wide one lets line 3 win
    assert rank_lines(scores, REGION, "mean", cursor=4, scale=0.5)[0] == 4
    assert rank_lines(scores, REGION, "mean", cursor=4, scale=4.0)[0] == 3
    # the window drops lines too far from the cursor, however surprising
    assert rank_lines(scores, REGION, "mean", cursor=1, scale=100.0, window=2) == [3, 1]
    with pytest.raises(ValueError):
        rank_lines(scores, REGION, "median")


@pytest.mark.model
def test_plan_focus_on_the_example(default_engine, monkeypatch: pytest.MonkeyPatch) -> None:
    """examples/buggy_add.py: the least natural line is the bug; under guard
    the hint goes there and is guarded wherever the cursor is; under keep a user focus on code is
    kept; without the localizer the focus is exactly what was sent. (Its two code lines are a
    region the product runs without the localizer, FEW_LINES: lowered here to test the ranking.)"""
    import engine.decoding.localize
    from engine.decoding.localize import _SURPRISES, CURSOR_WINDOW, plan_focus
    from engine.decoding.prompt import PromptParts

    monkeypatch.setattr(engine.decoding.localize, "FEW_LINES", 1)

    text = (Path(__file__).resolve().parents[1] / "examples" / "buggy_add.py").read_text()
    loaded = default_engine.model_for("program")
    _SURPRISES.pop(loaded.runtime, None)  # an earlier test's edit of this file may have kept its surprise
    parts = PromptParts(instruction="Fix the bug in add.", region=text, language="python")
    plan = plan_focus(loaded, parts, policy="keep")
    assert (plan.hint, plan.noop_line, plan.source) == (3, None, "localized") and plan.seconds > 0
    again = plan_focus(loaded, parts, policy="keep")  # kept with the prompt caches: no second forward
    assert (again.hint, again.seconds) == (3, 0.0)
    for focus in (1, 2, 3):
        plan = plan_focus(loaded, PromptParts(instruction=parts.instruction, region=text, focus_line=focus),
                          policy="keep")
        assert abs(plan.hint - focus) <= CURSOR_WINDOW
        # a cursor on code stays; on the docstring (line 2) it moves to the likelier code line, the bug
        assert (plan.hint, plan.source) == ((3, "moved") if focus == 2 else (focus, "user"))
        # the no-op deviation guards a kept cursor only where the localizer's best line is the cursor's
        assert plan.noop_line in ((None, focus) if focus != 2 else (None,))
        assert plan_focus(loaded, PromptParts(instruction=parts.instruction, region=text, focus_line=focus),
                          noop=False, policy="keep").noop_line is None
        off = plan_focus(loaded, PromptParts(instruction=parts.instruction, region=text, focus_line=focus),
                         localize=False, noop=False)
        assert (off.hint, off.noop_line, off.source, off.seconds) == (focus, None, "user", 0.0)
        kept = plan_focus(loaded, PromptParts(instruction=parts.instruction, region=text, focus_line=focus),
                          localize=False)
        assert (kept.hint, kept.noop_line) == (focus, focus)  # without the localizer: today's rule
    assert plan_focus(loaded, parts, localize=False).hint is None
    # policy move (the benchmarks' -moved arms): a cursor on code moves like one on prose, to the bug
    moved = plan_focus(loaded, PromptParts(instruction=parts.instruction, region=text, focus_line=1), policy="move")
    assert (moved.hint, moved.noop_line, moved.source) == (3, None, "moved")
    stays = plan_focus(loaded, PromptParts(instruction=parts.instruction, region=text, focus_line=3), policy="move")
    assert (stays.hint, stays.source) == (3, "user")
    # policy guard: the hint goes to the localizer's line and the deviation guards it there
    for focus in (1, 2, 3, None):
        guarded = plan_focus(loaded, PromptParts(instruction=parts.instruction, region=text, focus_line=focus),
                             policy="guard")
        assert (guarded.hint, guarded.noop_line) == (3, 3)
        assert plan_focus(loaded, PromptParts(instruction=parts.instruction, region=text, focus_line=focus),
                          policy="guard", noop=False).noop_line is None
    # policy hold: guard, but a cursor on code close enough to the best line stays, as under keep
    from engine.decoding.localize import HOLD_SHARE

    for focus in (1, 3):
        request = PromptParts(instruction=parts.instruction, region=text, focus_line=focus)
        held = plan_focus(loaded, request, policy="hold")
        assert held.cursor_share is not None and 0 < held.cursor_share <= 1
        like = "keep" if held.cursor_share >= HOLD_SHARE else "guard"
        other = plan_focus(loaded, request, policy=like)
        assert (held.hint, held.noop_line, held.source) == (other.hint, other.noop_line, other.source)
    held = plan_focus(loaded, PromptParts(instruction=parts.instruction, region=text, focus_line=2), policy="hold")
    assert (held.hint, held.noop_line) == (3, 3)  # a cursor on the docstring moves as under guard
    with pytest.raises(ValueError, match="focus policy"):
        plan_focus(loaded, parts, policy="nearest")


def test_prose_lines_are_never_candidates() -> None:
    """Docstrings and comment lines are the least natural lines of all; the hint is for code."""
    from engine.decoding.localize import prose_lines

    source = ('def f(x):\n    """Twice x.\n\n    More words.\n    """\n    # a comment\n    y = x * 2  # trailing\n'
              '    "also a string statement"\n    return y\n')
    assert prose_lines(source, "python") == {2, 3, 4, 5, 6, 8}
    js = "/**\n * Twice x.\n */\nfunction f(x) {\n  // note\n  return x * 2;\n}\n"
    assert prose_lines(js, "javascript") == {1, 2, 3, 5}
    assert prose_lines("def f(:\n    # c\n", "python") == {2}  # does not parse: comments only
    scores = _surprise([1.0, 9.0, 3.0])
    assert rank_lines(scores, "a\nb\nc\n", "mean", exclude={2}) == [3, 1]


def test_localize_benchmark_counts_hits() -> None:
    """bench localize's tally on hand-made per-line scores: the signal ranks line 3 first, the
    near cursor sits on line 1; the gold changes line 3 in one case and line 1 in the other."""
    from engine.bench.localize import summarize

    scores = [[3, 1.0, 1.0, 3.0], [0, 0.0, 0.0, 0.0], [3, 3.0, 3.0, 9.0], [3, 2.0, 2.0, 6.0], [3, 0.5, 0.5, 1.5]]
    model = {"selector": {"seconds": 0.5, "prompt_tokens": 40, "region_tokens": 12, "scores": scores}}
    records = [{"id": "a", "lines": 5, "changed": 3, "sites": [3], "near": 1, "models": model},
               {"id": "b", "lines": 5, "changed": 1, "sites": [1, 4], "near": 1, "models": model}]
    table = summarize(records, {"a": REGION, "b": REGION}, "python")["selector"]["rankings"]
    assert table["total"] == {"cases": 2, "top1": 1, "top3": 2, "top1_any": 1, "top3_any": 2}
    assert table["cursor"]["top1"] == 1 and table["cursor"]["top3"] == 2  # lines 1, 3, 4 by distance (2 is blank)
    assert table["last"]["top1"] == 0  # line 5 (print) is last
    assert table["total x cursor/1"]["top1"] == 1


def test_a_cursor_scores_only_the_lines_near_it(default_engine) -> None:
    """With a cursor the localizer ranks lines within CURSOR_WINDOW of it only, so it scores just
    those: the same values as the full forward, on a fraction of the LM-head rows."""
    from engine.decoding.localize import _SURPRISES, line_surprise
    from engine.decoding.prompt import PromptParts

    loaded = default_engine.model_for("program")
    region = "".join(f"def f{i}(x):\n    return x * {i} + {i % 3}\n" for i in range(12))
    parts = PromptParts(instruction="Fix the bug.", region=region, language="python")
    _SURPRISES.pop(loaded.runtime, None)
    full = line_surprise(loaded, parts)
    near = line_surprise(loaded, parts, frozenset(range(9, 16)))
    assert near.region_tokens < full.region_tokens / 2 and near.seconds > 0  # its own forward, not the full one's
    for a, b in zip(full.lines, near.lines):
        if 9 <= a.line <= 15:
            assert (a.tokens, round(a.total, 3)) == (b.tokens, round(b.total, 3)), a.line
        else:
            assert b.tokens == 0, b.line


@pytest.mark.model
def test_no_forward_where_its_answer_is_known_or_the_region_is_small(default_engine) -> None:
    """A cursor whose window holds no other code line: the plan the forward would give, without
    the forward. A region of at most FEW_LINES code lines: no forward either (a cursor on code is
    the guarded hint, else the last code line with a word). The warm-up then reads the edit's own
    prompt."""
    from engine.api import EditRequest
    from engine.decoding.localize import _SURPRISES, FEW_LINES, plan_focus
    from engine.decoding.prompt import PromptParts
    from engine.decoding.warm import warm_prompt

    loaded = default_engine.model_for("program")
    _SURPRISES.pop(loaded.runtime, None)
    alone = "x = 41\n" + "# note\n" * 8 + "".join(f"y{i} = {i}\n" for i in range(FEW_LINES))
    for policy in ("hold", "guard", "keep", "move"):
        on = plan_focus(loaded, PromptParts(instruction="Fix the bug.", region=alone, language="python",
                                            focus_line=1), policy=policy)
        assert (on.hint, on.noop_line, on.source, on.cursor_share, on.seconds, on.scored) == (1, 1, "user", 1.0, 0.0,
                                                                                               False)
        prose = plan_focus(loaded, PromptParts(instruction="Fix the bug.", region=alone, language="python",
                                               focus_line=5), policy=policy)
        assert (prose.hint, prose.noop_line, prose.source, prose.seconds) == (5, None, "user", 0.0)
    text = (Path(__file__).resolve().parents[1] / "examples" / "buggy_add.py").read_text()  # 2 code lines
    parts = PromptParts(instruction="Fix the bug in add.", region=text, language="python")
    for policy in ("hold", "guard", "keep", "move"):
        guarded = 3 if policy in ("hold", "guard") else None  # as the localizer's own line would be
        plan = plan_focus(loaded, parts, policy=policy)
        assert (plan.hint, plan.noop_line, plan.source, plan.seconds) == (3, guarded, "localized", 0.0)
        for focus, want in ((1, (1, 1, "user")), (2, (3, guarded, "moved")), (3, (3, 3, "user"))):  # 2: the docstring
            near = plan_focus(loaded, PromptParts(instruction=parts.instruction, region=text, focus_line=focus),
                              policy=policy)
            assert (near.hint, near.noop_line, near.source, near.seconds) == (*want, 0.0), (policy, focus)
    js = "const isOdd = (n) => {\n  return n % 2 === 0;\n};\n"  # the closing line is never the hint
    assert plan_focus(loaded, PromptParts(instruction="Fix isOdd.", region=js, language="javascript")).hint == 2
    request = EditRequest(text=text, instruction="Fix the bug in add.", mode="program", language="python")
    default_engine.forget_prompts()
    assert warm_prompt(loaded, request, lambda: False, 4096).forwarded > 0
    result = default_engine.edit(request)
    assert result.breakdown["prefix_reused"] > 0 and "localize_s" not in result.breakdown
