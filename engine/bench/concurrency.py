"""Concurrent edits on a remote backend: aggregate tokens/s and latency at 1, 2, 4, ... in flight.

Each round runs the same ``edits`` requests with ``c`` of them in flight at a time (a thread per
slot; the server batches what arrives together); rounds for the levels alternate (1, 2, 4, 1, 2,
4, ...) so a noisy machine affects every level alike, and medians over rounds are reported.
Aggregate tokens/s = generated tokens of all edits / wall time of the round; latency = time from
an edit's request to its first streamed op (what a user sees first) and to its end.
"""

from __future__ import annotations

import statistics
import threading
import time
from typing import Any, Callable, Sequence

from engine.decoding.events import EditFinished, OpResolved


def _one(engine: Any, request: Any) -> dict[str, float]:
    start = time.perf_counter()
    first = None
    result = None
    for event in engine.stream(request):
        if isinstance(event, OpResolved) and first is None:
            first = time.perf_counter() - start
        if isinstance(event, EditFinished):
            result = event.result
    total = time.perf_counter() - start
    assert result is not None
    return {"first_op_s": first if first is not None else total, "total_s": total,
            "generated": result.tokens.generated, "output": result.output_text}


def run_round(engine: Any, requests: Sequence[Any], concurrent: int) -> dict[str, Any]:
    pending = list(enumerate(requests))
    lock = threading.Lock()
    runs: dict[int, dict[str, float]] = {}
    errors: list[BaseException] = []

    def worker() -> None:
        while True:
            with lock:
                if not pending:
                    return
                index, request = pending.pop(0)
            try:
                runs[index] = _one(engine, request)
            except BaseException as exc:  # noqa: BLE001 - re-raised below
                errors.append(exc)
                return

    start = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(concurrent)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - start
    if errors:
        raise errors[0]
    generated = sum(r["generated"] for r in runs.values())
    return {"concurrent": concurrent, "wall_s": wall, "generated": generated, "tokens_per_s": generated / wall,
            "first_op_s": statistics.mean(r["first_op_s"] for r in runs.values()),
            "edit_s": statistics.mean(r["total_s"] for r in runs.values()),
            "outputs": [runs[i]["output"] for i in range(len(requests))]}


def measure_concurrency(engine: Any, requests: Sequence[Any], levels: Sequence[int], rounds: int,
                        progress: Callable[[str], None] = lambda _m: None) -> dict[str, Any]:
    per_level: dict[int, list[dict[str, Any]]] = {c: [] for c in levels}
    reference = None
    for r in range(rounds):
        for c in levels:
            result = run_round(engine, requests, c)
            if reference is None:
                reference = result["outputs"]
            result["same_outputs"] = result.pop("outputs") == reference
            per_level[c].append(result)
            progress(f"round {r + 1}, {c} in flight: {result['tokens_per_s']:.1f} tok/s, "
                     f"first op {result['first_op_s']:.2f} s, edit {result['edit_s']:.2f} s")
    summary = []
    base = statistics.median(x["tokens_per_s"] for x in per_level[levels[0]])
    for c in levels:
        rows = per_level[c]
        tps = statistics.median(x["tokens_per_s"] for x in rows)
        summary.append({"concurrent": c, "tokens_per_s": tps, "vs_one": tps / base,
                        "first_op_s": statistics.median(x["first_op_s"] for x in rows),
                        "edit_s": statistics.median(x["edit_s"] for x in rows),
                        "same_outputs": all(x["same_outputs"] for x in rows)})
    return {"levels": list(levels), "rounds": rounds, "edits": len(requests), "summary": summary,
            "per_round": {str(c): v for c, v in per_level.items()}}
