"""The default llama.cpp thread count (``threads`` 0: chosen at load by measurement) against each
fixed count, on the editor-session benchmark, idle and beside one competing process.

Per condition (``idle``; ``busy``: a Python loop spinning on one core for the whole run) it runs
``scripts/measure_editor_session.py`` once per thread count (0, then 1 up to the CPUs, the order
rotated between conditions), sums the time of its three AI fixes (first fix, the same fix again,
cursor moved 30 lines), and asks ``copy-as-decode doctor --json`` what the default chose under
the same condition. It prints and records the default's total over the best fixed count's (the
target: within 10%)::

    OMP_NUM_THREADS=1 .venv/bin/python scripts/compare_thread_counts.py --json results/threads/editor_session.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SESSION = ROOT / "scripts" / "measure_editor_session.py"
FIXES = ("first fix", "same fix again", "cursor moved 30 lines")
SPIN = "while True: pass"


def session_total(threads: int) -> tuple[float, dict[str, float]]:
    """The editor session's three fixes at ``threads`` (0: the default), seconds in all and each."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "session.json"
        subprocess.run([sys.executable, str(SESSION), "--backend", "llamacpp", "--threads", str(threads),
                        "--json", str(out)], check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
        runs = json.loads(out.read_text(encoding="utf-8"))["runs"]
    each = {name: runs[name]["total_s"] for name in FIXES}
    return round(sum(each.values()), 3), each


def default_choice() -> dict[str, Any]:
    """What ``doctor`` says the default thread count is here, now."""
    answer = subprocess.run([sys.executable, "-m", "engine.cli", "doctor", "--backend", "llamacpp", "--json"],
                            cwd=ROOT, capture_output=True, text=True)
    return json.loads(answer.stdout)["lines"]["threads"]


def condition(name: str, counts: list[int]) -> dict[str, Any]:
    spinner = subprocess.Popen([sys.executable, "-c", SPIN]) if name == "busy" else None
    try:
        time.sleep(2)
        chosen = default_choice()
        totals = {}
        for threads in counts:
            total, each = session_total(threads)
            totals[str(threads)] = {"total_s": total, "fixes": each}
            print(f"{name}: threads {threads or 'default'}: {total:.2f} s {each}", file=sys.stderr)
    finally:
        if spinner is not None:
            spinner.kill()
    fixed = {k: v["total_s"] for k, v in totals.items() if k != "0"}
    best = min(fixed, key=fixed.__getitem__)
    return {"default_chose": chosen, "runs": totals, "best_fixed": int(best),
            "default_over_best_fixed": round(totals["0"]["total_s"] / fixed[best], 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    cpus = len(os.sched_getaffinity(0))
    counts = [0, *range(1, cpus + 1)]
    report: dict[str, Any] = {"command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]), "cpus": cpus,
                              "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                              "load_average_at_start": list(os.getloadavg())}
    report["idle"] = condition("idle", counts)
    report["busy"] = condition("busy", list(reversed(counts)))
    print(json.dumps({k: (v if not isinstance(v, dict) else {"best_fixed": v["best_fixed"],
                                                           "default_over_best_fixed": v["default_over_best_fixed"],
                                                           "default_chose": v["default_chose"]})
                      for k, v in report.items()}, indent=1))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
