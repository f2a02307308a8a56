"""What a user's edits will get on a configuration, in one plain sentence, for
``copy-as-decode doctor``: the mode that runs, whether it drafts, and the whole-edit ratio
against ar measured in this repository for that backend, verify rule and build.

Every ratio below is read from a results file (named with it) and shown in docs/benchmarks.md:
the embedded SmolLM2-135M model on a 2-core CPU, ``--threads 1``, free family (the model
decides), HumanEvalFix-Python, whole edit as the user waits for it. A combination with no such
run says "no measured figure" rather than borrow another's number; a user's own, larger model
is expected to gain more per copied token (a step costs more), which no run here measures.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from engine.core.modes import traits

# How many rows an exact verify holds on this build, as doctor asks it (the verify room under
# "exact" for at most UNBOUNDED drafted tokens): one row (llama.cpp's default x86 build, where
# two rows or more go to llamafile's sgemm), a bound (flash attention's tiled kernel from 64
# rows), or any size (transformers; llama.cpp built with GGML_LLAMAFILE=OFF).
ExactRows = Literal["one row", "bounded", "any"]
UNBOUNDED = 64

_ONE_ROW_FIX = "build with GGML_LLAMAFILE=OFF or use --verify argmax to draft"


@dataclass(frozen=True)
class Figure:
    """One measured whole-edit ratio: ar's seconds over the arm's, pooled over the cases."""

    ratio: float
    measured: str  # the arm and the corpus, in words
    source: str  # the results file (repository-relative) that holds every per-case record


@dataclass(frozen=True)
class Situation:
    """What decides the sentence: the backend, the mode ``auto`` (or the setting) resolves to,
    the verify rule it means there ("server" where the server checks drafts), how many rows an
    exact verify holds, whether a span selector was found, and the device."""

    backend: str
    mode: str
    rule: str
    exact_rows: ExactRows | None  # None on a server
    selector: bool
    device: str


@dataclass(frozen=True)
class Expectation:
    """The sentence and the figure behind it (None: no measured figure)."""

    sentence: str
    figure: Figure | None


# backend x mode x verify rule x exact rows -> the measured whole edit (the 2-core CPU runs of
# docs/benchmarks.md, "Free family per backend" and "Verify: exact or argmax").
FIGURES: dict[tuple[str, str, str, ExactRows], Figure] = {
    ("transformers", "program", "exact", "any"): Figure(
        2.02, "program mode near the cursor, 164 HumanEvalFix-Python cases",
        "results/free/transformers_humanevalfix-python_164.json"),
    ("transformers", "speculative", "exact", "any"): Figure(
        1.86, "speculative, 40 HumanEvalFix-Python cases", "results/free/transformers_humanevalfix-python_40.json"),
    ("llamacpp", "program", "exact", "one row"): Figure(
        1.39, "program mode near the cursor, 40 HumanEvalFix-Python cases",
        "results/free/llamacpp_humanevalfix-python_40.json"),
    ("llamacpp", "program", "exact", "bounded"): Figure(
        1.05, "program mode near the cursor with flash attention on, 40 HumanEvalFix-Python cases",
        "results/free/llamacpp-flash-on_humanevalfix-python_40.json"),
    ("llamacpp", "speculative", "exact", "one row"): Figure(
        1.00, "speculative, 40 HumanEvalFix-Python cases", "results/free/llamacpp-speculative_humanevalfix-python_40.json"),
    ("llamacpp", "speculative", "exact", "bounded"): Figure(
        0.99, "speculative with flash attention on, 40 HumanEvalFix-Python cases",
        "results/free/llamacpp-flash-on_humanevalfix-python_40.json"),
    ("llamacpp", "speculative", "argmax", "one row"): Figure(
        0.99, "speculative under verify argmax, 164 HumanEvalFix-Python cases on a loaded machine",
        "results/verify/free-humanevalfix-python-llamacpp-ar-vs-argmax.json"),
}


# A vLLM server started with n-gram speculation, against a plain one, both through the engine:
# ar's pooled whole-edit time, plain over n-gram (scripts/measure_vllm_ngram.py).
SERVER_NGRAM = Figure(3.08, "a vLLM server with n-gram speculation against a plain one, ar, 8 HumanEvalFix-Python "
                            "cases", "results/backends/vllm_ngram.json")


def exact_rows(room: int) -> ExactRows:
    """The rows an exact verify holds, from its room (drafted tokens, asked for at most UNBOUNDED)."""
    return "one row" if room == 0 else "any" if room >= UNBOUNDED else "bounded"


def figure_for(situation: Situation) -> Figure | None:
    """The measured figure for ``situation``, or None where no run here measured it (a GPU,
    a server, pld, or a combination no benchmark ran)."""
    if situation.device != "cpu" or situation.exact_rows is None:
        return None
    return FIGURES.get((situation.backend, situation.mode, situation.rule, situation.exact_rows))


def _expected(figure: Figure | None) -> str:
    return f"{figure.ratio:.2f}x ar expected" if figure is not None else "no measured figure"


def expect(situation: Situation) -> Expectation:
    """One plain sentence saying what an edit will get here, and the figure it rests on."""
    figure = figure_for(situation)
    if situation.exact_rows is None:
        drafted_by_server = not traits(situation.mode).uses_selector
        return Expectation(_on_server(situation), SERVER_NGRAM if drafted_by_server else None)
    kind = traits(situation.mode)
    if kind.writes_text and not kind.text_drafted:
        return Expectation(f"plain decoding: mode {situation.mode} runs one token per forward", None)
    if kind.uses_selector and not kind.given_program:
        with_what = "the span selector" if situation.selector else "the base model (no span selector: it rarely finishes)"
        return Expectation(f"program mode with {with_what}: copies spans of the input, {_expected(figure)}", figure)
    if kind.drafts_from_input:
        if situation.rule == "exact" and situation.exact_rows == "one row":
            return Expectation(f"plain decoding: this {_name(situation.backend)} build verifies one row exactly, so "
                               f"speculative mode drafts nothing ({_ONE_ROW_FIX}), {_expected(figure)}", figure)
        lossy = " (verify argmax: an output may differ from ar's at a near-tie)" if situation.rule == "argmax" else ""
        return Expectation(f"speculative: drafts from the input{lossy}, {_expected(figure)}", figure)
    return Expectation(f"mode {situation.mode}: {_expected(figure)}", figure)


def _on_server(situation: Situation) -> str:
    """A server returns tokens, not logits: the engine's own drafts cannot run there."""
    if traits(situation.mode).uses_selector:
        with_what = "the span selector served as a LoRA module" if situation.selector else "the served base model"
        return f"program mode with {with_what}: one request per copy, no measured figure"
    return ("one greedy completion per edit: against a vLLM server speculative mode sends what ar sends, and it "
            "drafts only if the server was started with n-gram speculation (--speculative-config "
            "'{\"method\": \"ngram\", ...}'), which this client cannot see; such a server measured "
            f"{SERVER_NGRAM.ratio:.2f}x a plain one's speed, the same outputs")


def _name(backend: str) -> str:
    return {"llamacpp": "llama.cpp"}.get(backend, backend)
