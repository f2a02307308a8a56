"""Cost-aware drafting (engine.runtime.cost, engine.decoding.drafter.DraftPolicy): s(N) is learned from the forwards
a runtime runs, each draft is as long as its expected gain pays for, none where no draft beats a
plain step, and outputs never change (speculative == ar, drafted program == undrafted)."""

from __future__ import annotations

import pytest
from support import ADD_AND_SUB as BUGGY

from engine.api import EditError, EditRequest, Engine
from engine.decoding.drafter import InputDrafter, ProgramDrafter, ProgramState
from engine.runtime.cost import CostModel, best_draft_size, expected_accepted

DEAR = {2: 2.0, 256: 256.0}  # every token of a forward costs a full step: no draft can pay
CHEAP = {2: 1.0, 256: 1.0}  # a verify costs what a step costs: every draft pays


def test_cost_model_learns_ratios_from_forwards(tmp_path):
    cost = CostModel(tmp_path / "cost.json")
    assert cost.ratio(8) == pytest.approx(1.7)  # the prior, until a one-token step is measured
    for _ in range(4):
        cost.observe(1, 0.020)
        cost.observe(8, 0.060)
        cost.observe(64, 0.200)
    assert cost.ratio(1) == 1.0 and cost.ratio(8) == pytest.approx(3.0) and cost.ratio(64) == pytest.approx(10.0)
    assert cost.ratio(36) == pytest.approx(6.5)  # interpolated between the measured sizes
    assert cost.ratio(120) == pytest.approx(10.0 + 7.0 * 56 / 56)  # the last slope, extended
    cost.save()
    again = CostModel(tmp_path / "cost.json")  # the next process starts from the saved table
    assert again.ratio(8) == pytest.approx(3.0)
    frozen = CostModel.fixed({8: 2.0})
    frozen.observe(8, 100.0)
    assert frozen.ratio(8) == pytest.approx(2.0)


def test_a_size_dearer_than_a_larger_one_is_padded_to_it(tmp_path):
    """The step seen on llama.cpp here (a 63-token forward costs twice a 64-token one): once both
    sizes are measured, the next runtime runs the smaller size as the larger; sizes never measured,
    or cheaper than every larger one, run as they are."""
    cost = CostModel(tmp_path / "cost.json")
    for _ in range(3):  # each size measured three times: padding is then trusted
        cost.observe(1, 0.040)
        cost.observe(20, 0.300)
        cost.observe(48, 0.900)
        cost.observe(64, 0.600)
    cost.plan_padding(512)
    assert cost.padded(48) == 64 and cost.padded(55) == 64  # 48..55 share a bin
    assert cost.padded(20) == 20 and cost.padded(40) == 40 and cost.padded(64) == 64 and cost.padded(1) == 1
    cost.save()
    again = CostModel(tmp_path / "cost.json")
    assert again.padded(48) == 48  # decided only when a runtime plans, from the table it starts with
    again.plan_padding(60)
    assert again.padded(48) == 48  # 64 is past what this runtime forwards at once
    again.plan_padding(512)
    assert again.padded(48) == 64
    monotone = CostModel.fixed({8: 4.0, 48: 20.0, 64: 25.0})
    monotone.plan_padding(512)
    assert all(monotone.padded(n) == n for n in range(1, 513))


def test_best_draft_size_weighs_gain_against_cost():
    assert expected_accepted(0.5, 2) == pytest.approx(1.0)
    dear = CostModel.fixed(DEAR).ratio
    cheap = CostModel.fixed(CHEAP).ratio
    assert best_draft_size(0.99, 200, dear) == 0
    assert best_draft_size(0.5, 200, cheap) == 200
    # A compute-bound backend (s(N) ~ 1 + 0.5 (N - 1), each drafted token half a step): drafts pay
    # once more than half of the drafted tokens are accepted, and then the longer the better.
    bound = CostModel.fixed({2: 1.5, 256: 128.5}).ratio
    assert best_draft_size(0.3, 64, bound) == 0
    assert best_draft_size(0.8, 64, bound) == 64
    # A memory-bound backend (s(N) concave: a token's cost falls with the size): even a poor
    # acceptance pays for a long draft, a very poor one for none.
    concave = CostModel.fixed({2: 1.3, 8: 2.0, 64: 4.0, 256: 12.0}).ratio
    assert best_draft_size(0.02, 256, concave) == 0
    assert best_draft_size(0.1, 256, concave) == 256


