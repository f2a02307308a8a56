"""Where the structure-aware apply leaves a choice (a rename or a new function beside the old;
which of two alike functions a rename replaces), who picks the reading the update meant: the
fixed rule or the embedded model (engine.apply.choice), each against the truth. The model's arms
are its measures of a region (engine.apply.choice.Measure), with the instruction (and the sum
also without).

What a decision costs, each case side by side in one run, every timed call after the kept prompts
are dropped (engine.api.Engine.forget_prompts): one forward of the instructed prompt (the window:
file, update, instruction), the decision by the shipped measure (engine.apply.choice.MEASURE: the
instruction read after each region, the regions read once) and by what the instruction adds read
the other way (``instruction``: each region read after the prompt with the instruction and after
the one without, what they share read once); each decision's time as a ratio to the window's
forward, and the tokens each forwarded.

Cases are written here, from code disjoint from training: each base file has a function the
update shows under a new name; the truth is a rename in one case and a new function in its twin
(the update is the same; the instruction says which). The model is scored with the instruction
and without it (the update alone). Usage:

    PYTHONPATH=. OMP_NUM_THREADS=1 python scripts/measure_apply_choices.py \\
        --backend transformers --out results/apply/choices.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from engine.apply.choice import MEASURE, by_model, by_rule, candidates, model_scorer, reading_prompts

ARMS = [("sum", "sum", True), ("sum_no_instruction", "sum", False), ("mean", "mean", True), ("pmi", "pmi", True),
        ("instruction", "instruction", True), ("explains", "explains", True)]  # (the instruction's measure without one: the rule)

INVENTORY = '''import json


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
'''
INVENTORY_UPDATE = '''# ... existing code ...


def understocked(items, limit):
    out = []
    for item in items:
        if item["qty"] <= limit:
            out.append(item)
    return out


# ... existing code ...
'''
TWINS = INVENTORY.replace('def total(items):\n    return sum(item["qty"] for item in items)\n',
                          'def overstocked(items, limit):\n    out = []\n    for item in items:\n'
                          '        if item["qty"] > limit:\n            out.append(item)\n    return out\n')
USERS = '''class Store:
    def __init__(self, db):
        self.db = db

    def get_user(self, user_id):
        row = self.db.query("SELECT * FROM users WHERE id = ?", user_id)
        if row is None:
            raise KeyError(user_id)
        return dict(row)

    def get_admin(self, user_id):
        row = self.db.query("SELECT * FROM admins WHERE id = ?", user_id)
        if row is None:
            raise KeyError(user_id)
        return dict(row)

    def close(self):
        self.db.close()
'''
USERS_UPDATE = '''class Store:
    # ... existing code ...

    def fetch_user(self, user_id):
        row = self.db.query("SELECT * FROM users WHERE id = ? AND active = 1", user_id)
        if row is None:
            raise KeyError(user_id)
        return dict(row)

    # ... existing code ...
'''
DATES = '''const pad = (n) => String(n).padStart(2, "0");

function formatDate(d) {
  const y = d.getFullYear();
  const m = pad(d.getMonth() + 1);
  const day = pad(d.getDate());
  return `${y}-${m}-${day}`;
}

function formatTime(d) {
  return `${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

module.exports = { formatDate, formatTime };
'''
DATES_UPDATE = '''// ... existing code ...

function formatDay(d) {
  const y = d.getFullYear();
  const m = pad(d.getMonth() + 1);
  const day = pad(d.getDate());
  return `${day}/${m}/${y}`;
}

// ... existing code ...
'''
COUNTS = '''import java.util.List;

public class Stats {
    public int countActive(List<User> users) {
        int n = 0;
        for (User u : users) {
            if (u.isActive()) {
                n++;
            }
        }
        return n;
    }

    public int countAdmins(List<User> users) {
        int n = 0;
        for (User u : users) {
            if (u.isAdmin()) {
                n++;
            }
        }
        return n;
    }
}
'''
COUNTS_UPDATE = '''public class Stats {
    // ... existing code ...

    public int countEnabled(List<User> users) {
        int n = 0;
        for (User u : users) {
            if (u.isActive() && !u.isLocked()) {
                n++;
            }
        }
        return n;
    }

    // ... existing code ...
}
'''
SIZES = '''package units

import "strconv"

func parseSize(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, err
	}
	return n * 1024, nil
}

func formatSize(n int) string {
	return strconv.Itoa(n/1024) + "K"
}
'''
SIZES_UPDATE = '''// ... existing code ...

func parseBytes(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, err
	}
	return n, nil
}

// ... existing code ...
'''

# A longer module: the window the model reads grows with the file, the regions do not.
ORDERS = '''"""Orders: totals, discounts and shipping for the shop's checkout."""

