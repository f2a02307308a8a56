"""The apply selector's training cases: every update style, in Python, TypeScript/JavaScript and
C, cut from the training sources (engine.training.apply.sources, disjoint from the benchmark's)
at sizes around one window's, a share of them with an instruction (an apply client may send one).
"""

from __future__ import annotations

import random
from typing import Callable

from engine.training.apply.sources import training_files
from engine.training.apply.updates import STYLES, ApplyCase, make_case

LANGUAGES = ("python", "typescript", "c")
SIZES = (20, 40, 80, 150, 300)
INSTRUCTION_SHARE = 0.25
INSTRUCTIONS = ("Apply the suggested change.", "Merge the reviewer's edit.", "Update the code as shown.",
                "Fix the bug as in the snippet.", "Apply this patch from the chat.")


def training_cases(n: int, seed: int = 0,
                   progress: Callable[[int, int], None] | None = None) -> list[tuple[ApplyCase, str]]:
    """``n`` cases (each with its instruction, often none), the language, style and size taking
    turns; a case the sources cannot give is tried at the next seed."""
    files = {language: training_files(language) for language in LANGUAGES}
    rng = random.Random(f"apply-train-{seed}")
    out: list[tuple[ApplyCase, str]] = []
    turn = 0
    while len(out) < n:
        language = LANGUAGES[turn % len(LANGUAGES)]
        style = STYLES[(turn // len(LANGUAGES)) % len(STYLES)]
        size = SIZES[(turn // (len(LANGUAGES) * len(STYLES))) % len(SIZES)]
        turn += 1
        if not files[language]:
            continue
        for attempt in range(10):
            case = make_case(files[language], language, style, size, seed * 1_000_000 + turn * 10 + attempt)
            if case is not None:
                instruction = rng.choice(INSTRUCTIONS) if rng.random() < INSTRUCTION_SHARE else ""
                out.append((case, instruction))
                break
        if progress is not None:
            progress(len(out), n)
    return out
