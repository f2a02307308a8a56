"""Is ``--verify argmax`` within the run-to-run noise of an exact decode? Reads ``bench edits`` runs
of the same corpus (arms ``ar`` and ``speculative``) and compares them case by case.

Each run is ``LABEL=PATH``; an arm of a run is named ``LABEL:ARM``. Two yardsticks of noise, both
between decodes that are all greedy decodes of the same model:
- ``--kernel-noise A B``: two exact decodes on different kernels (ar with one-row steps against ar
  with padded two-row steps: both are the model's greedy output, rounded differently);
- ``--rerun-noise A B``: the same arm run twice.
The candidate (``--candidate``, e.g. ``argmax:speculative``) is within noise of the reference
(``--reference``, e.g. ``argmax:ar``) when its difference in passes and in collateral lines is no
larger than the larger of the two yardsticks' differences.

    python scripts/compare_verify_runs.py --corpus humanevalfix-js \\
        argmax=results/verify/noise/humanevalfix-js-argmax.json ... \\
        --reference argmax:ar --candidate argmax:speculative \\
        --kernel-noise argmax:ar padded:ar --rerun-noise argmax:speculative argmax2:speculative
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any



def arm_cases(runs: dict[str, Any], name: str) -> dict[str, dict[str, Any]]:
    """Per case id, the arm's record in that run."""
    label, arm = name.split(":", 1)
    return {case["id"]: case["arms"][arm] for case in runs[label]["per_case"] if arm in case["arms"]}


def figures(runs: dict[str, Any], name: str, cases: set[str]) -> dict[str, Any]:
    """The arm's figures over ``cases`` (the cases every compared run ran, so that a shorter run
    compares with a whole-corpus one): passes, collateral lines, wrong-line and broken-syntax
    edits, the median whole-edit ratio against its own run's ar, and tokens copied."""
    label, _ = name.split(":", 1)
    mine, ar = arm_cases(runs, name), arm_cases(runs, f"{label}:ar")
    chosen = [c for c in sorted(cases) if c in mine]
    ratios = [ar[c]["edit_s"] / mine[c]["edit_s"] for c in chosen if c in ar and mine[c].get("edit_s")]
    return {"pass": sum(mine[c].get("test") == "pass" for c in chosen),
            "collateral_lines": sum(mine[c]["collateral"]["lines"] for c in chosen),
            "wrong_line": sum(bool(mine[c].get("wrong_line")) for c in chosen),
            "syntax_broken": sum(bool(mine[c].get("syntax_broken")) for c in chosen),
            "edit_speedup_vs_its_ar": round(statistics.median(ratios), 3) if ratios else None,
            "copied": sum(mine[c]["tokens"]["copied"] for c in chosen)}


def identical(runs: dict[str, Any], a: str, b: str, cases: set[str]) -> tuple[int, int]:
    """Cases where the two arms wrote the same output, of ``cases``."""
    left, right = arm_cases(runs, a), arm_cases(runs, b)
    common = sorted(set(left) & set(right) & cases)
    same = sum(left[c].get("output_sha256") == right[c].get("output_sha256") is not None for c in common)
    return same, len(common)


def difference(runs: dict[str, Any], a: str, b: str, cases: set[str]) -> dict[str, Any]:
    fa, fb = figures(runs, a, cases), figures(runs, b, cases)
    same, total = identical(runs, a, b, cases)
    return {"pair": [a, b], "identical_outputs": same, "cases": total,
            "pass_diff": abs(fa["pass"] - fb["pass"]),
            "collateral_diff": abs(fa["collateral_lines"] - fb["collateral_lines"])}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="LABEL=PATH of a bench edits JSON")
    parser.add_argument("--corpus", required=True)
    parser.add_argument("--reference", required=True)
    parser.add_argument("--candidate", required=True)
    parser.add_argument("--kernel-noise", nargs=2, metavar="ARM", required=True)
    parser.add_argument("--rerun-noise", nargs=2, metavar="ARM")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--allow-incomplete", action="store_true", help="read runs still going (a preview)")
    args = parser.parse_args(argv)
    runs: dict[str, Any] = {}
    for item in args.runs:
        label, path = item.split("=", 1)
        runs[label] = json.loads(Path(path).read_text(encoding="utf-8"))
        if runs[label]["corpus"] != args.corpus or not (runs[label].get("complete") or args.allow_incomplete):
            sys.exit(f"{path}: not a complete run of {args.corpus}")
    arms = [f"{label}:{arm}" for label in runs for arm in runs[label]["arms"]]
    cases = set.intersection(*(set(arm_cases(runs, arm)) for arm in arms))
    yardsticks = [difference(runs, *args.kernel_noise, cases)]
    if args.rerun_noise:
        yardsticks.append(difference(runs, *args.rerun_noise, cases))
    noise = {"pass": max(y["pass_diff"] for y in yardsticks),
             "collateral_lines": max(y["collateral_diff"] for y in yardsticks)}
    candidate = difference(runs, args.reference, args.candidate, cases)
    within = candidate["pass_diff"] <= noise["pass"] and candidate["collateral_diff"] <= noise["collateral_lines"]
    out = {"corpus": args.corpus, "command": "python scripts/compare_verify_runs.py " + " ".join(argv or sys.argv[1:]),
           "runs": {label: {"command": run["command"], "runtime": run["settings"].get("runtime"),
                            "verify": run["settings"].get("verify"), "cases": run["cases"]}
                    for label, run in runs.items()},
           "cases": len(cases),
           "arms": {arm: {**figures(runs, arm, cases), "identical_to_reference": identical(runs, args.reference, arm, cases)[0],
                          "identical_to_its_ar": identical(runs, arm.split(":")[0] + ":ar", arm, cases)[0]}
                    for arm in arms},
           "noise": {"yardsticks": yardsticks, **noise}, "candidate": candidate, "within_noise": within}
    print(f"{len(cases)} cases every run ran")
    print(f"| {args.corpus} | pass | collateral | wrong line | syntax broken | identical to {args.reference} "
          f"| identical to its run's ar | whole edit vs its run's ar | tokens copied |")
    print("|---|---|---|---|---|---|---|---|---|")
    for arm, f in out["arms"].items():
        print(f"| {arm} | {f['pass']} | {f['collateral_lines']} | {f['wrong_line']} | {f['syntax_broken']} "
              f"| {f['identical_to_reference']} | {f['identical_to_its_ar']} | {f['edit_speedup_vs_its_ar']}x | {f['copied']} |")
    for y in yardsticks:
        print(f"noise {y['pair'][0]} vs {y['pair'][1]}: {y['identical_outputs']}/{y['cases']} identical, "
              f"pass ±{y['pass_diff']}, collateral ±{y['collateral_diff']}")
    print(f"candidate {args.candidate} vs {args.reference}: {candidate['identical_outputs']}/{candidate['cases']} "
          f"identical, pass ±{candidate['pass_diff']}, collateral ±{candidate['collateral_diff']}: "
          f"{'within' if within else 'outside'} the noise (pass ±{noise['pass']}, collateral ±{noise['collateral_lines']})")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
