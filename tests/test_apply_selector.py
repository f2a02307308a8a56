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
