"""How many CPU threads a forward runs on. Torch's are pinned by :func:`set_threads`; llama.cpp's,
when the ``threads`` setting is 0, are chosen at load from a short measurement (the backend times
each count :func:`candidate_counts` allows, and :func:`choose` keeps the fastest): more threads
than the CPUs free make every step dearer, by 10x on a busy 2-core machine."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    from engine.runtime.disk_cache import DiskCache

# A count within this fraction of the fastest counts as fast as it: fewer threads leave the rest
# of the machine its cores and vary less.
TOLERANCE = 0.05
# The measured mix: one prompt chunk per this many one-token steps (an edit prefills its prompt
# in chunks, then decodes a few steps per chunk's worth of prompt).
STEPS_PER_CHUNK = 4


def set_threads(threads: int | None) -> None:
    """Pin torch's intra-op threads. On a shared machine one thread per process is far steadier
    than oversubscribed OpenMP threads spinning against other work (see docs/benchmarks.md)."""
    if threads:
        import torch

        torch.set_num_threads(threads)


def allowed_cpus() -> list[int]:
    """The logical CPUs this process may run on."""
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return list(range(os.cpu_count() or 1))


def physical_cores(cpus: Sequence[int] | None = None, sysfs: Path = Path("/sys/devices/system/cpu")) -> int:
    """The physical cores among ``cpus`` (default: the allowed ones): two SMT siblings share one
    core's arithmetic units, so a second thread on a sibling adds little. Read from the CPU
    topology where it is exposed, else every logical CPU counts as a core."""
    cpus = list(cpus) if cpus is not None else allowed_cpus()
    cores = set()
    for cpu in cpus:
        topology = sysfs / f"cpu{cpu}" / "topology"
        try:
            cores.add(((topology / "physical_package_id").read_text().strip(),
                       (topology / "core_id").read_text().strip()))
        except OSError:
            return max(1, len(cpus))
    return max(1, len(cores))


def load_average() -> float | None:
    """The 1-minute load average (None where the OS has none)."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def candidate_counts(cores: int, load: float | None) -> list[int]:
    """The thread counts worth measuring: 1 up to the cores the rest of the machine leaves free
    (the load beyond this process's own one runnable thread), at least 1."""
    others = max(0.0, (load or 0.0) - 1.0)
    free = max(1, min(cores, int(cores - others + 0.5)))
    return list(range(1, free + 1))


@dataclass(frozen=True)
class ThreadTiming:
    """One count's measured seconds: a one-token step and a batched prompt chunk (infinite: not
    timed, its steps were already far too slow)."""

    threads: int
    step_s: float
    chunk_s: float

    @property
    def score(self) -> float:
        return STEPS_PER_CHUNK * self.step_s + self.chunk_s


@dataclass(frozen=True)
class ThreadChoice:
    """The thread count a runtime runs and why (shown by ``describe()`` and ``doctor``)."""

    threads: int
    reason: str


def choose(timings: Sequence[ThreadTiming], load: float | None = None, cores: int | None = None) -> ThreadChoice:
    """The fewest threads within :data:`TOLERANCE` of the fastest measured mix, and why."""
    if not timings:
        raise ValueError("no thread counts were measured")
    best = min(t.score for t in timings)
    chosen = min((t for t in timings if t.score <= best * (1 + TOLERANCE)), key=lambda t: t.threads)
    measured = ", ".join(f"{t.threads} thread{'s' if t.threads > 1 else ''} {t.step_s * 1000:.0f} ms/token "
                         + (f"{t.chunk_s * 1000:.0f} ms/chunk" if t.chunk_s != float("inf") else "(chunk not timed)")
                         for t in sorted(timings, key=lambda t: t.threads))
    context = "; ".join(part for part in (f"{cores} cores" if cores else "",
                                          f"load {load:.1f}" if load is not None else "") if part)
    return ThreadChoice(chosen.threads, f"measured: {measured}" + (f"; {context}" if context else ""))


# A measured choice is reused by later processes for this long, while the same counts are worth
# measuring (the load leaves the same cores free): a headless edit then starts without it.
REMEMBER_S = 3600.0


def remembered(key: str, now: float, cache: "DiskCache | None" = None) -> ThreadChoice | None:
    """The choice an earlier process measured for ``key`` (the weights, the CPUs, the counts
    worth measuring) within :data:`REMEMBER_S`, said as such; else None."""
    from engine.runtime.disk_cache import DiskCache

    store = cache or DiskCache("threads")
    text = store.read_text(key)
    if text is None:
        return None
    try:
        entry = json.loads(text)
        threads, reason, at = int(entry["threads"]), str(entry["reason"]), float(entry["at"])
    except (ValueError, KeyError, TypeError):
        store.forget(key)
        return None
    if threads < 1 or not 0 <= now - at <= REMEMBER_S:
        return None
    return ThreadChoice(threads, f"{reason}; remembered from {max(1, round((now - at) / 60))} min ago")


def remember(key: str, choice: ThreadChoice, now: float, cache: "DiskCache | None" = None) -> None:
    """Keep a measured ``choice`` for :func:`remembered` (never a count that was not measured)."""
    from engine.runtime.disk_cache import DiskCache

    store = cache or DiskCache("threads")
    store.write_text(key, json.dumps({"threads": choice.threads, "reason": choice.reason, "at": now}))