from dataclasses import dataclass, field
from decimal import Decimal

TAX_RATE = Decimal("0.2")
FREE_SHIPPING_OVER = Decimal("50")


@dataclass
class Line:
    sku: str
    price: Decimal
    qty: int = 1


@dataclass
class Order:
    lines: list = field(default_factory=list)
    coupon: str | None = None
    country: str = "GB"


def subtotal(order):
    return sum((line.price * line.qty for line in order.lines), Decimal("0"))


def item_count(order):
    return sum(line.qty for line in order.lines)


def discount(order):
    if order.coupon == "TENOFF":
        return min(Decimal("10"), subtotal(order))
    if order.coupon == "HALF":
        return subtotal(order) / 2
    return Decimal("0")


def shipping(order):
    if subtotal(order) - discount(order) >= FREE_SHIPPING_OVER:
        return Decimal("0")
    if order.country == "GB":
        return Decimal("3.95")
    return Decimal("9.95")


def tax(order):
    return ((subtotal(order) - discount(order)) * TAX_RATE).quantize(Decimal("0.01"))


def total(order):
    return subtotal(order) - discount(order) + shipping(order) + tax(order)


def heavy_lines(order, limit):
    out = []
    for line in order.lines:
        if line.qty > limit:
            out.append(line)
    return out


def skus(order):
    return sorted({line.sku for line in order.lines})


def merge(first, second):
    merged = Order(lines=list(first.lines), coupon=first.coupon or second.coupon, country=first.country)
    for line in second.lines:
        merged.lines.append(line)
    return merged


def receipt(order):
    rows = [f"{line.sku:<12}{line.qty:>4} x {line.price:>8}" for line in order.lines]
    rows.append(f"{'subtotal':<20}{subtotal(order):>8}")
    rows.append(f"{'discount':<20}{-discount(order):>8}")
    rows.append(f"{'shipping':<20}{shipping(order):>8}")
    rows.append(f"{'tax':<20}{tax(order):>8}")
    rows.append(f"{'total':<20}{total(order):>8}")
    return "\\n".join(rows)
'''
ORDERS_UPDATE = '''# ... existing code ...


def bulk_lines(order, limit):
    out = []
    for line in order.lines:
        if line.qty >= limit:
            out.append(line)
    return out


