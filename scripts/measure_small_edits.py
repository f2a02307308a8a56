"""Program mode against ar on the small edits a new user tries first, and the localizer's share.

Cases: every ``examples/`` file with the README's instruction (with and without its ``--focus``)
and three small files written here: a 2-line ``add``, a one-line JavaScript ``isEven`` and an
off-by-one in a 5-line function. Per case and mode the edit runs ``--rounds`` times as a first
edit (``Engine.forget_prompts`` before each, the modes interleaved after ``Engine.prime``); the
medians are reported: the whole edit, the localizer's seconds and forwards, the prefill, and the
ratio ar / program (``x ar``). ``share`` is the localizer's seconds over program's edit. The
localizer's forward is also the program prompt's prefill (the edit reuses it from the prefix
cache), so ``own`` is what it costs beyond that: its seconds minus those of a plain prefill of the
same prompt in the same chunks (its LM-head rows and its cut), timed after each program edit;
``own share`` is that over program's edit. The arm ``program-all`` is program mode with the
localizer's forward on every region (``FEW_LINES`` 0, engine/decoding/localize.py), as it ran
before small regions went without it, interleaved with the others in the same run.

    OMP_NUM_THREADS=1 .venv/bin/python scripts/measure_small_edits.py --threads 1 --json results/localize/small_edits.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from engine.api import EditRequest, Engine, language_for
from engine.decoding import localize
from engine.settings import DEFAULTS, engine_arguments, with_flags

ROOT = Path(__file__).resolve().parent.parent
# name: (text, instruction, the file name its language comes from)
SMALL = {
    "add-2-lines": ("def add(a, b):\n    return a - b\n", "Fix the bug in add.", "add.py"),
    "isEven-js": ("const isEven = (n) => n % 2 === 1;\n", "Fix the bug in isEven.", "even.js"),
    "off-by-one-5-lines": ('def last(items):\n    """Return the last item."""\n    n = len(items)\n'
                           "    return items[n]\n\n", "Fix the off-by-one error in last.", "last.py"),
    "count-vowels-8-lines": ('def count_vowels(text):\n    """Count the vowels in text."""\n    vowels = "aeiou"\n'
                             "    count = 0\n    for ch in text.lower():\n        if ch in vowels:\n"
                             "            count -= 1\n    return count\n", "Fix the bug in count_vowels.", "vowels.py"),
}
EXAMPLES = {"buggy_add.py": ("Fix the bug in add.", 3), "buggy_stats.py": ("Fix the bug in mean.", 17)}


def cases() -> list[tuple[str, str, str, str, int | None]]:
    out = [(name, text, instruction, path, None) for name, (text, instruction, path) in SMALL.items()]
    for name, (instruction, focus) in EXAMPLES.items():
        text = (ROOT / "examples" / name).read_text()
        out += [(name, text, instruction, name, None), (f"{name} --focus {focus}", text, instruction, name, focus)]
    return out


class LocalizerReads:
    """Records the prompts the localizer forwards (``runtime.prompt_nll``), to time a plain
    prefill of each afterwards."""

    def __init__(self, runtime: Any):
        self.runtime, self.calls = runtime, []
        self.inner = runtime.prompt_nll
        runtime.prompt_nll = self

    def __call__(self, ids, positions, marks, cancelled):
        self.calls.append((list(ids), list(marks)))
        return self.inner(ids, positions, marks, cancelled)

    def plain_prefill_s(self, engine: Engine) -> float:
        """Seconds of the recorded prompts' prefills (their last rows only), as first reads."""
        seconds = 0.0
        for ids, marks in self.calls:
            engine.forget_prompts()
            start = time.perf_counter()
            self.inner(ids, [len(ids) - 1], marks, lambda: False)  # two LM-head rows, as a prefill has one
            seconds += time.perf_counter() - start
        self.calls.clear()
        return seconds


def one(engine: Engine, request: EditRequest, reads: LocalizerReads) -> dict[str, Any]:
    engine.forget_prompts()
    result = engine.edit(request)
    b = result.breakdown
    localize_s = b.get("localize_s", 0.0)
    plain_s = reads.plain_prefill_s(engine) if localize_s else 0.0
    return {"edit_s": result.timings["total_s"], "localize_s": localize_s, "own_s": max(0.0, localize_s - plain_s),
            "localize_forwards": b.get("localize_forwards", 0), "prefill_s": result.timings["prefill_s"],
            "output": result.output_text}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--backend", default="auto")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    settings = with_flags(DEFAULTS, {"threads": args.threads, "backend": args.backend})
    engine = Engine.load(**engine_arguments(settings))
    engine.prime()
    reads = LocalizerReads(engine.model_for("program").runtime)
    rows = []
    for name, text, instruction, path, focus in cases():
        base = EditRequest(text=text, instruction=instruction, mode="program", language=language_for(path),
                           focus_line=focus)
        runs: dict[str, list[dict[str, Any]]] = {"program": [], "program-all": [], "ar": []}
        for _ in range(args.rounds):
            for arm in runs:
                few = localize.FEW_LINES
                localize.FEW_LINES = 0 if arm == "program-all" else few
                try:
                    runs[arm].append(one(engine, replace(base, mode=arm.split("-")[0]), reads))
                finally:
                    localize.FEW_LINES = few
        keys = ("edit_s", "localize_s", "own_s", "localize_forwards", "prefill_s")
        med = {mode: {k: statistics.median(r[k] for r in rs) for k in keys} for mode, rs in runs.items()}
        program, ar, every = med["program"], med["ar"], med["program-all"]
        row = {"case": name, "lines": len(text.splitlines()), "program": program, "program-all": every, "ar": ar,
               "x_ar": round(ar["edit_s"] / program["edit_s"], 3), "all_x_ar": round(ar["edit_s"] / every["edit_s"], 3),
               "all_localize_share": round(every["localize_s"] / every["edit_s"], 3),
               "all_own_share": round(every["own_s"] / every["edit_s"], 3),
               "localize_share": round(program["localize_s"] / program["edit_s"], 3),
               "own_share": round(program["own_s"] / program["edit_s"], 3),
               "program_output": runs["program"][0]["output"], "program_all_output": runs["program-all"][0]["output"],
               "ar_output": runs["ar"][0]["output"]}
        rows.append(row)
        print(f"{name:28s} lines {row['lines']:3d}  program {program['edit_s']:.2f}s (localize "
              f"{program['localize_s']:.2f}s, {program['localize_forwards']:.0f} fwd, share {row['localize_share']:.2f}, "
              f"own {program['own_s']:.2f}s, own share {row['own_share']:.2f})"
              f"  ar {ar['edit_s']:.2f}s  x ar {row['x_ar']:.2f}  | program-all {every['edit_s']:.2f}s x ar "
              f"{row['all_x_ar']:.2f} share {row['all_localize_share']:.2f} own share {row['all_own_share']:.2f}",
              flush=True)
    if args.json:
        args.json.write_text(json.dumps({"command": " ".join(sys.argv), "backend": engine.loaded.runtime.describe(),
                                         "rounds": args.rounds, "cases": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
