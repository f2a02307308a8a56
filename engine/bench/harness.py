"""What every benchmark shares: the machine description, a meter on the model's forwards, the
results file, the engine cache and small statistics helpers."""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import shlex
import statistics
import sys
from pathlib import Path
from typing import Any, Sequence

from engine.api import Engine
from engine.runtime.prefix_cache import common_prefix


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_info(device: str = "cpu", dtype: Any = None) -> dict[str, Any]:
    """Where a result was measured: CPU/GPU, cores, threads, library versions, date."""
    import torch
    import transformers

    info: dict[str, Any] = {
        "device": str(device),
        "dtype": str(dtype).removeprefix("torch.") if dtype is not None else None,
        "cpu": cpu_name(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }
    try:
        info["load_average"] = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        pass
    if str(device).startswith("cuda") and torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


def command_line(argv: Sequence[str] | None = None) -> str:
    """The command as a person would retype it."""
    args = list(sys.argv[1:] if argv is None else argv)
    return shlex.join(["copy-as-decode", *args])


def write_json(path: Path | str, data: Any) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    return path


def median(values: Sequence[float]) -> float | None:
    values = [v for v in values if v is not None]
    return float(statistics.median(values)) if values else None


def ratio(num: float | None, den: float | None) -> float | None:
    if num is None or not den:
        return None
    return num / den


def rotate(items: Sequence[str], k: int) -> list[str]:
    """``items`` rotated by ``k``: the arm order of case ``k``, so no arm always runs first."""
    if not items:
        return []
    k %= len(items)
    return list(items[k:]) + list(items[:k])


_ENGINES: dict[tuple, Any] = {}


def first_difference(loaded: Any, prompt_ids: Sequence[int], ar_ids: Sequence[int],
                     other_ids: Sequence[int]) -> dict[str, Any] | None:
    """Where ``other_ids`` first leaves ar's greedy output, and how close that choice was there:
    ``gap`` = the logit of ar's token minus the other's, computed as ar computes it (the prompt's
    prefill, then one-token steps), so ``step_argmax`` is ar's token and the gap is >= 0 when the
    outputs were decoded from this prompt. A gap well under a logit is a near-tie that a
    multi-row verify's rounding may flip (0.4-1.4 in a logit on llama.cpp's default CPU build:
    engine.runtime.backends.llamacpp.exact_rows). None when neither departs from the other."""
    at = common_prefix(list(ar_ids), list(other_ids))
    if at >= min(len(ar_ids), len(other_ids)):
        return None
    session = loaded.session()
    try:
        logits = session.append(list(prompt_ids), "prefill")
        for token in ar_ids[:at]:
            logits = session.append([int(token)], "step")
    finally:
        session.close()
    logits = logits.float()
    argmax, margin = top_two(logits)
    return {"token_index": at, "ar_token": int(ar_ids[at]), "other_token": int(other_ids[at]),
            "step_argmax": argmax, "gap": float(logits[ar_ids[at]] - logits[other_ids[at]]), "top2_gap": margin}


def top_two(logits: Any) -> tuple[int, float]:
    """The argmax of a row and its margin over the runner-up."""
    values, order = logits.topk(2)
    return int(order[0]), float(values[0] - values[1])


def get_engine(model: str = "default", device: str | None = None, dtype: str | None = None,
               progress: Any = None, selector: str = "auto", backend: str = "transformers",
               options: Any = None) -> Any:
    """One loaded :class:`engine.api.Engine` per (model, device, dtype, selector, backend) per process."""
    key = (model, device, dtype, selector, backend, options)
    if key not in _ENGINES:
        _ENGINES[key] = Engine.load(model, device=device, dtype=dtype, progress=progress, selector=selector,
                                    backend=backend, options=options)
    return _ENGINES[key]


def refuses_server(engine: Engine, command: str, why: str) -> bool:
    """True, after saying so on stderr, when ``engine`` runs on a server: benchmark ``command``
    needs an in-process runtime (``why``)."""
    if engine.loaded.runtime.gives_logits:
        return False
    print(f"copy-as-decode bench {command}: {why}", file=sys.stderr)
    return True
