"""The example a new user tries first: examples/buggy_add.py, "Fix the bug in add.", program mode
with the shipped selector, the cursor on any of its three lines or none (the CLI without
``--focus``). Every time the one-line fix, with the docstring kept, on every in-process
backend installed."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.api import EditRequest, Engine
from engine.runtime.backends import BackendOptions, llamacpp_available

pytestmark = [pytest.mark.model]

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "buggy_add.py"
FIXED = 'def add(a, b):\n    """Return the sum of a and b."""\n    return a + b\n'


@pytest.fixture(scope="module", params=["transformers", "llamacpp"])
def engine(request: pytest.FixtureRequest, default_engine) -> Engine:
    if request.param == "transformers":
        return default_engine
    if not llamacpp_available():
        pytest.skip("llama-cpp-python is not installed (scripts/install-llamacpp.sh; make test installs it)")
    return Engine.load("default", backend="llamacpp", options=BackendOptions(threads=1, context_size=2048))


@pytest.mark.parametrize("focus", [None, 1, 2, 3])
def test_buggy_add_is_fixed_wherever_the_cursor_is(engine: Engine, focus: int | None) -> None:
    text = EXAMPLE.read_text()
    assert text == FIXED.replace("a + b", "a - b")  # the example still has its bug
    result = engine.edit(EditRequest(text, "Fix the bug in add.", mode="program", focus_line=focus,
                                     language="python", max_new_tokens=96))
    assert result.stop_reason == "done", result.raw_output
    assert result.output_text == FIXED, (focus, result.raw_output)
    assert engine.selector is not None  # the shipped selector ran, not the few-shot base model
