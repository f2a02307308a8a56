"""Training examples for the span selector: the token sequence the program decoder feeds for a
synthetic case in forced mode (prompt, chosen tokens, forced literals, spliced copies), recorded
by the decoder itself (``engine.training.record``), so training and inference cannot drift.

The loss is on model-chosen positions only: every other position's label is ``IGNORE`` (-100,
what transformers' causal-LM loss skips), so the adapter never learns to predict a forced tag
or a copied line it will never have to choose.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from engine.api import EditRequest
from engine.language.oracle import line_oracle
from engine.runtime.loaded import LoadedModel

IGNORE = -100


@dataclass(frozen=True)
class TrainExample:
    """One training sequence. ``labels[i]`` is ``ids[i]`` where the model chose that token, else IGNORE."""

    ids: tuple[int, ...]
    labels: tuple[int, ...]
    kind: str = ""
    language: str = ""
    source: str = ""

    @property
    def targets(self) -> int:
        return sum(1 for t in self.labels if t != IGNORE)


def labels_for(ids: Sequence[int], chosen: Sequence[bool]) -> list[int]:
    """Labels that keep the loss on chosen positions only (``chosen`` aligned with ``ids``)."""
    if len(ids) != len(chosen):
        raise ValueError(f"fed sequence has {len(ids)} ids but {len(chosen)} chosen flags")
    return [int(t) if c else IGNORE for t, c in zip(ids, chosen)]


def example_from_fed(fed: Any, kind: str = "", language: str = "", source: str = "") -> TrainExample:
    """A :class:`TrainExample` from an ``engine.training.record.FedSequence`` (``ids`` and ``chosen``)."""
    return TrainExample(tuple(int(t) for t in fed.ids), tuple(labels_for(fed.ids, fed.chosen)), kind, language, source)


def training_request(case: Any) -> Any:
    """The forced-mode request whose fed sequence is the training example of a synthetic case:
    the oracle line program, the case's focus hint (None in part of the data) and the short
    selector prompt the adapted model sees at inference."""
    return EditRequest(text=case.input, instruction=case.instruction, mode="forced",
                       program=line_oracle(case.input, case.gold), focus_line=case.focus_line,
                       language=case.language, prompt_style="selector")


@dataclass
class RecordedSet:
    examples: list[TrainExample] = field(default_factory=list)
    too_long: int = 0  # sequences dropped because they exceed max_tokens (or could not be recorded)
    no_target: int = 0  # sequences with no chosen token (nothing to learn)

    def add(self, example: TrainExample, max_tokens: int) -> None:
        """Keep ``example``, or count why it is dropped."""
        if len(example.ids) > max_tokens:
            self.too_long += 1
        elif example.targets == 0:
            self.no_target += 1
        else:
            self.examples.append(example)


def recording_model(loaded: Any) -> Any:
    """A stand-in model for recording: in forced mode the teacher picks every token from the
    program and the grammar, never from the logits, so the fed sequence does not depend on the
    model's weights, only on its tokenizer and vocabulary size. A one-layer model of the same
    vocabulary makes recording ~20x faster than running the real model's forwards for nothing;
    :func:`record_examples` checks the claim on its first case against the real model."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from engine.runtime.backends.transformers_backend import TransformersRuntime

    config = LlamaConfig(vocab_size=loaded.vocab_size, hidden_size=16, intermediate_size=16, num_hidden_layers=1,
                         num_attention_heads=1, num_key_value_heads=1, tie_word_embeddings=True,
                         max_position_embeddings=int(getattr(loaded.model.config, "max_position_embeddings", 8192)))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = LlamaForCausalLM(config).eval()
    return LoadedModel(name=f"{loaded.name} (recording)", model=model, tokenizer=loaded.tokenizer, device="cpu",
                       dtype=torch.float32, runtime=TransformersRuntime(model, "cpu"))


class RecordingMismatch(RuntimeError):
    """The stand-in model fed other tokens than the real one: forced mode now depends on logits."""


def record_examples(loaded: Any, cases: Sequence[Any], max_tokens: int,
                    on_case: Callable[[int], None] | None = None, fast: bool = True) -> RecordedSet:
    """Record every case through the program decoder (``engine.training.record.record_fed_sequence``);
    sequences longer than ``max_tokens`` are dropped (truncating would cut the program off).
    ``fast`` records on :func:`recording_model` after checking the first case against ``loaded``."""
    from engine.training.record import record_fed_sequence  # lazy: loads torch; train.py, read by --help, imports this module

    recorder = loaded
    if fast and cases:
        recorder = recording_model(loaded)
        real = record_fed_sequence(loaded, training_request(cases[0]))
        stand_in = record_fed_sequence(recorder, training_request(cases[0]))
        if (real.ids, real.chosen) != (stand_in.ids, stand_in.chosen):
            raise RecordingMismatch("forced mode fed different tokens on a stand-in model than on the real one; "
                                    "record with fast=False (the decoder's forced mode now reads the logits)")
    recorded = RecordedSet()
    for i, case in enumerate(cases):
        fed = record_fed_sequence(recorder, training_request(case))
        recorded.add(example_from_fed(fed, case.kind, case.language, case.source), max_tokens)
        if on_case is not None:
            on_case(i + 1)
    return recorded


def cases_fingerprint(cases: Iterable[Any]) -> str:
    """Hash of what a recording depends on in the cases (so a cached recording is reused only
    for the same data)."""
    h = hashlib.sha256()
    for c in cases:
        h.update(json.dumps([c.input, c.gold, c.instruction, c.focus_line, c.language]).encode("utf-8"))
    return h.hexdigest()[:16]


def examples_fingerprint(examples: Sequence[TrainExample]) -> str:
    h = hashlib.sha256()
    for e in examples:
        h.update(json.dumps([e.ids, e.labels]).encode("utf-8"))
    return h.hexdigest()[:16]


def write_examples(path: Path, recorded: RecordedSet, meta: dict[str, Any]) -> None:
    """JSON lines: a header (``meta`` + drop counts), then one example per line."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        fh.write(json.dumps({"meta": meta, "too_long": recorded.too_long, "no_target": recorded.no_target}) + "\n")
        for e in recorded.examples:
            fh.write(json.dumps(asdict(e)) + "\n")
    tmp.replace(path)


def read_examples(path: Path, meta: dict[str, Any]) -> RecordedSet | None:
    """The cached recording at ``path`` if it was made with the same ``meta``, else None."""
    if not path.is_file():
        return None
    with path.open(encoding="utf-8") as fh:
        header = json.loads(fh.readline() or "{}")
        if header.get("meta") != meta:
            return None
        examples = []
        for line in fh:
            raw = json.loads(line)
            examples.append(TrainExample(tuple(raw["ids"]), tuple(raw["labels"]), raw["kind"], raw["language"], raw["source"]))
    return RecordedSet(examples, int(header.get("too_long", 0)), int(header.get("no_target", 0)))
