"""Replace or insert, measured: the line rules (and the structure-aware merge, which hands the
lines between definitions to them) on twin cases whose truth is an edited line or a new line
beside a similar one (engine.bench.line_choices), right / wrong and written / refused by the
similarity of the lines the rule pairs, and where the merge ``auto`` runs meets the line rules'
replace-or-insert choice, whether its other reading is the truth; then how often that choice is
met on the apply bench's own cases (how often a result names it). No model. Usage:

    PYTHONPATH=. OMP_NUM_THREADS=1 python scripts/measure_line_choices.py \\
        --per-language 20 --seed 0 --out results/apply/line_choices.json

With ``--model``, instead: the embedded model decides the line choice as if it could (the product
leaves it to the rule: Choice.model_decides; engine.apply.choice.decide, its shipped measure) against the rule on a seeded sample of one-sided twins balanced over truths
and similarity buckets (``--model-sample``), each with the instruction a user would write
(engine.bench.line_choices.said), and on the bench's own cases where the choice is met (they
carry no instruction: one is written from the change at the choice's lines, as a user would:
engine.bench.line_choices.bench_instruction). Usage:

    PYTHONPATH=. OMP_NUM_THREADS=1 python scripts/measure_line_choices.py --model \\
        --model-sample 60 --out results/apply/line_choices_model.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from engine.apply.align import CHOICE_RATIO, PAIR_RATIO
from engine.bench.apply_cases import held_out
from engine.bench.apply_shapes import shape_cases
from engine.bench.line_choices import (LANGUAGES, bench_instruction, bucket, firing, line_cases, measure, model_row,
                                       model_sample, model_tally)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--per-language", type=int, default=20, help="file lines per language (each gives twins)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--arms", default="lines,structure", help="lines, structure (engine.bench.apply_rules)")
    parser.add_argument("--languages", default=",".join(LANGUAGES))
    parser.add_argument("--bench-per-style", type=int, default=8, help="the bench's style cases (held_out)")
    parser.add_argument("--bench-per-shape", type=int, default=10, help="the bench's shape cases; 0: no bench cases")
    parser.add_argument("--out", type=Path, default=None, help="the JSON record")
    parser.add_argument("--model", action="store_true", help="the embedded model against the rule (module docstring)")
    parser.add_argument("--model-sample", type=int, default=60, help="twins the model decides")
    parser.add_argument("--backend", default="transformers", help="the embedded model's backend (--model)")
    parser.add_argument("--instruction", choices=("full", "short"), default="full",
                        help="full: Change `L` to `L'`. / Add `L'` after `L`.; short: Change that line to `L'`. / "
                             "Add the line `L'`. (engine.bench.line_choices.said)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    cases = list(line_cases(args.per_language, args.seed, args.languages.split(",")))
    if args.model:
        return model_arm(args, cases, argv, started)
    found = measure(cases, args.arms.split(","))
    bench = [*held_out(args.bench_per_style, args.seed), *shape_cases(args.bench_per_shape, args.seed)] \
        if args.bench_per_shape else []
    fired = firing(bench)
    lines_rows = [r for r in found["rows"] if r["arm"] == "lines"]
    structure_rows = [r for r in found["rows"] if r["arm"] == "structure"]
    record = {"command": "PYTHONPATH=. OMP_NUM_THREADS=1 python scripts/measure_line_choices.py " + " ".join(
                  sys.argv[1:] if argv is None else argv),
              "pair_ratio": PAIR_RATIO, "choice_ratio": CHOICE_RATIO, "cases": len(cases),
              "languages": {lang: sum(lc.case.language == lang for lc in cases) for lang in args.languages.split(",")},
              "seconds": round(time.perf_counter() - started, 1), "tally": found["tally"],
              "bench_cases": fired,
              "lines_equal_structure": sum(
                  a["right"] == b["right"] and a["wrong"] == b["wrong"] for a, b in zip(lines_rows, structure_rows)),
              # the cases what auto runs (structure) does not merge right, one a line: the rest are right
              "rows": [{k: v for k, v in r.items() if k not in ("arm", "right", "pairs")}
                       for r in structure_rows if not r["right"]]}
    for arm, sides in found["tally"].items():
        for side, truths in sides.items():
            for truth, t in truths.items():
                print(f"{arm:9s} {side:6s} {truth:13s} n={t['n']:4d} right={t['right']:4d} wrong={t['wrong']:4d} "
                      f"ws={t['whitespace']:3d} refused={t['refused']:3d} choice={t.get('choice', '-')} "
                      f"wrong-other-right={t.get('wrong_other_reading_right', '-')}")
    print(f"bench cases: {fired['cases']}; a line choice met on {fired['line']} (the rule right on "
          f"{fired['line_rule_right']}), a structure choice on {fired['structure']}")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        rows = record.pop("rows")
        text = json.dumps(record, indent=1)
        text = text[:-2] + ',\n "rows": [\n' + ",\n".join(json.dumps(r) for r in rows) + "\n ]\n}\n"
        json.loads(text)  # (one row a line: the record stays short to read)
        args.out.write_text(text, encoding="utf-8")
    return 0


def model_arm(args: argparse.Namespace, cases: list, argv: list[str] | None, started: float) -> int:
    """The model's picks beside the rule's, on the sampled twins and the bench's cases."""
    from engine.api import Engine
    from engine.apply.choice import MEASURE, model_scorer

    engine = Engine.load("default", backend=args.backend)
    score = model_scorer(engine.loaded)
    twins = []
    for lc in model_sample(cases, args.model_sample, args.seed):
        row = model_row(score, lc.case, lc.short if args.instruction == "short" else lc.instruction)
        if row is not None:
            row.update(truth_kind=lc.truth, side=lc.side, markers=lc.markers, bucket=bucket(lc.paired),
                       language=lc.case.language)
            twins.append(row)
            print(json.dumps(row), flush=True)
    bench_rows = []
    bench = [*held_out(args.bench_per_style, args.seed), *shape_cases(args.bench_per_shape, args.seed)] \
        if args.bench_per_shape else []
    for case in bench:
        plain = model_row(None, case, "")
        if plain is None:
            continue
        row = model_row(score, case, bench_instruction(case, plain["readings"][0], args.instruction == "short"))
        row["no_instruction"] = plain["model"]  # (without one every reading scores the same: the rule)
        bench_rows.append(row)
        print(json.dumps(row), flush=True)
    record = {"command": "PYTHONPATH=. OMP_NUM_THREADS=1 python scripts/measure_line_choices.py " + " ".join(
                  sys.argv[1:] if argv is None else argv),
              "model": engine.name, "backend": args.backend, "measure": MEASURE, "choice_ratio": CHOICE_RATIO,
              "instructions": {"replace": "Change `L` to `L'`.", "insert": "Add `L'` after `L`. (or before)"}
              if args.instruction == "full" else {"replace": "Change that line to `L'`.", "insert": "Add the line `L'`."},
              "sampled": args.model_sample, "twins_with_a_line_choice": len(twins),
              "twins": model_tally(twins, ("truth_kind", "bucket", "side", "language")),
              "bench_cases": len(bench), "bench": model_tally(bench_rows, ()),
              "seconds": round(time.perf_counter() - started, 1), "twin_rows": twins, "bench_rows": bench_rows}
    print(json.dumps({k: record[k] for k in ("twins", "bench")}, indent=1))
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        rows = {k: record.pop(k) for k in ("twin_rows", "bench_rows")}
        text = json.dumps(record, indent=1)[:-2]
        for key, mine in rows.items():  # (one row a line: the record stays short to read)
            text += f',\n "{key}": [\n' + ",\n".join(json.dumps(r) for r in mine) + "\n ]"
        text += "\n}\n"
        json.loads(text)
        args.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
