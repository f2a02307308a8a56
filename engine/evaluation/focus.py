"""Where a benchmark arm's focus hint points, as users send one: nowhere, near the bug, on it.

* ``none``: no hint (the CLI without ``--focus``, a palette command on a fresh file);
* ``near``: an editor's cursor, which is near the bug, not on it: the first line the gold changes
  moved by an offset drawn uniformly from -3..+3 and clipped to the region. The draw is seeded by
  the case's key alone, so every arm, run and machine sees the same cursor for a case;
* ``on``: the cursor exactly on the first line the gold changes, as a user who clicks the bug
  sends it (the ``cursor-on`` arms; users often click the very line);
* ``oracle``: the same line, named as the upper bound it was first measured as (the old
  benchmarks called this arm ``program-focus``).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable
from typing import Any

FOCUS_SETTINGS = ("none", "near", "on", "oracle")
NEAR_OFFSETS = tuple(range(-3, 4))
_SEED = "copy-as-decode-near-cursor"


def near_offset(key: str) -> int:
    """The drawn cursor offset of the case ``key`` (uniform over -3..+3, seeded by the key)."""
    return random.Random(f"{_SEED}:{key}").choice(NEAR_OFFSETS)


def near_line(changed: int, n_lines: int, key: str) -> int:
    """The cursor line of the case ``key``: ``changed`` + its drawn offset, clipped to 1..n_lines."""
    return min(max(1, changed + near_offset(key)), max(1, n_lines))


def focus_for(setting: str, changed: int | None, n_lines: int, key: str) -> int | None:
    """The 1-based focus line an arm with ``setting`` sends (None: no hint, or nothing changed)."""
    if setting not in FOCUS_SETTINGS:
        raise ValueError(f"unknown focus setting {setting!r}; choose from {', '.join(FOCUS_SETTINGS)}")
    if setting == "none" or changed is None:
        return None
    return changed if setting in ("on", "oracle") else near_line(changed, n_lines, key)


def offset_histograms(records: Iterable[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Histograms of the drawn and the applied (after clipping) near offsets of case records."""
    drawn: Counter[int] = Counter()
    applied: Counter[int] = Counter()
    for rec in records:
        focus = rec.get("focus") or {}
        if "near_offset" in focus and focus.get("near") is not None:
            drawn[focus["near_offset"]] += 1
            applied[focus["near"] - focus["oracle"]] += 1
    return {"drawn": {str(k): drawn[k] for k in sorted(drawn)}, "applied": {str(k): applied[k] for k in sorted(applied)}}
