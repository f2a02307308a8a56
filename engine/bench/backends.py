"""Backends side by side in one run: plain decoding speed (ar tokens/s) and the kernel s(N).

For every case, each backend decodes the same gold continuation one token per forward (the
forced family's ``ar`` arm: the work is identical, only the backend differs), the order of the
backends rotating from case to case; then s(N) is measured on each backend in turn. Ratios are
per case, so a noisy machine moves both sides together.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from engine.bench.edits import teacher_forced, text_prompt_ids
from engine.bench.harness import machine_info, median, rotate
from engine.bench.kernel import measure_kernel
from engine.core.tokens import encode
from engine.decoding.tables import tables_for


def compare_backends(engines: dict[str, Any], cases: Sequence[Any], kernel_ns: Sequence[int], kernel_trials: int,
                     command: str, progress: Callable[[str], None] = lambda _m: None) -> dict[str, Any]:
    names = list(engines)
    rows = []
    for k, case in enumerate(cases):
        row: dict[str, Any] = {"case": case.id}
        for name in rotate(names, k):
            loaded = engines[name].loaded
            tok = loaded.tokenizer
            run = teacher_forced(loaded, "ar", text_prompt_ids(tok, case), encode(tok, case.gold),
                                 encode(tok, case.input), tables_for(loaded).stop_ids)
            row[name] = {"tokens": run.output_tokens, "decode_s": run.decode_s,
                         "tokens_per_s": run.output_tokens / run.decode_s if run.decode_s else None}
        base = row[names[0]]["tokens_per_s"]
        for name in names[1:]:
            row[f"{name}_vs_{names[0]}"] = row[name]["tokens_per_s"] / base if base else None
        rows.append(row)
        progress(f"{case.id}: " + ", ".join(f"{n} {row[n]['tokens_per_s']:.1f} tok/s" for n in names))
    kernels = {}
    for name in names:
        loaded = engines[name].loaded
        kernels[name] = measure_kernel(loaded.runtime, loaded.device, ns=kernel_ns, trials=kernel_trials,
                                       progress=lambda m, n=name: progress(f"kernel {n}: {m}"))
    summary: dict[str, Any] = {}
    for name in names:
        tokens = sum(r[name]["tokens"] for r in rows)
        seconds = sum(r[name]["decode_s"] for r in rows)
        summary[name] = {"tokens": tokens, "decode_s": seconds, "tokens_per_s": tokens / seconds if seconds else None,
                         "backend": engines[name].loaded.runtime.describe()}
    for name in names[1:]:
        summary[f"{name}_vs_{names[0]}"] = {
            "aggregate": summary[name]["tokens_per_s"] / summary[names[0]]["tokens_per_s"],
            "median_per_case": median([r[f"{name}_vs_{names[0]}"] for r in rows]),
        }
    return {"backends": names, "cases": len(rows), "rows": rows, "summary": summary, "kernels": kernels,
            "machine": machine_info("cpu"), "command": command}


def backends_table(data: dict[str, Any]) -> list[tuple[str, ...]]:
    """Rows (backend, tokens/s, vs first, s(8), s(32), s(128)) for printing."""
    names = data["backends"]
    out = []
    for name in names:
        summary = data["summary"][name]
        vs = data["summary"].get(f"{name}_vs_{names[0]}", {}).get("aggregate")
        points = {p["N"]: p["speedup"] for p in data["kernels"][name]["points"]}
        out.append((name, f"{summary['tokens_per_s']:.1f}", f"{vs:.2f}x" if vs else "1.00x",
                    *(f"{points[n]:.2f}" if n in points else "-" for n in (8, 32, 128))))
    return out
