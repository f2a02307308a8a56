"""Two trees' benchmark records, field by field: the check that a refactor left the engine's
behaviour as it was. It reads ``bench edits`` records (per case and arm), ``bench apply`` records
(per case and arm) and ``scripts/measure_editor_session.py`` records (per run). Timings are not
compared; forward counts and speculative's generated/copied split follow the cost model's draft
lengths, which it learns from measured forward times, so they are not compared either.

    python scripts/compare_identity.py BEFORE_DIR AFTER_DIR [OUT.json]

Each folder holds the same file names (e.g. forced_py.json, apply.json, editor_session.json); the
answer lists, per file, the cases and arms compared and every difference.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

COMPARED = ("same_as_ar", "exact", "collateral", "wrong_line", "tail_deleted", "syntax_broken", "valid_program",
            "raw_output_head", "test", "output_tokens", "tokens", "stop_reason", "ok", "near_copy_insertions")
APPLY_COMPARED = ("exact", "damaged_lines", "stop_reason", "merged_tokens", "prompt_tokens", "generated", "unplaced")
EDITOR_COMPARED = ("program", "status", "prompt_tokens", "fixed", "prefix_reused")
# Fields whose values follow timing-learned draft lengths, per arm.
TIMING_LED = {"speculative": {"tokens"}}


def differences(before: dict[str, Any], after: dict[str, Any]) -> tuple[int, list[dict[str, Any]]]:
    b = {r["id"]: r for r in before["per_case"]}
    a = {r["id"]: r for r in after["per_case"]}
    common = [i for i in b if i in a]
    found = []
    for case in common:
        for arm, entry in a[case]["arms"].items():
            old = b[case]["arms"].get(arm)
            if old is None:
                continue
            for key in COMPARED:
                if key in TIMING_LED.get(arm, ()) or (key not in old and key not in entry):
                    continue
                if old.get(key) != entry.get(key):
                    found.append({"case": case, "arm": arm, "field": key, "before": old.get(key), "after": entry.get(key)})
    return len(common), found


def keyed_differences(before: dict[str, dict], after: dict[str, dict], fields: tuple[str, ...],
                      what: str) -> tuple[int, list[dict[str, Any]]]:
    """Differences between two records' entries of the same keys (a case and arm, a run)."""
    common = [key for key in before if key in after]
    found = [{what: key, "field": f, "before": before[key].get(f), "after": after[key].get(f)}
             for key in common for f in fields if before[key].get(f) != after[key].get(f)]
    return len(common), found


def record_differences(before: dict[str, Any], after: dict[str, Any]) -> tuple[str, int, list[dict[str, Any]]] | None:
    """The kind of a record, how many entries both hold, and their differences (None: not a record)."""
    if "per_case" in before:
        return ("bench edits", *differences(before, after))
    if "rows" in before:  # bench apply
        def by_case(record: dict[str, Any]) -> dict[str, dict]:
            return {f"{r['case']} {r['arm']}": r for r in record["rows"]}
        return ("bench apply", *keyed_differences(by_case(before), by_case(after), APPLY_COMPARED, "case"))
    if "runs" in before:  # the editor session
        count, found = keyed_differences(before["runs"], after["runs"], EDITOR_COMPARED, "run")
        if before.get("prompt_sharing_between_cursor_lines") != after.get("prompt_sharing_between_cursor_lines"):
            found.append({"run": "all", "field": "prompt_sharing_between_cursor_lines",
                          "before": before.get("prompt_sharing_between_cursor_lines"),
                          "after": after.get("prompt_sharing_between_cursor_lines")})
        return ("editor session", count, found)
    return None


def main(argv: list[str]) -> int:
    before_dir, after_dir = Path(argv[0]), Path(argv[1])
    report = []
    for path in sorted(before_dir.glob("*.json")):
        twin = after_dir / path.name
        if not twin.exists():
            continue
        before, after = json.loads(path.read_text()), json.loads(twin.read_text())
        compared = record_differences(before, after)
        if compared is None:
            continue
        kind, cases, found = compared
        arms = list(after["per_case"][0]["arms"]) if after.get("per_case") else \
            sorted({r["arm"] for r in after.get("rows", [])})
        report.append({"file": path.name, "kind": kind, "corpus": after.get("corpus"), "family": after.get("family"),
                       "cases": cases, "arms": arms, "differences": len(found), "details": found})
        print(f"{path.name} ({kind}): {cases} compared, {len(found)} differences")
    if len(argv) > 2:
        Path(argv[2]).write_text(json.dumps(report, indent=1) + "\n")
    return 1 if any(r["differences"] for r in report) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
