"""The apply selector: its training windows are recorded through the decoder as an apply runs
them, and the engine writes an apply's program with it (merged in at the first such apply)."""

from __future__ import annotations

import pytest

from engine.api import EditRequest
from engine.runtime.selector.adapter import SHIPPED_APPLY_ADAPTER_DIR
from engine.training.apply.record import case_examples
from engine.training.apply.updates import make_case
from engine.training.apply.sources import training_files
from engine.training.selector.dataset import IGNORE, recording_model

FILE = "def f(x):\n    return x + 1\n\n\ndef g(y):\n    return y\n"
UPDATE = "# ... existing code ...\ndef g(y):\n    return y * 2\n"


def test_a_case_records_one_sequence_per_window_with_the_programs_choices(default_engine) -> None:
    stand_in = recording_model(default_engine.loaded)
    case = next(c for seed in range(10) if (c := make_case(training_files("python"), "python", "several", 300, seed)))
    examples = case_examples(stand_in, case, margin=10)
    assert len(examples) >= 2  # several changes far apart: a window each
    for example in examples:
        chosen = [t for t in example.labels if t != IGNORE]
        assert 0 < len(chosen) < len(example.ids) // 4  # the prompt and the copies are never targets
        assert example.language == "python" and example.source == case.name


@pytest.mark.skipif(not (SHIPPED_APPLY_ADAPTER_DIR / "adapter_model.safetensors").is_file(),
                    reason="no apply selector shipped")
def test_an_apply_program_runs_on_the_apply_selector(default_engine) -> None:
    assert default_engine.apply_selector == SHIPPED_APPLY_ADAPTER_DIR
    request = EditRequest(FILE, "", update=UPDATE, mode="program")
    assert default_engine.model_for_request(request).selector == str(SHIPPED_APPLY_ADAPTER_DIR)
    edit = EditRequest(FILE, "fix", mode="program")
    assert default_engine.model_for_request(edit).selector != str(SHIPPED_APPLY_ADAPTER_DIR)
    result = default_engine.edit(request)
    assert result.stop_reason == "done"
    assert "existing code" not in result.output_text  # a marker is never copied (quality: bench apply)
    assert result.breakdown["windows"] == 1


@pytest.mark.model
def test_train_apply_selector_writes_an_adapter_the_engine_loads(tmp_path) -> None:
    """The command's path, data to card (two steps on three cases: the path, not quality), and the
    engine writing an apply's program with what it wrote."""
    import json

    from engine.api import Engine
    from engine.cli import main

    out = tmp_path / "apply-selector"
    code = main(["train-apply-selector", "--train", "3", "--steps", "2", "--warmup-steps", "1", "--threads", "1",
                 "--out", str(out), "--work-dir", str(tmp_path / "work")])
    assert code == 0
    assert json.loads((out / "selector.json").read_text())["job"] == "apply"
    info = json.loads((out / "training.json").read_text())
    assert info["data"]["cases"] == 3 and len(info["losses"]) == 2
    assert "## Data" in (out / "CARD.md").read_text() and (out / "loss.png").is_file()
    engine = Engine.load("default", backend="transformers")
    engine.apply_selector = out
    result = engine.edit(EditRequest(FILE, "", update=UPDATE, mode="program"))
    assert result.stop_reason == "done" and engine.model_for_request(
        EditRequest(FILE, "", update=UPDATE, mode="program")).selector == str(out)
