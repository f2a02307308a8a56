"""Tables of benchmark results: a rich table after a run, Markdown for results/BENCHMARKS.md.

``markdown_report(folder)`` reads ``bench_kernel.json`` and ``bench_<family>_<corpus>.json`` and
renders the kernel table, the forced and free tables, the time breakdown and the issue's targets
with whether each was met (the numbers it decides on are printed next to it).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

CORPORA = ("humanevalfix-python", "humanevalfix-js", "canitedit")


def _f(value: Any, digits: int = 2, suffix: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}{suffix}"
    return f"{value}{suffix}"


def edits_table(data: dict[str, Any]) -> Any:
    from rich.table import Table

    free = data["family"] == "free"
    table = Table(title=f"{data['corpus']}: {data['family']} family, {data['cases']} cases, {data['model']} on "
                        f"{data['device']} (decode phase)", title_justify="left")
    cols = ["arm", "total s", "median s", "speedup (pooled)", "speedup (median)", "wall speedup", "tokens", "forwards"]
    cols += ["== ar", "pass@1", "at limit"] if free else ["predicted", "== gold"]
    for c in cols:
        table.add_column(c, justify="right" if c != "arm" else "left")
    for arm, s in data["arms"].items():
        row = [arm, _f(s["total_s"]), _f(s["median_s"], 3), _f(s["speedup_vs_ar"], 2, "x"),
               _f(s["median_speedup_vs_ar"], 2, "x"), _f(s["wall_speedup_vs_ar"], 2, "x"), str(s["tokens"]),
               str(s["forwards"])]
        if free:
            row += [f"{s['same_as_ar']}/{data['cases']}", _f(s.get("pass_at_1"), 2), str(s["stopped_at_limit"])]
        else:
            row += [_f(s.get("predicted_speedup_vs_ar"), 2, "x"), f"{s['ok']}/{data['cases']}"]
        table.add_row(*row)
    b = data.get("bounds")
    if b:
        table.caption = (f"bounds: paper {_f(b['paper'], 2)}x, structure-aware {_f(b['structure_aware'], 2)}x"
                         + (f", fused (engine's forwards) {_f(b.get('fused'), 2)}x" if b.get("fused") else "")
                         + (f"; program / structure-aware = {_f(b.get('program_vs_structure_aware'), 2)}"
                            if b.get("program_vs_structure_aware") else ""))
    return table


def _load(path: Path) -> dict[str, Any] | None:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def kernel_markdown(data: dict[str, Any]) -> str:
    lines = [f"Model `{data['model']}` on {data['device']}, context {data['context']} tokens, "
             f"{data['trials']} trials (medians) after {data['warmup']} warm-up round(s).", "",
             "| N | N one-token forwards (ms) | one N-token forward (ms) | per-token AR (ms) | s(N) |",
             "|---:|---:|---:|---:|---:|"]
    for p in data["points"]:
        lines.append(f"| {p['N']} | {p['ar_s'] * 1e3:.1f} | {p['prefill_s'] * 1e3:.1f} | "
                     f"{p['ar_s'] * 1e3 / p['N']:.1f} | {p['speedup']:.2f} |")
    return "\n".join(lines)


def forced_markdown(results: dict[str, dict[str, Any]]) -> str:
    lines = ["| corpus | cases | arm | decode s (sum) | median s | speedup pooled | speedup median | "
             "forwards | tokens fed | predicted from s(N) | output == gold |",
             "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for corpus, data in results.items():
        for arm, s in data["arms"].items():
            lines.append(f"| {corpus} | {data['cases']} | {arm} | {s['total_s']:.1f} | {_f(s['median_s'], 3)} | "
                         f"{_f(s['speedup_vs_ar'], 2, 'x')} | {_f(s['median_speedup_vs_ar'], 2, 'x')} | "
                         f"{s['forwards']} | {s['forward_tokens']} | {_f(s.get('predicted_speedup_vs_ar'), 2, 'x')} | "
                         f"{s['ok']}/{data['cases']} |")
    lines += ["", "Bounds (from the measured s(N), pooled over the cases run):", "",
              "| corpus | T | T_gen | copy spans | chosen tokens (structure) | forced literal runs (tokens) | "
              "paper | structure-aware | fused (engine's forwards) | CaD measured | CaD / structure-aware |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for corpus, data in results.items():
        b = data.get("bounds") or {}
        if not b:
            continue
        lines.append(f"| {corpus} | {b['T']} | {b['T_gen']} | {b['K']} | {b['chosen']} ({b['structure_chosen']}) | "
                     f"{b['literal_runs']} ({b['literal_tokens']}) | {_f(b['paper'], 2, 'x')} | "
                     f"{_f(b['structure_aware'], 2, 'x')} | {_f(b.get('fused'), 2, 'x')} | "
                     f"{_f(data['arms'].get('program', {}).get('speedup_vs_ar'), 2, 'x')} | "
                     f"{_f(b.get('program_vs_structure_aware'), 2)} |")
    return "\n".join(lines)


def breakdown_markdown(datasets: list[dict[str, Any]]) -> str:
    lines = ["| corpus | arm | one-token steps s (calls) | fused / verify forwards s (calls) | grammar s | "
             "Python outside forwards s | chosen tokens | forced literal tokens | copied / accepted tokens |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for data in datasets:
        corpus = data["corpus"]
        for arm, s in data["arms"].items():
            b = s["breakdown"]
            multi_s = b.get("fused_s", 0.0) + b.get("verify_s", 0.0)
            multi_c = b.get("fused_calls", 0) + b.get("verify_calls", 0)
            lines.append(f"| {corpus} ({data['family']}) | {arm} | {b.get('step_s', 0.0):.2f} ({b.get('step_calls', 0)}) | "
                         f"{multi_s:.2f} ({multi_c}) | {b.get('grammar_s', 0.0):.2f} | {s['python_overhead_s']:.2f} | "
                         f"{s['generated']} | {s['forced']} | {s['copied']} |")
    return "\n".join(lines)


def free_markdown(results: dict[str, dict[str, Any]]) -> str:
    lines = ["| corpus | cases | arm | decode s (sum) | median s | speedup pooled | speedup median | "
             "wall speedup | output tokens | forwards | output == ar | pass@1 | hit token limit |",
             "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for corpus, data in results.items():
        ref = data.get("reference")
        for arm, s in data["arms"].items():
            lines.append(f"| {corpus} | {data['cases']} | {arm} | {s['total_s']:.1f} | {_f(s['median_s'], 3)} | "
                         f"{_f(s['speedup_vs_ar'], 2, 'x')} | {_f(s['median_speedup_vs_ar'], 2, 'x')} | "
                         f"{_f(s['wall_speedup_vs_ar'], 2, 'x')} | {s['tokens']} | {s['forwards']} | "
                         f"{s['same_as_ar']}/{data['cases']} | "
                         f"{s.get('pass', '-')}/{data['cases']} | {s['stopped_at_limit']} |")
        if ref:
            lines.append(f"| {corpus} | | (gold) | | | | | | | | | {ref['gold_pass']}/{ref['cases']} | |")
    return "\n".join(lines)


def targets(forced: dict[str, dict[str, Any]], free: dict[str, dict[str, Any]]) -> list[tuple[str, bool | None, str]]:
    """(target, met?, the numbers) for each of the issue's targets that the results can decide."""
    out: list[tuple[str, bool | None, str]] = []
    for corpus, data in forced.items():
        arms, b = data["arms"], data.get("bounds") or {}
        cad = arms.get("program", {}).get("speedup_vs_ar")
        if cad and b.get("structure_aware"):
            r = cad / b["structure_aware"]
            out.append((f"forced CaD >= 0.9 x structure-aware bound ({corpus})", r >= 0.9,
                        f"{cad:.2f}x / {b['structure_aware']:.2f}x = {r:.2f}"))
        pld = arms.get("pld", {}).get("speedup_vs_ar")
        if cad and pld:
            need = 1.3 if corpus == "canitedit" else 1.0
            r = cad / pld
            label = ">= 1.3x faster than" if need > 1 else "faster than"
            out.append((f"forced CaD {label} forced PLD ({corpus})", r >= need if need > 1 else r > 1,
                        f"{cad:.2f}x vs {pld:.2f}x = {r:.2f}"))
    for corpus, data in free.items():
        arms = data["arms"]
        spec, pld = arms.get("speculative", {}), arms.get("pld", {})
        if spec.get("speedup_vs_ar"):
            out.append((f"free speculative >= 1.5x ar ({corpus})", spec["speedup_vs_ar"] >= 1.5,
                        f"{spec['speedup_vs_ar']:.2f}x pooled (median {_f(spec['median_speedup_vs_ar'])}x)"))
        if spec.get("speedup_vs_ar") and pld.get("speedup_vs_ar"):
            out.append((f"free speculative faster than pld ({corpus})", spec["speedup_vs_ar"] > pld["speedup_vs_ar"],
                        f"{spec['speedup_vs_ar']:.2f}x vs {pld['speedup_vs_ar']:.2f}x"))
        if spec:
            out.append((f"free speculative output == ar ({corpus})", spec["same_as_ar"] == data["cases"],
                        f"{spec['same_as_ar']}/{data['cases']}"))
    return out


def markdown_report(folder: Path | str) -> str:
    folder = Path(folder)
    parts: list[str] = []
    kernel = _load(folder / "bench_kernel.json")
    if kernel:
        parts += ["### Kernel s(N)", "", kernel_markdown(kernel), ""]
    forced = {c: d for c in CORPORA if (d := _load(folder / f"bench_forced_{c}.json"))}
    free = {c: d for c in CORPORA if (d := _load(folder / f"bench_free_{c}.json"))}
    if forced:
        parts += ["### Forced family (every arm decodes the gold)", "", forced_markdown(forced), ""]
    if free:
        parts += ["### Free family (the model decides)", "", free_markdown(free), ""]
    if forced or free:
        parts += ["### Where the time goes (sums over the cases)", "",
                  breakdown_markdown(list(forced.values()) + list(free.values())), ""]
        parts += ["### Targets", "", "| target | met | numbers |", "|---|---|---|"]
        for name, met, numbers in targets(forced, free):
            parts.append(f"| {name} | {'yes' if met else 'no'} | {numbers} |")
    return "\n".join(parts).rstrip() + "\n"
