"""The training record of the span selector's data, and a built dataset with its statistics."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class SynthCase:
    """One synthetic edit: turn ``input`` into ``gold`` following ``instruction``.

    ``changed_line`` is the 1-based first input line the gold changes (an insertion counts at the
    line it precedes); ``focus_line`` is the hint shown in training on a seeded share of the cases
    (else ``None``), placed as a cursor would be (:mod:`engine.training.synth.cursor`): on that line about
    half the time, else 1-3 lines from it or on a farther line the edit does not touch. ``split`` is ``"train"`` or ``"heldout"``; held-out cases come from
    whole source files that no training case comes from.
    """

    input: str
    gold: str
    instruction: str
    kind: str
    language: str
    source: str
    license: str
    split: str
    changed_line: int
    focus_line: int | None

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False)

    @classmethod
    def from_json(cls, line: str) -> "SynthCase":
        return cls(**json.loads(line))


@dataclass
class SynthDataset:
    train: list[SynthCase]
    heldout: list[SynthCase]
    stats: dict = field(default_factory=dict)

    def write(self, folder: Path) -> dict[str, Path]:
        """Write ``train.jsonl``, ``heldout.jsonl`` and ``stats.json`` into ``folder``; returns their paths."""
        folder.mkdir(parents=True, exist_ok=True)
        paths = {"train": folder / "train.jsonl", "heldout": folder / "heldout.jsonl", "stats": folder / "stats.json"}
        for split in ("train", "heldout"):
            with paths[split].open("w", encoding="utf-8", newline="\n") as handle:
                for case in getattr(self, split):
                    handle.write(case.to_json() + "\n")
        paths["stats"].write_text(json.dumps(self.stats, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        return paths


def read_cases(path: Path) -> list[SynthCase]:
    """The cases of one JSONL file written by :meth:`SynthDataset.write`."""
    with path.open(encoding="utf-8") as handle:
        return [SynthCase.from_json(line) for line in handle if line.strip()]