# ... existing code ...
'''

# (name, language, file, update, old name, new name, what the new function does)
BASES = [
    ("inventory", "python", INVENTORY, INVENTORY_UPDATE, "low_stock", "understocked", "includes items at the limit"),
    ("twins", "python", TWINS, INVENTORY_UPDATE, "low_stock", "understocked", "includes items at the limit"),
    ("users", "python", USERS, USERS_UPDATE, "get_user", "fetch_user", "returns active users only"),
    ("dates", "javascript", DATES, DATES_UPDATE, "formatDate", "formatDay", "writes day/month/year"),
    ("counts", "java", COUNTS, COUNTS_UPDATE, "countActive", "countEnabled", "leaves locked users out"),
    ("sizes", "go", SIZES, SIZES_UPDATE, "parseSize", "parseBytes", "reads plain bytes"),
    ("orders", "python", ORDERS, ORDERS_UPDATE, "heavy_lines", "bulk_lines", "includes lines at the limit"),
]


def cases() -> list[dict]:
    """Each base twice: the truth a rename (the instruction says rename) and a new function."""
    out = []
    for name, language, file, update, old, new, does in BASES:
        out.append({"case": f"{name}/rename", "language": language, "file": file, "update": update,
                    "instruction": f"Rename {old} to {new}; it now {does}.", "truth": f"rename {old} -> {new}"})
        out.append({"case": f"{name}/new", "language": language, "file": file, "update": update,
                    "instruction": f"Add {new} beside {old}: like it, but it {does}. Keep {old}.",
                    "truth": f"new function {new}"})
    return out


REPEATS = 2  # each timed call, alternated; the fastest counts (the machine is shared and noisy)


def timed(engine, work) -> tuple[float, int, object]:
    """Seconds and tokens forwarded by ``work()`` run as a first call (kept prompts dropped), and its value."""
    engine.forget_prompts()
    with engine.loaded.runtime.meter() as log:
        started = time.perf_counter()
        value = work()
        seconds = time.perf_counter() - started
    return seconds, sum(log.sizes()), value


def costs(engine, case: dict, file: list[str], update: list[str], texts: list[str]) -> dict:
    """The window's forward and a decision by each timed measure (module docstring), side by side."""
    loaded = engine.loaded
    prompt = reading_prompts(loaded, case["instruction"], file, update, texts)[0][0]

    def window() -> None:
        session = loaded.session()
        try:
            session.append(prompt, "window")
        finally:
            session.close()

    arms = {"window": window}
    for measure in TIMED:
        scorer = model_scorer(loaded, measure)
        arms[measure] = lambda scorer=scorer: scorer(case["instruction"], file, update, texts)
    best: dict[str, tuple[float, int, object]] = {}
    for _ in range(REPEATS):
        for arm, work in arms.items():
            got = timed(engine, work)
            if arm not in best or got[0] < best[arm][0]:
                best[arm] = got
    w = best["window"][0]
    return {"window_tokens": len(prompt), "window_s": round(w, 3),
            **{f"{arm}_s": round(best[arm][0], 3) for arm in TIMED},
            **{f"{arm}_ratio": round(best[arm][0] / w, 2) for arm in TIMED},
            **{f"{arm}_forwarded_tokens": best[arm][1] for arm in TIMED}}


TIMED = (MEASURE, "instruction")  # the shipped measure and the other reading of what the instruction adds


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", default="transformers")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    from engine.api import Engine

    engine = Engine.load("default", backend=args.backend)
    scorers = {m: model_scorer(engine.loaded, m) for m in ("sum", "mean", "pmi", "instruction", "explains")}
    rows = []
    for case in cases():
        file, update = case["file"].splitlines(keepends=True), case["update"].splitlines(keepends=True)
        found = candidates(file, update, case["language"])
        if found is None:
            rows.append({"case": case["case"], "choice": None})
            continue
        choice, merges = found
        _, rule = by_rule(choice, merges)
        row = {"case": case["case"], "language": case["language"], "truth": case["truth"],
               "readings": [m.reading for m in merges], "rule": rule.chosen}
        for arm, measure, instructed in ARMS:
            instruction = case["instruction"] if instructed else ""
            started = time.perf_counter()
            _, decision = by_model(scorers[measure], instruction, file, update, merges)
            row[arm] = decision.chosen
            row[f"{arm}_scores"] = [round(s, 2) for s in decision.scores]
            row[f"{arm}_s"] = round(time.perf_counter() - started, 3)
        row["cost"] = costs(engine, case, file, update, [m.text for m in merges])
        rows.append(row)
        print(json.dumps(row), flush=True)
    decided = [r for r in rows if r.get("readings")]
    summary = {arm: {"right": sum(r[arm] == r["truth"] for r in decided),
                     "wrong": sum(r[arm] is not None and r[arm] != r["truth"] for r in decided),
                     "refused": sum(r[arm] is None for r in decided)}
               for arm in ("rule", *(a for a, _, _ in ARMS))}
    timed_rows = [r["cost"] for r in decided]
    summary["cost"] = {f"{arm}_ratio_{stat}": round(f(r[f"{arm}_ratio"] for r in timed_rows), 2)
                       for arm in TIMED for stat, f in (("min", min), ("max", max))}
    for arm in TIMED:
        summary["cost"][f"{arm}_ratio_median"] = sorted(r[f"{arm}_ratio"] for r in timed_rows)[len(timed_rows) // 2]
    summary["cost"]["shipped"] = MEASURE
    summary["cases"] = len(rows)
    summary["with_a_choice"] = len(decided)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"command": "PYTHONPATH=. OMP_NUM_THREADS=1 python scripts/measure_apply_choices.py "
                                    f"--backend {args.backend} --out {args.out}",
                                    "model": engine.name, "backend": args.backend, "summary": summary,
                                    "cases": rows}, indent=1) + "\n")
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
