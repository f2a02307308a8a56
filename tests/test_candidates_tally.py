"""A round's tally (engine.candidates.tally): K distinct candidates or a shortfall counted by kind,
the search that keeps decoding variants until it has K or its budget is spent, and the words the
front doors print. The search runs on ``scripted`` (tests/test_candidates_search.py), a
fake that answers each request with a scripted output: a real model does not repeat, refuse or
keep the code on cue."""

from __future__ import annotations

import itertools
from pathlib import Path

from support import ADD_DOCUMENTED as BUGGY
from test_candidates_search import BROKEN, FIXED, WRONG, buggy_file, result, scripted

from engine.api import EditRequest
from engine.bench.candidates import extra_candidate_cost, extra_decode_cost, reach
from engine.candidates import CheckSpec, search_fixes
from engine.candidates.outcome import decide
from engine.candidates.search import budget_for, variants
from engine.candidates.tally import RoundTally, ordinal
from engine.verdict import EXIT_NO_VERIFIED_FIX

SWAPPED = BUGGY.replace("a - b", "b + a")


def test_ordinals() -> None:
    assert [ordinal(n) for n in (1, 2, 4, 16, 17, 21, 22, 23, 111)] == [
        "first", "second", "fourth", "sixteenth", "17th", "21st", "22nd", "23rd", "111th"]


def test_a_short_round_in_words_and_json() -> None:
    tally = RoundTally(1, asked=4, budget=16, distinct=3, decodes=16)
    tally.lost.update({"repeated": 1, "syntax": 1, "unchanged": 2})
    assert tally.short
    assert tally.words("javascript") == ("3 distinct candidates; the model had no fourth in 16 decodes "
                                         "(2 changed nothing, 1 broke the javascript syntax, 1 repeated another)")
    assert tally.json()["lost"] == {"unchanged": 2, "syntax": 1, "repeated": 1} and tally.json()["short"]
    none = RoundTally(1, asked=2, budget=8, decodes=8)
    none.lost.update({"unchanged": 1, "repeated": 7})
    assert none.words() == "no distinct candidate in 8 decodes (1 changed nothing, 7 repeated others)"


def test_a_candidate_held_far_from_the_focus_is_counted_in_its_own_words() -> None:
    tally = RoundTally(1, asked=2, budget=8, distinct=1, decodes=8)
    tally.lost.update({"far": 2, "repeated": 5})
    assert tally.words() == ("1 distinct candidate; the model had no second in 8 decodes "
                             "(2 edited far from the line pointed at, 5 repeated others)")


def test_a_full_or_passed_round_is_not_short() -> None:
    assert not RoundTally(1, asked=2, budget=8, distinct=2, decodes=3, ended="full").short
    passed = RoundTally(1, asked=4, budget=16, distinct=1, decodes=1, ended="passed")
    assert not passed.short and passed.words() == "1 distinct candidate"


def test_the_search_decodes_past_refusals_and_repeats_until_k_distinct() -> None:
    engine = scripted([BUGGY, BROKEN, WRONG, WRONG, FIXED, SWAPPED, WRONG])
    search = search_fixes(engine, EditRequest(BUGGY, "Fix add.", language="python"), k=3, check=None)
    usable = sorted(c.result.output_text for c in search.candidates if c.refused is None)
    assert usable == sorted([WRONG, FIXED, SWAPPED]) and len(engine.asked) == 6  # stops at K
    (tally,) = search.tallies
    assert (tally.distinct, tally.decodes, tally.ended) == (3, 6, "full") and not tally.short
    assert dict(tally.lost) == {"unchanged": 1, "syntax": 1, "repeated": 1}
    assert search.shortfall() == "" and search.json()["distinct"] == 3
    assert decide(search, checked=False, k=3).message == ""  # K found: nothing to add


