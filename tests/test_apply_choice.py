"""Where the structure-aware merge leaves a choice (a rename or a new function; which of two alike
functions a rename replaces): the candidates are exposed, the loaded model picks one and the
result names who chose and the alternative; an apply without a choice loads no model."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from engine.apply.choice import by_rule, candidates, differing_region
from engine.api import Engine
from engine.apply.job import AlignedUpdate
from engine.cli import main
from engine.decoding.request import EditRequest
from engine.runtime.sources import default_gguf_path

FILE = """import json


def load(path):
    with open(path) as f:
        return json.load(f)


def low_stock(items, limit):
    out = []
    for item in items:
        if item["qty"] < limit:
            out.append(item)
    return out


def total(items):
    return sum(item["qty"] for item in items)
"""
UPDATE = """# ... existing code ...


def understocked(items, limit):
    out = []
    for item in items:
        if item["qty"] <= limit:
            out.append(item)
    return out


# ... existing code ...
"""
# Two functions alike enough that a new name's body could rename either as well.
TWINS = FILE.replace("def total(items):\n    return sum(item[\"qty\"] for item in items)\n",
                     "def overstocked(items, limit):\n    out = []\n    for item in items:\n"
                     "        if item[\"qty\"] > limit:\n            out.append(item)\n    return out\n")
PLAIN = "# ... existing code ...\ndef total(items):\n    return sum(item[\"qty\"] for item in items) or 0\n"


def own(engine: Engine) -> Engine:
    """The embedded model's engine posing as a user's own (its model decides choices), sharing its
    models and its lock."""
    return replace(engine, chooses=True)


def lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def test_a_rename_is_a_choice_with_a_new_function_beside_the_old_as_the_alternative() -> None:
    found = candidates(lines(FILE), lines(UPDATE), "python")
    assert found is not None
    choice, merges = found
    assert choice.readings == ("rename low_stock -> understocked", "new function understocked") and choice.rule == 0
    renamed, new = merges
    assert "def low_stock" not in renamed.text and "def understocked" in renamed.text
    assert new.text.index("def low_stock") < new.text.index("def understocked") < new.text.index("def total")
    assert "\n\n\ndef understocked" in new.text  # spaced as the file spaces its functions


def test_two_functions_as_alike_are_each_a_reading_the_rule_picks_by_name() -> None:
    found = candidates(lines(TWINS), lines(UPDATE), "python")
    assert found is not None
    choice, merges = found
    assert choice.rule == 0 and choice.readings == (
        "rename overstocked -> understocked", "rename low_stock -> understocked", "new function understocked")
    assert len({m.text for m in merges}) == 3
    index, decision = by_rule(choice, merges)
    assert index == 0 and decision.alternatives == choice.readings[1:]


def test_two_functions_alike_in_everything_are_a_choice_the_rule_leaves_unplaced() -> None:
    file = FILE.replace("low_stock", "low_a") + FILE[FILE.index("def low_stock"):FILE.index("def total")].replace(
        "low_stock", "low_b")
    update = UPDATE.replace("understocked", "low_c")
    found = candidates(lines(file), lines(update), "python")
    assert found is not None
    choice, merges = found
    assert choice.rule is None and choice.readings == ("rename low_a -> low_c", "rename low_b -> low_c",
                                                       "new function low_c")
    index, decision = by_rule(choice, merges)
    assert index is None and decision.chosen is None and decision.by == "rule"
    merge = AlignedUpdate(EditRequest(text=file, instruction="", update=update, language="python"))
    assert merge.stop == "unplaced" and merge.decision is not None and merge.decision.by == "rule"


def test_an_update_without_a_choice_has_no_candidates() -> None:
    assert candidates(lines(FILE), lines(PLAIN), "python") is None


def test_the_region_scored_is_where_the_candidates_differ_with_context() -> None:
    a = "".join(f"{k}\n" for k in range(20))
    b = a.replace("10\n", "10\nnew\n")
    start, regions = differing_region([a, b], context=2)
    assert start == 9 and regions == [["9\n", "10\n", "11\n", "12\n"], ["9\n", "10\n", "new\n", "11\n", "12\n"]]


def run(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        code = main(["apply", *argv])
    except SystemExit as exc:
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, " ".join(captured.err.split())


@pytest.fixture()
def paths(tmp_path: Path) -> tuple[Path, Path, Path]:
    target, update, plain = tmp_path / "inv.py", tmp_path / "u.py", tmp_path / "plain.py"
    target.write_text(FILE)
    update.write_text(UPDATE)
    plain.write_text(PLAIN)
    return target, update, plain


def test_an_apply_without_a_choice_loads_no_model(capsys, paths, tmp_path) -> None:
    target, _, plain = paths
    missing = str(tmp_path / "no-model-here")  # loading it would fail: the apply must not try
    code, out, err = run(capsys, str(target), "--update", str(plain), "--model", missing, "--json", "--in-place")
    assert code == 0 and "no such file" not in err and "loading" not in err
    assert "choice" not in json.loads(out)["breakdown"] and "or 0\n" in target.read_text()


def test_without_a_model_the_rule_decides_and_says_so(capsys, paths, tmp_path) -> None:
    target, update, _ = paths
    missing = str(tmp_path / "no-model-here")
    code, out, err = run(capsys, str(target), "--update", str(update), "--model", missing, "--json", "--in-place")
    assert code == 0 and "the rule decides" in err
    choice = json.loads(out)["breakdown"]["choice"]
    assert choice == {"by": "rule", "chosen": "rename low_stock -> understocked",
                      "alternatives": ["new function understocked"], "scores": [],
                      "note": "the rule chose: rename low_stock -> understocked (the alternative: new function "
                              "understocked)"}
    assert "def low_stock" not in target.read_text()


def test_the_embedded_model_decides_a_choice_and_the_result_names_the_alternative(default_engine) -> None:
    found = candidates(lines(TWINS), lines(UPDATE), "python")
    assert found is not None
    texts = {m.reading: m.text for m in found[1]}
    request = EditRequest(text=TWINS, instruction="rename low_stock to understocked and include the limit",
                          update=UPDATE, language="python")
    result = own(default_engine).edit(request)
    choice = result.breakdown["choice"]
    assert choice["by"] == "model" and len(choice["scores"]) == 3
    assert {choice["chosen"], *choice["alternatives"]} == set(texts)
    assert result.stop_reason == "done" and result.output_text == texts[choice["chosen"]]
    assert any(w.startswith("the model chose: ") and choice["alternatives"][0] in w for w in result.warnings)
    assert max(choice["scores"]) == choice["scores"][list(texts).index(choice["chosen"])]


@pytest.mark.model
def test_the_cli_in_auto_loads_the_model_for_a_choice_and_names_it(capsys, paths) -> None:
    target, update, _ = paths
    own = str(default_gguf_path())  # the embedded GGUF named by its path: what a user's own model looks like
    code, out, err = run(capsys, str(target), "--update", str(update), "--json", "-i", "rename low_stock",
                         "--model", own)
    choice = json.loads(out)["breakdown"]["choice"]
    assert code == 0, err
    assert choice["by"] == "model" and len(choice["scores"]) == 2
    assert {choice["chosen"], *choice["alternatives"]} == {"rename low_stock -> understocked",
                                                          "new function understocked"}


def test_the_cli_in_auto_with_the_embedded_model_lets_the_rule_decide(capsys, paths) -> None:
    """The embedded model is no better than the rule at these choices, so ``auto`` does not load it."""
    target, update, _ = paths
    code, out, err = run(capsys, str(target), "--update", str(update), "--json", "-i", "rename low_stock")
    answer = json.loads(out)
    assert code == 0, err
    assert answer["breakdown"]["choice"]["by"] == "rule" and answer["mode"] == "aligner"


def test_without_an_instruction_the_model_cannot_tell_and_the_rule_decides(default_engine) -> None:
    request = EditRequest(text=FILE, instruction="", update=UPDATE, language="python")
    result = own(default_engine).edit(request)
    assert result.breakdown["choice"]["by"] == "rule" and "def low_stock" not in result.output_text


def test_the_embedded_models_engine_lets_the_rule_decide(default_engine) -> None:
    """The same request on the embedded model's engine: the rule decides, no model runs for it."""
    request = EditRequest(text=TWINS, instruction="rename low_stock to understocked", update=UPDATE,
                          language="python")
    assert not default_engine.chooses and default_engine.plan(request).model is None
    assert own(default_engine).plan(request).model is default_engine.loaded  # decided under the engine's lock
    assert default_engine.edit(request).breakdown["choice"]["by"] == "rule"


