"""Every benchmark PNG (matplotlib, Agg backend): the kernel curve and the per-corpus edit speedups."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

_COLORS = {"ar": "#7f7f7f", "pld": "#1f77b4", "speculative": "#2ca02c", "program": "#d62728",
           "program-drafted": "#ff7f0e", "program-undrafted": "#e377c2", "program-base": "#8c564b",
           "program-near": "#17becf", "program-cursor-on": "#8c564b", "program-oracle": "#9467bd"}


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_kernel(curves: Sequence[tuple[str, dict[str, Any]]], path: Path | str, title: str = "") -> Path:
    """s(N) against N (log2 axis) for one or more kernel results ``[(label, data), ...]``."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    top = 1
    for label, data in curves:
        ns = [p["N"] for p in data["points"]]
        ss = [p["speedup"] for p in data["points"]]
        top = max(top, max(ns))
        ax.plot(ns, ss, marker="o", label=label)
        for n, s in zip(ns, ss):
            ax.annotate(f"{s:.1f}", (n, s), textcoords="offset points", xytext=(0, 6), ha="center", fontsize=7)
    ideal = [2 ** i for i in range(0, top.bit_length())]
    ax.plot(ideal, ideal, ls=":", color="#999999", label="ideal s(N) = N")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlabel("N (tokens in one forward)")
    ax.set_ylabel("s(N) = N one-token forwards / one N-token forward")
    context = curves[0][1].get("context") if curves else None
    ax.set_title(title or f"Kernel speedup over a {context}-token cached context")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return _save(fig, plt, path)


def plot_edits(data: dict[str, Any], path: Path | str) -> Path:
    """Left: per arm against ``ar``, the decode phase's speedup pooled and as the median of
    per-case ratios, and the whole edit's (prefill included: what a user waits for), with the
    bounds. Right: the per-case decode-phase speedups (one dot per case)."""
    plt = _pyplot()
    arms = [a for a in data["arms"] if a != "ar"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10.5, 4.4))
    xs = range(len(arms))
    colors = [_COLORS.get(a, "#8c564b") for a in arms]
    series = [("pooled (sum ar / sum arm)", "speedup_vs_ar", 1.0, True),
              ("median of per-case ratios", "median_speedup_vs_ar", 0.45, False),
              ("whole edit, pooled", "edit_speedup_vs_ar", 0.2, True)]
    series = [s for s in series if any(data["arms"][a].get(s[1]) for a in arms)]
    width = 0.8 / len(series)
    for k, (label, key, alpha, annotate) in enumerate(series):
        offset = (k - (len(series) - 1) / 2) * width
        values = [data["arms"][a].get(key) or 0 for a in arms]
        left.bar([x + offset for x in xs], values, width=width, label=label, color=colors, alpha=alpha,
                 edgecolor=colors, hatch="//" if key == "edit_speedup_vs_ar" else None)
        if annotate:
            for x, v in zip(xs, values):
                left.annotate(f"{v:.2f}x", (x + offset, v), textcoords="offset points", xytext=(0, 3), ha="center",
                              fontsize=8)
    bounds = data.get("bounds") or {}
    for key, style in (("paper", "--"), ("structure_aware", ":"), ("drafted", "-.")):
        if bounds.get(key):
            left.axhline(bounds[key], ls=style, color="black", lw=1, label=f"{key} bound {bounds[key]:.2f}x")
    left.axhline(1.0, color="#999999", lw=0.8)
    left.set_xticks(list(xs), arms, rotation=20, fontsize=8)
    left.set_ylabel("speedup vs ar")
    left.legend(fontsize=7)
    for i, arm in enumerate(arms):
        values = [c["arms"][arm]["speedup_vs_ar"] for c in data.get("per_case", [])
                  if arm in c["arms"] and c["arms"][arm].get("speedup_vs_ar")]
        jitter = [i + (k % 7 - 3) * 0.04 for k in range(len(values))]
        right.scatter(jitter, values, s=12, color=_COLORS.get(arm, "#8c564b"), alpha=0.7)
    right.axhline(1.0, color="#999999", lw=0.8)
    right.set_yscale("log", base=2)
    right.set_xticks(list(xs), arms, rotation=20, fontsize=8)
    right.set_ylabel("per-case decode-phase speedup vs ar")
    fig.suptitle(f"{data['corpus']}, {data['family']} family, {data['cases']} cases ({data.get('model', '')})")
    fig.tight_layout()
    return _save(fig, plt, path)


def plot_apply(data: dict[str, Any], path: Path | str) -> Path:
    """Effective throughput (merged-file tokens / wall time) against file size, one series per
    apply arm, with the backend's plain decoding rate as a line (``bench apply``)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    colors = {"aligner": "#9467bd", "program-undrafted": "#e377c2", **_COLORS}
    for arm in dict.fromkeys(r["arm"] for r in data["rows"]):
        rows = sorted((r for r in data["rows"] if r["arm"] == arm), key=lambda r: r["lines"])
        ax.scatter([r["lines"] for r in rows], [r["throughput"] for r in rows], s=16, label=arm,
                   color=colors.get(arm, "#8c564b"), alpha=0.8)
    if data.get("plain_rate"):
        ax.axhline(data["plain_rate"], ls=":", color="black", lw=1, label=f"plain decoding {data['plain_rate']:.0f} tok/s")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("file lines")
    ax.set_ylabel("effective throughput (merged tokens / s)")
    ax.legend(fontsize=7)
    backend = str(data.get("backend", "")).split(" (")[0]
    fig.suptitle(f"apply, {len({r['case'] for r in data['rows']})} cases ({data.get('model', '')}, {backend})", fontsize=9)
    fig.tight_layout()
    return _save(fig, plt, path)


def _save(fig: Any, plt: Any, path: Path | str) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