def test_a_model_with_no_other_fix_ends_at_the_budget_and_says_so(tmp_path: Path) -> None:
    path = buggy_file(tmp_path)
    engine = scripted([BUGGY, WRONG])  # then WRONG again and again
    search = search_fixes(engine, EditRequest(BUGGY, "Fix add.", language="python"), k=4,
                          check=CheckSpec("exit 1"), file_path=path)
    assert len(engine.asked) == budget_for(4) == search.decodes
    words = "1 distinct candidate; the model had no second in 16 decodes (1 changed nothing, 14 repeated others)"
    assert search.shortfall() == words and search.json()["shortfall"] == words
    assert search.json()["rounds_tally"][0]["lost"] == {"unchanged": 1, "repeated": 14}
    decision = decide(search, checked=True, k=4)
    assert decision.exit_code == EXIT_NO_VERIFIED_FIX and words in decision.message
    assert "--candidates 4 " not in decision.message + " "  # advice never repeats the K given
    unchecked = search_fixes(scripted([BUGGY, WRONG]), EditRequest(BUGGY, "Fix add."), k=2, check=None)
    written = decide(unchecked, checked=False, k=2)
    assert written.exit_code == 0 and written.write is not None and "the model had no second" in written.message


def test_a_pass_ends_the_round_without_a_shortfall(tmp_path: Path) -> None:
    path = buggy_file(tmp_path)
    passes = "grep -q 'a + b' {file}"
    search = search_fixes(scripted([FIXED, WRONG]), EditRequest(BUGGY, "Fix add."), k=4,
                          check=CheckSpec(passes), file_path=path)
    assert search.passed is not None and search.shortfall() == ""


def test_variants_never_end_and_never_repeat_a_seed_at_a_line() -> None:
    first = result(BUGGY, BUGGY, ranked=(3, 2, 1))  # hint 3, the localizer's next lines 2 and 1
    plans = list(itertools.islice(variants(EditRequest(BUGGY, "Fix add.", focus_line=3), first, 4), 40))
    hows = [how for how, _ in plans]
    assert hows[:6] == ["greedy at line 2", "greedy at line 1", "sampled (seed 1) at line 3",
                        "sampled (seed 1) at line 2", "sampled (seed 2) at line 3", "sampled (seed 2) at line 1"]
    assert len(set(hows)) == len(hows) == 40
    sampled = [r for how, r in plans if how.startswith("sampled")]
    assert all(r.temperature > 0 and not r.localize for r in sampled)
    two = [how for how, _ in itertools.islice(variants(EditRequest(BUGGY, "Fix add."), first, 2), 4)]
    assert two == ["greedy at line 2", "sampled (seed 1) at line 3", "greedy at line 1", "sampled (seed 2) at line 3"]


def test_the_bench_counts_rounds_that_reached_k_and_the_cost_of_each_extra_candidate() -> None:
    def run(distinct: int, decodes: int, seconds: float, ended: str, lost: dict[str, int]) -> dict:
        tally = {"distinct": distinct, "decodes": decodes, "seconds": seconds, "ended": ended, "lost": lost,
                 "short": ended == "ran out" and distinct < 4}
        return {"tallies": [tally], "single_shot_s": 2.0}

    runs = [run(4, 6, 5.0, "full", {"repeated": 2}), run(1, 1, 2.0, "passed", {}),
            run(2, 16, 10.0, "ran out", {"unchanged": 1, "repeated": 13})]
    counts = reach(runs, 4)
    assert (counts["reached_k"], counts["reached_k_or_passed"], counts["short"]) == (1, 2, 1)
    assert counts["lost"] == {"repeated": 15, "unchanged": 1}
    assert counts["lost_in_short_rounds"] == {"unchanged": 1, "repeated": 13}
    assert counts["decodes_per_distinct"] == round(23 / 7, 2)
    assert extra_candidate_cost(runs[0]) == 0.5  # (5 - 2) s over 3 more candidates, over 2 s
    assert extra_candidate_cost(runs[1]) is None and extra_candidate_cost(runs[2]) == 4.0
    assert extra_decode_cost(runs[0]) == 0.3 and extra_decode_cost(runs[1]) is None  # (5 - 2) s / 5 decodes / 2 s
