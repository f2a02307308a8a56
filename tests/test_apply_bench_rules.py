"""The rules' arms of ``bench apply`` (no model): shape cases from sources, the columns (exact,
whitespace only, wrong and written, refused), and the command's record."""

from __future__ import annotations

import json
import random
from pathlib import Path

from engine.bench.apply_rules import rule_row, summarize_rules, whitespace_only
from engine.bench.apply_shapes import SHAPES, Source, make_shape_case
from engine.cli import main
from engine.training.apply.updates import ApplyCase

PY = '''import os


class Store:
    def add(self, item):
        self.items.append(item)
        self.count = len(self.items)
        return self

    def total(self):
        n = len(self.items)
        self.last = n
        return n


def outer(x):
    def inner(y):
        z = y + 1
        w = z * 2
        return w

    r = inner(x)
    return r


def low_stock(items, limit):
    out = [i for i in items if i.count < limit]
    out.sort()
    return out
''' + "\n".join(f"# filler {k}" for k in range(20)) + "\n"


def test_every_shape_gives_a_case_whose_gold_differs() -> None:
    source = Source("inline/store.py", PY)
    for shape in SHAPES:
        case = make_shape_case(source, "python", shape, random.Random(0))
        assert case is not None, shape
        assert case.gold != case.file and case.style == shape and case.update.strip()


def test_columns() -> None:
    assert whitespace_only("a\n\nb\n", "a\nb\n") and not whitespace_only("a\nb\n", "a\nc\n")
    case = make_shape_case(Source("inline/store.py", PY), "python", "whole-function", random.Random(0))
    assert case is not None
    rows = [rule_row("lines", case), rule_row("structure", case)]
    assert rows[1]["exact"] and not rows[1]["wrong"]
    wrong = ApplyCase("broken", "python", "whole-function", 40, PY, "def low_stock(items, limit):\n    return 1\n",
                      PY.replace("out.sort()", "out.sort(reverse=True)"))
    row = rule_row("structure", wrong)
    assert row["wrong"] and not row["exact"] and not row["refused"]
    nowhere = ApplyCase("nowhere", "python", "rename", 40, PY, "# ...\ndef zzz():\n    totally()\n# ...\n", PY)
    assert rule_row("structure", nowhere)["refused"]
    summary = summarize_rules([*rows, row])
    assert summary["structure"]["exact"] == 1 and summary["structure"]["wrong"] == 1
    assert summary["structure"]["by_style"]["whole-function"]["n"] == 2


def test_bench_apply_rule_arms_write_their_record(capsys, tmp_path: Path) -> None:
    out = tmp_path / "rules.json"
    code = main(["bench", "apply", "--arms", "lines,structure", "--per-style", "1", "--json", str(out)])
    assert code == 0
    data = json.loads(out.read_text())
    assert set(data["summary"]) == {"lines", "structure"} and data["cases"] == 7
    assert data["command"] and data["sources"]["python"] > 0
    assert {"exact", "whitespace", "wrong", "refused", "p95_ms"} <= set(data["summary"]["structure"])
