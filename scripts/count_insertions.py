"""Near-copy insertions (engine.evaluation.quality.near_copy_insertions) of stored free-family
``bench edits`` runs made before the counter existed, from each program arm's stored program
(``raw_output_head``) resolved against the case's input; also how many of those programs write the
pair the range rule now refuses (a gen ending in a variant of the next input line, then a copy
that starts at that line: engine.language.grammar.RangeConstraint).

    python scripts/count_insertions.py OUT.json RESULTS.json...
"""

from __future__ import annotations

import json
import sys
from typing import Any

from engine.core.lines import near_copy, split_lines
from engine.evaluation.corpora import load_corpus
from engine.evaluation.quality import near_copy_insertions
from engine.language.program import CopyLines, Gen, ProgramSyntaxError, parse
from engine.language.resolve import ResolveError, resolve


def rule_pairs(program: Any, lines: list[str]) -> int:
    """Gens ending in a variant of the next input line that a copy from that line follows."""
    count, consumed, last_gen = 0, 0, None
    for op in program.ops:
        if isinstance(op, CopyLines):
            if (last_gen is not None and op.start == consumed + 1 and last_gen.endswith("\n")
                    and near_copy(split_lines(last_gen)[-1], lines[op.start - 1])):
                count += 1
            consumed, last_gen = max(consumed, op.end), None
        else:
            last_gen = op.text if isinstance(op, Gen) else None
    return count


def count_file(path: str) -> dict[str, Any]:
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    cases = {c.id: c for c in load_corpus(data["corpus"])}
    arms: dict[str, Any] = {}
    for arm in data["settings"]["arms"]:
        if not arm.startswith("program"):
            continue
        row: dict[str, Any] = {"cases": 0, "unreadable": 0, "near_copy_insertions": 0, "rule_pairs": 0, "ids": []}
        for rec in data["per_case"]:
            entry = rec["arms"].get(arm)
            if entry is None:
                continue
            case = cases[rec["id"]]
            row["cases"] += 1
            try:
                program = parse(entry.get("raw_output_head", ""))
                output = resolve(program, case.input).text
            except (ProgramSyntaxError, ResolveError):
                row["unreadable"] += 1  # cut short (a head) or unfinished: not counted
                continue
            inserted = near_copy_insertions(case.input, output) > 0
            pairs = rule_pairs(program, split_lines(case.input))
            row["near_copy_insertions"] += inserted
            row["rule_pairs"] += pairs > 0
            if inserted or pairs:
                row["ids"].append({"id": rec["id"], "test": entry.get("test"), "inserted": inserted,
                                   "rule_pair": pairs > 0})
        arms[arm] = row
    return {"file": path, "corpus": data["corpus"], "arms": arms}


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    files = [count_file(p) for p in argv[1:]]
    for f in files:
        for arm, row in f["arms"].items():
            print(f["file"], arm, {k: v for k, v in row.items() if k != "ids"})
    with open(argv[0], "w", encoding="utf-8") as out:
        json.dump({"command": "python scripts/count_insertions.py " + " ".join(argv), "files": files}, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