def test_an_own_models_engine_runs_an_apply_without_a_choice_as_no_model(default_engine) -> None:
    request = EditRequest(text=FILE, instruction="", update=PLAIN, language="python")
    assert own(default_engine).plan(request).model is None


def test_an_answer_loads_the_own_model_only_for_a_file_with_a_choice(capsys, tmp_path) -> None:
    """An answer naming files: no file with a choice loads no model; the first with one tries to
    (here it cannot: the rule decides, and that file's entry says so)."""
    (tmp_path / "inv.py").write_text(FILE)
    missing = str(tmp_path / "no-model-here")
    plain = tmp_path / "plain.md"
    plain.write_text(f"`inv.py`\n```python\n{PLAIN}```\n")
    code, out, err = run(capsys, "--update", str(plain), "--root", str(tmp_path), "--model", missing, "--json")
    assert code == 0 and "loading" not in err and "no such" not in err
    assert json.loads(out)["files"][0]["choice"] is None
    (tmp_path / "inv.py").write_text(FILE)
    chosen = tmp_path / "chosen.md"
    chosen.write_text(f"`inv.py`\n```python\n{UPDATE}```\n")
    code, out, err = run(capsys, "--update", str(chosen), "--root", str(tmp_path), "--model", missing, "--json")
    assert code == 0 and "the rule decides" in err
    assert json.loads(out)["files"][0]["choice"]["by"] == "rule" and "def low_stock" not in (tmp_path / "inv.py").read_text()


