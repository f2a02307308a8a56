"""The benchmark bars: a record's arms become a PNG with the whole edit beside the decode phase."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.bench.plot import plot_edits

RECORD = Path(__file__).resolve().parent.parent / "results/free/llamacpp-own-vs-selector_humanevalfix-python_20.json"


def test_a_records_bars_are_written_with_the_whole_edit(tmp_path, monkeypatch) -> None:
    pytest.importorskip("matplotlib")
    import matplotlib.axes

    data = json.loads(RECORD.read_text())
    labels: list[str] = []
    original = matplotlib.axes.Axes.bar

    def bar(self, *args, **kwargs):  # records each series' label, then draws it as matplotlib does
        labels.append(kwargs.get("label"))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(matplotlib.axes.Axes, "bar", bar)
    out = plot_edits(data, tmp_path / "bars.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert labels == ["pooled (sum ar / sum arm)", "median of per-case ratios", "whole edit, pooled"]


def test_a_record_without_whole_edit_times_has_no_such_bars(tmp_path, monkeypatch) -> None:
    pytest.importorskip("matplotlib")
    import matplotlib.axes

    data = json.loads(RECORD.read_text())
    for arm in data["arms"].values():
        arm.pop("edit_speedup_vs_ar", None)
    labels: list[str] = []
    original = matplotlib.axes.Axes.bar
    monkeypatch.setattr(matplotlib.axes.Axes, "bar",
                        lambda self, *a, **k: labels.append(k.get("label")) or original(self, *a, **k))
    plot_edits(data, tmp_path / "bars.png")
    assert "whole edit, pooled" not in labels
