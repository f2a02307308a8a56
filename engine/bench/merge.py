"""Merge partial ``bench edits`` results (case ranges run with ``--offset``/``--limit``, possibly in
different sessions) into one results record, so a long run can be committed piece by piece.

Parts must measure the same thing: corpus, family, model, device, arms (same order), new-token
limit, test timeout, selector and kernel curve. Cases may not repeat. Every number is recomputed
from the per-case records (each case's arms were measured side by side in one process, so the
pooled ratios stay side-by-side ratios); ``parts`` records where each range came from.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from engine.bench.arms import upgrade_names
from engine.bench.edits import results_record

MUST_AGREE = ("corpus", "family", "model", "device")
SETTINGS_MUST_AGREE = ("arms", "max_new_tokens", "max_new_tokens_rule", "test_timeout_s", "selector", "warmup")


class MergeError(ValueError):
    """Parts that cannot be merged; the message names the field and the parts."""


def load_part(path: Path | str) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise MergeError(f"{path}: cannot read a results file: {exc}") from exc
    if not isinstance(data, dict) or "per_case" not in data or "family" not in data:
        raise MergeError(f"{path}: not a 'bench edits' results file (no per_case records)")
    data.setdefault("_source", str(path))
    return upgrade_names(data)


def _kernel(data: dict[str, Any]) -> str | None:
    return (data.get("bounds") or {}).get("kernel")


def _part_info(data: dict[str, Any]) -> list[dict[str, Any]]:
    if data.get("parts"):
        return list(data["parts"])
    records = data["per_case"]
    return [{"source": data.get("_source"), "offset": data.get("settings", {}).get("offset"),
             "limit": data.get("settings", {}).get("limit"), "cases": len(records),
             "first": records[0]["id"] if records else None, "last": records[-1]["id"] if records else None,
             "complete": data.get("complete", True), "command": data.get("command", ""),
             "date": data.get("machine", {}).get("date"), "elapsed_s": data.get("elapsed_s")}]


def merge_results(parts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One results record from ``parts`` (see the module docstring for what must agree)."""
    if not parts:
        raise MergeError("nothing to merge: give at least one results file")
    first = parts[0]
    name = lambda d: d.get("_source", "a part")  # noqa: E731
    for other in parts[1:]:
        for key in MUST_AGREE:
            if other.get(key) != first.get(key):
                raise MergeError(f"{name(other)} has {key} {other.get(key)!r} but {name(first)} has "
                                 f"{first.get(key)!r}: only runs of the same {key} merge")
        for key in SETTINGS_MUST_AGREE:
            a, b = first.get("settings", {}).get(key), other.get("settings", {}).get(key)
            if a != b:
                raise MergeError(f"{name(other)} has {key} {b!r} but {name(first)} has {a!r}: rerun the range "
                                 f"with the same --{key.replace('_', '-').removesuffix('-s')}")
        if _kernel(other) != _kernel(first):
            raise MergeError(f"{name(other)} used kernel {_kernel(other)!r} but {name(first)} used "
                             f"{_kernel(first)!r}: bounds need one kernel curve (--kernel)")
    seen: dict[str, str] = {}
    records: list[dict[str, Any]] = []
    for part in parts:
        for rec in part["per_case"]:
            if rec["id"] in seen:
                raise MergeError(f"case {rec['id']} is in both {seen[rec['id']]} and {name(part)}: "
                                 "merge parts with disjoint case ranges")
            seen[rec["id"]] = name(part)
            records.append(rec)
    if all("index" in r for r in records):
        records.sort(key=lambda r: r["index"])
    settings = dict(first.get("settings", {}))
    indices = [r["index"] for r in records if "index" in r]
    settings.update({"offset": min(indices) if indices else None, "limit": None, "merged": True})
    return results_record(records, corpus=first["corpus"], family=first["family"], arms=settings["arms"],
                          model=first["model"], device=first["device"], kernel=_kernel(first), settings=settings,
                          machine=first.get("machine", {}), command="merged: see parts",
                          elapsed_s=round(sum(p.get("elapsed_s") or 0.0 for p in parts), 1),
                          complete=all(p.get("complete", True) for p in parts),
                          parts=[info for p in parts for info in _part_info(p)])