def test_a_cancel_while_the_model_decides_stops_the_apply_with_the_file_unchanged(default_engine) -> None:
    """The decision's forwards poll the request's cancel: the apply ends as cancelled, nothing merged."""
    polls = []

    def cancelled() -> bool:  # not yet when the engine starts the request; from the decision's first poll on
        polls.append(1)
        return len(polls) > 1

    request = EditRequest(text=TWINS, instruction="rename low_stock to understocked", update=UPDATE,
                          language="python")
    with default_engine.loaded.runtime.meter() as log:
        result = own(default_engine).edit(request, cancelled=cancelled)
    assert result.stop_reason == "cancelled" and result.output_text == TWINS
    assert log.sizes() == []  # stopped before the decision's first forward, not after it


def test_the_shared_reading_scores_as_each_prompt_and_region_read_alone(default_engine) -> None:
    """What the readings and the candidates share is read once; each score is still the region's
    likelihood after its own whole prompt, as a session that reads them alone computes it."""
    import torch

    from engine.apply.choice import reading_prompts, region_scores

    found = candidates(lines(TWINS), lines(UPDATE), "python")
    assert found is not None
    texts = [m.text for m in found[1]]
    instruction = "rename low_stock to understocked"
    loaded = default_engine.loaded
    shared = region_scores(loaded, instruction, lines(TWINS), lines(UPDATE), texts, "uninstructed")
    prompts, regions = reading_prompts(loaded, instruction, lines(TWINS), lines(UPDATE), texts, "uninstructed")
    for k, ids in enumerate(regions):
        alone = []
        for prompt in prompts:
            session = loaded.session()
            try:
                logits = session.append(prompt + ids[:-1], "test", rows=list(range(len(prompt) - 1, len(prompt) + len(ids) - 1)))
            finally:
                session.close()
            picked = torch.log_softmax(logits.float(), dim=-1).gather(1, torch.tensor(ids).unsqueeze(1))
            alone.append(float(picked.sum()))
        assert shared[k].total == pytest.approx(alone[0], abs=0.02) and shared[k].bare == pytest.approx(alone[1], abs=0.02)


def test_the_instruction_read_after_each_region_scores_as_each_read_alone(default_engine) -> None:
    """The shipped measure reads the window once and each region from where it parts from the one
    before, with the LM head on the instruction's rows alone; each score is still the instruction's
    likelihood after its own whole prompt and region, as a session that reads them alone computes it."""
    import torch

    from engine.apply.choice import INSTRUCTION_HEAD, explaining_scores, reading_prompts

    found = candidates(lines(TWINS), lines(UPDATE), "python")
    assert found is not None
    texts = [m.text for m in found[1]]
    instruction = "rename low_stock to understocked"
    loaded = default_engine.loaded
    shared = explaining_scores(loaded, instruction, lines(TWINS), lines(UPDATE), texts)
    prompts, regions = reading_prompts(loaded, "", lines(TWINS), lines(UPDATE), texts)
    head = loaded.tokenizer.encode(INSTRUCTION_HEAD, add_special_tokens=False)
    said = loaded.tokenizer.encode(" " + instruction, add_special_tokens=False)
    assert len(set(shared)) == len(texts)  # the regions tell the readings apart
    for k, ids in enumerate(regions):
        whole = prompts[0] + ids + head + said
        session = loaded.session()
        try:
            logits = session.append(whole[:-1], "test", rows=list(range(len(whole) - len(said) - 1, len(whole) - 1)))
        finally:
            session.close()
        alone = float(torch.log_softmax(logits.float(), dim=-1).gather(1, torch.tensor(said).unsqueeze(1)).sum())
        assert shared[k] == pytest.approx(alone, abs=0.02)
    assert explaining_scores(loaded, " ", lines(TWINS), lines(UPDATE), texts) == [0.0] * len(texts)
