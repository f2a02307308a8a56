"""A headless edit's whole cost: the CLI's wall time against the edit time it prints, per arm.

Each arm is a source tree (its ``engine`` is imported: ``PYTHONPATH``) and a ``--mode``; each case
a file and its ``edit`` flags (``own-model``: the embedded GGUF without its span selector, as a
user's own GGUF runs). The runs alternate over the arms, ``--rounds`` times per case, each
a fresh ``python -m engine.cli edit FILE ... --json`` process (one warm-up run per arm and case
first, untimed: the second-run figure is what a user gets from the second edit on). Reported
per case and arm: the medians of the wall time, the printed edit time (``timings.total_s``) and
their difference (``start``: imports, model load, tables), the process's CPU seconds (user and
system: on a loaded machine closer than the wall time to what an idle one takes), the ratio
of each arm's median wall time to the first arm's (``x first``: above 1 is slower), and whether
every run's output (its program of line ops, token counts, stop) is the first arm's first run's
(``same output as first``).

    nice -n 5 env OMP_NUM_THREADS=1 .venv/bin/python scripts/measure_cli_startup.py \\
        --arm before=/path/to/old/checkout:auto --arm after=.:auto --rounds 5 \\
        --json results/startup/readme_first_edit.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# name: (file name, text or None for the example of that name, edit flags)
CASES: dict[str, tuple[str, str | None, list[str]]] = {
    "readme-first-edit": ("buggy_add.py", None, ["--instruction", "Fix the bug in add.", "--focus", "3"]),
    "add-2-lines": ("add.py", "def add(a, b):\n    return a - b\n", ["--instruction", "Fix the bug in add."]),
    "isEven-js": ("even.js", "const isEven = (n) => n % 2 === 1;\n", ["--instruction", "Fix the bug in isEven."]),
    "inc-1-line": ("inc.py", "def inc(x): return x - 1\n", ["--instruction", "Fix the bug in inc."]),
    # a user's own GGUF (no span selector: auto runs speculative), with the embedded one standing in
    "own-model": ("buggy_add.py", None, ["--instruction", "Fix the bug", "--focus", "3", "--backend", "llamacpp",
                                         "--selector", "none"]),
}


def run_once(tree: Path, mode: str, path: Path, flags: list[str]) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(tree), OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
    command = [sys.executable, "-m", "engine.cli", "edit", str(path), *flags, "--json"]
    if mode != "auto":
        command += ["--mode", mode]
    start, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True, timeout=600)
    wall, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode not in (0, 8):
        raise SystemExit(f"{' '.join(command)} exited {done.returncode}:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout)
    edit = result["timings"]["total_s"]
    return {"wall_s": wall, "cpu_s": cpu, "edit_s": edit, "start_s": wall - edit, "mode": result["mode"],
            "output_changed": result["changed"], "program": result.get("program"),
            "output": [result.get("program"), result["tokens"], result["stop_reason"]]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arm", action="append", required=True,
                        help="LABEL=TREE:MODE (TREE: a checkout whose engine runs; MODE: auto, program, ar, ...)")
    parser.add_argument("--case", action="append", choices=sorted(CASES), help="default: all")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    arms = []
    for spec in args.arm:
        label, _, rest = spec.partition("=")
        tree, _, mode = rest.rpartition(":")
        arms.append((label, Path(tree).resolve(), mode or "auto"))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for case in args.case or list(CASES):
            name, text, flags = CASES[case]
            path = Path(tmp) / name
            path.write_text(text if text is not None else (ROOT / "examples" / name).read_text())
            runs: dict[str, list[dict[str, Any]]] = {label: [] for label, _, _ in arms}
            for _label, tree, mode in arms:  # warm-up: the caches a second run finds
                run_once(tree, mode, path, flags)
            for _ in range(args.rounds):
                for label, tree, mode in arms:
                    runs[label].append(run_once(tree, mode, path, flags))
            med = {label: {k: round(statistics.median(r[k] for r in rs), 3) for k in ("wall_s", "cpu_s", "edit_s", "start_s")}
                   for label, rs in runs.items()}
            first = med[arms[0][0]]["wall_s"]
            for label in med:
                med[label]["x_first"] = round(med[label]["wall_s"] / first, 3)
                med[label]["mode"] = runs[label][0]["mode"]
                med[label]["program"] = runs[label][0]["program"]
                med[label]["same_output_as_first"] = all(r["output"] == runs[arms[0][0]][0]["output"]
                                                         for r in runs[label])
            rows.append({"case": case, "arms": med, "runs": runs})
            print(case, json.dumps({k: {m: v[m] for m in ("wall_s", "cpu_s", "edit_s", "start_s", "x_first", "mode")}
                                    for k, v in med.items()}), flush=True)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"command": " ".join(sys.argv), "rounds": args.rounds,
                                         "arms": [{"label": a, "tree": str(t), "mode": m} for a, t, m in arms],
                                         "load_average": os.getloadavg(), "cases": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
