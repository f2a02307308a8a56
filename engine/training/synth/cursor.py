"""Where a training case's focus hint sits: a cursor, which is at or near the bug, not always on it.

The prompt says "The problem is at or near line K", and an editor sends the cursor's line. Data
that only ever shows K on the changed line teaches the selector to rewrite line K whatever it
holds; with a cursor 2 lines above the bug that rewrites a correct line and keeps the bug. So the
hint is placed as a cursor would be (seeded, one draw per case):

* ``exact`` (EXACT_SHARE, about half): on the first line the edit changes;
* ``near`` (NEAR_SHARE): 1..3 lines above or below it, clipped to the function (never on the
  changed line itself unless the function is too short to move);
* ``away`` (the rest, AWAY_SHARE): a line more than 3 lines from it that the edit does not touch,
  so a hint can also be plainly wrong.

The gold never depends on the hint: a case teaches "look at and around line K, change what is
wrong", never "rewrite line K" (a hinted line that the gold keeps is copied in the target).
"""

from __future__ import annotations

import random

from engine.core.lines import split_lines
from engine.evaluation.quality import edit_sites

EXACT_SHARE = 0.5
NEAR_SHARE = 0.4
AWAY_SHARE = 1.0 - EXACT_SHARE - NEAR_SHARE
NEAR_MAX = 3
PLACEMENTS = ("exact", "near", "away")


def cursor_placement(input_text: str, gold: str, changed: int, rng: random.Random,
                     exact_share: float = EXACT_SHARE) -> tuple[int, str]:
    """(the 1-based focus line, its placement) for a case whose first changed line is ``changed``.

    ``exact_share`` is the share placed on the changed line; the rest keeps the near:away ratio
    above (1.0 gives the shipped adapter's data: the hint always on the changed line)."""
    n = len(split_lines(input_text))
    draw = rng.random()
    if draw < exact_share or n <= 1:
        return changed, "exact"
    if draw < exact_share + (1.0 - exact_share) * NEAR_SHARE / (NEAR_SHARE + AWAY_SHARE):
        return _near(changed, n, rng)
    touched = {i + 1 for i in edit_sites(input_text, gold)} | {changed}
    far = [line for line in range(1, n + 1) if line not in touched and abs(line - changed) > NEAR_MAX]
    if not far:
        return _near(changed, n, rng)
    return rng.choice(far), "away"


def _near(changed: int, n: int, rng: random.Random) -> tuple[int, str]:
    distance = rng.randint(1, NEAR_MAX)
    sign = rng.choice((-1, 1))
    for step in (sign * distance, -sign * distance):
        line = min(max(1, changed + step), n)
        if line != changed:
            return line, "near"
    return changed, "exact"