def test_a_withheld_draft_is_scored_against_what_the_model_wrote():
    source = list(range(100))
    drafter = InputDrafter(source, cost=CostModel.fixed({2: 1.6, 4: 2.6, 256: 128.0}))
    drafter.policy.proposed = 20.0  # nothing accepted of 20 drafted tokens so far: drafting does not pay
    assert drafter.propose([3, 4], 32) == [] and drafter.shadow is not None
    context = [3, 4]
    for _ in range(40):  # the model copies the source token by token: every withheld draft was right
        context.append(context[-1] + 1)
        draft = drafter.propose(context, 32)
        if draft:
            break
    assert draft and draft[0] == context[-1] + 1, "confirmed shadow drafts should make drafting pay again"


def test_program_drafter_drafts_nothing_where_no_draft_pays():
    lines = [[1, 2], [3, 4], [5, 6], [7, 8]]
    state = ProgramState(0, "", "<", False, "", ())
    assert ProgramDrafter(lines, cost=CostModel.fixed(DEAR)).propose(state, 50) == []
    assert ProgramDrafter(lines, cost=CostModel.fixed(CHEAP)).propose(state, 50) != []


@pytest.mark.model
@pytest.mark.parametrize("table", [DEAR, CHEAP], ids=["dear", "cheap"])
def test_outputs_do_not_depend_on_the_cost(default_engine: Engine, table: dict[int, float]):
    runtimes = {id(m.runtime): m.runtime for m in (default_engine.loaded, default_engine.selector_model) if m}
    learned = {key: runtime.cost for key, runtime in runtimes.items()}
    try:
        for runtime in runtimes.values():
            runtime.cost = CostModel.fixed(table)
        ar = default_engine.edit(EditRequest(BUGGY, "Fix the bug in add.", mode="ar", max_new_tokens=64))
        spec = default_engine.edit(EditRequest(BUGGY, "Fix the bug in add.", mode="speculative", max_new_tokens=64))
        assert spec.output_text == ar.output_text
        programs = [default_engine.edit(EditRequest(BUGGY, "Fix the bug in add.", mode="program", max_new_tokens=64,
                                                    draft=draft)) for draft in (False, True)]
        assert programs[1].raw_output == programs[0].raw_output
        if table is DEAR:
            assert spec.breakdown.get("verify_calls", 0) == 0 and programs[1].breakdown["drafted_tokens"] == 0
        else:
            assert spec.breakdown.get("verify_calls", 0) >= 1 and programs[1].breakdown["drafted_tokens"] > 0
    finally:
        for key, runtime in runtimes.items():
            runtime.cost = learned[key]


def test_the_verify_rule_bounds_drafts_only_under_exact():
    """A backend whose multi-row forwards equal one-token steps up to N rows (llama.cpp's CPU
    build: engine.runtime.backends.llamacpp.exact_rows) bounds drafts to N - 1 tokens under
    "exact"; "argmax" drafts as long as the caller allows; "auto" is the backend's default."""
    from engine.runtime.session import Session

    session = Session()
    assert session.draft_room(40, "exact") == session.draft_room(40, "argmax") == 40  # no bound known
    session.step_exact_rows = 1
    assert session.draft_room(40, "exact") == 0 and session.draft_room(40, "argmax") == 40
    session.step_exact_rows = 64
    assert session.draft_room(40, "exact") == 40 and session.draft_room(100, "exact") == 63
    session.default_verify = "argmax"
    assert session.draft_room(100, "auto") == 100
    with pytest.raises(ValueError, match="verify"):
        session.draft_room(5, "fast")
    with pytest.raises(EditError, match="verify"):
        EditRequest("x = 1\n", "Fix it.", verify="fast").validate()  # type: ignore[arg-type]
