"""Natural wordings of "fix the bug" (the instructed edits carry their own instruction)."""

from __future__ import annotations

import random

FIX_INSTRUCTIONS = (
    "Fix the bug.",
    "Fix the bug in this function.",
    "Fix bugs in {name}.",
    "Fix the bug in `{name}`.",
    "There is a bug in this code. Fix it.",
    "This function has a bug; please fix it.",
    "Find and fix the bug.",
    "Correct the mistake in `{name}`.",
    "{name} gives wrong results. Fix it.",
    "Something is wrong in this function; fix it.",
    "Fix the error in the code.",
    "Repair `{name}` so it works correctly.",
)


def fix_instruction(function_name: str, rng: random.Random) -> str:
    """A "Fix the bug" variant, naming the function (its last dotted part) where the wording does."""
    return rng.choice(FIX_INSTRUCTIONS).format(name=function_name.rsplit(".", 1)[-1])
