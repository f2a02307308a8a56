"""A corpus case's tests as a check command, for ``bench edits --candidates K --check tests``:

    python -m engine.bench.corpus_check LANGUAGE TEST_FILE CANDIDATE [--timeout S]

runs TEST_FILE's test code on the CANDIDATE file exactly as pass@1 does (engine.bench.runner:
candidate + "\\n" + test, isolated, with a timeout) and exits 0 when it passes, 1 otherwise, so the
benchmark's candidates go through the same check runner (engine.candidates.check) users get."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from engine.bench.runner import run_tests
from engine.evaluation.corpora import EditCase


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine.bench.corpus_check")
    parser.add_argument("language", choices=("python", "javascript"))
    parser.add_argument("test", type=Path)
    parser.add_argument("candidate", type=Path)
    parser.add_argument("--timeout", type=float, default=15.0)
    args = parser.parse_args(argv)
    case = EditCase(id="check", corpus="check", language=args.language, input="", gold="", instruction="",
                    test=args.test.read_text(encoding="utf-8"))
    outcome = run_tests(case, args.candidate.read_text(encoding="utf-8"), args.timeout)
    print(outcome.detail or outcome.status)
    return 0 if outcome.passed else 1


if __name__ == "__main__":
    sys.exit(main())
