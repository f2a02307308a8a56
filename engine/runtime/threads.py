"""How many CPU threads torch runs a forward on (llama.cpp takes its own count with the model)."""

from __future__ import annotations


def set_threads(threads: int | None) -> None:
    """Pin torch's intra-op threads. On a shared machine one thread per process is far steadier
    than oversubscribed OpenMP threads spinning against other work (see docs/benchmarks.md)."""
    if threads:
        import torch

        torch.set_num_threads(threads)
