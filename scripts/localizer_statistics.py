"""Does an entropy-aware line statistic find the bug better than the shipped one (``total`` NLL)?

A token the model finds surprising but was unsure about anyway (a new identifier, a constant) is
weak evidence; one it was sure would be something else is strong. Per region code token, from the
one forward the localizer already runs (hintless selector prompt, transformers, the shipped
adapter), this records the NLL, the entropy H of the prediction and the regret (log p of the
argmax minus log p of the actual token), and ranks code lines (prose excluded, as shipped) by:

  total (shipped) / mean / max: the NLL's sum, mean and worst token;
  excess: sum of max(0, NLL - H); nll-ent: sum of NLL - H; maxexcess: the worst NLL - H;
  regret: sum of regrets; maxregret; regret>1, regret>2: sums of regrets above 1 or 2 nats.

Top-1 / top-3 of the first changed line without a cursor (``none``) and with the near cursor of
the benchmarks (``near``: within engine.decoding.localize.CURSOR_WINDOW lines, times the cursor prior at
CURSOR_SCALE, as plan_focus ranks). Measured: none is better enough to change the shipped
statistic (results/localize/statistics.json).

    OMP_NUM_THREADS=1 .venv/bin/python scripts/localizer_statistics.py humanevalfix-python,humanevalfix-js,heldout OUT.json
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any, Callable

import torch

from engine.api import Engine
from engine.core.lines import split_lines
from engine.decoding.localize import CURSOR_SCALE, CURSOR_WINDOW, cursor_prior, prompt_with_lines, prose_lines
from engine.decoding.prompt import PromptParts
from engine.evaluation.focus import focus_for
from engine.training.synth import first_changed_line

Token = tuple[float, float, float]  # (nll, entropy, regret), nats

STATISTICS: dict[str, Callable[[list[Token]], float]] = {
    "total": lambda t: sum(x[0] for x in t),
    "mean": lambda t: sum(x[0] for x in t) / len(t),
    "max": lambda t: max(x[0] for x in t),
    "excess": lambda t: sum(max(0.0, x[0] - x[1]) for x in t),
    "nll-ent": lambda t: sum(x[0] - x[1] for x in t),
    "maxexcess": lambda t: max(x[0] - x[1] for x in t),
    "regret": lambda t: sum(x[2] for x in t),
    "maxregret": lambda t: max(x[2] for x in t),
    "regret>1": lambda t: sum(x[2] for x in t if x[2] > 1.0),
    "regret>2": lambda t: sum(x[2] for x in t if x[2] > 2.0),
}


def cases_of(corpus: str) -> list[tuple[str, str, str, str, str]]:
    """(key, instruction, input, gold, language) per case; ``heldout``: train-selector's 40."""
    if corpus == "heldout":
        from engine.training.selector.evaluate import case_key
        from engine.training.synth import build_dataset

        return [(case_key(c), c.instruction, c.input, c.gold, c.language)
                for c in build_dataset(0, 80, seed=0).heldout[:40]]
    from engine.evaluation.corpora import load_corpus

    return [(c.id, c.instruction, c.input, c.gold, c.language) for c in load_corpus(corpus)]


def token_scores(loaded: Any, parts: PromptParts) -> list[list[Token]]:
    """Per region line, its code tokens' (nll, entropy, regret) in the hintless selector prompt."""
    ids, lines = prompt_with_lines(loaded.tokenizer, parts, None)
    positions = sorted(p for line in lines for p in line)
    session = loaded.session()
    try:
        logits = session.append(ids, "prefill", rows=[p - 1 for p in positions])
    finally:
        session.close()
    logp = torch.log_softmax(logits.float(), dim=-1)
    rows = torch.arange(len(positions))
    actual = logp[rows, torch.tensor([ids[p] for p in positions])]
    entropy = -(logp.exp() * logp).sum(-1)
    regret = logp.max(-1).values - actual
    by_position = dict(zip(positions, zip((-actual).tolist(), entropy.tolist(), regret.tolist())))
    return [[by_position[p] for p in line] for line in lines]


def hits(region: str, language: str, tokens: list[list[Token]], changed: int, near: int | None) -> dict[str, list[int]]:
    text = split_lines(region)
    prose = prose_lines(region, language)
    candidates = [i for i, t in enumerate(tokens, start=1) if t and text[i - 1].strip() and i not in prose]
    out = {}
    for name, statistic in STATISTICS.items():
        score = {line: statistic(tokens[line - 1]) for line in candidates}
        alone = sorted(candidates, key=lambda line: -score[line])
        window = [line for line in candidates if near is not None and abs(line - near) <= CURSOR_WINDOW]
        cursor = sorted(window, key=lambda line: -score[line] * cursor_prior(line - (near or 0), CURSOR_SCALE))
        out[name] = [changed in alone[:1], changed in alone[:3], changed in cursor[:1], changed in cursor[:3]]
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    torch.set_num_threads(1)
    engine = Engine.load("default", selector="auto", backend="transformers")
    loaded = engine.model_for("program")
    report: dict[str, Any] = {"command": "OMP_NUM_THREADS=1 .venv/bin/python scripts/localizer_statistics.py "
                              + " ".join(argv), "columns": ["none top-1", "none top-3", "near top-1", "near top-3"],
                              "corpora": {}}
    for corpus in argv[0].split(","):
        started = time.perf_counter()
        table: dict[str, list[int]] = {name: [0, 0, 0, 0] for name in STATISTICS}
        counted = 0
        for key, instruction, region, gold, language in cases_of(corpus):
            try:
                changed = first_changed_line(region, gold)
            except ValueError:
                continue
            near = focus_for("near", changed, len(split_lines(region)), key)
            tokens = token_scores(loaded, PromptParts(instruction=instruction, region=region, language=language))
            for name, row in hits(region, language, tokens, changed, near).items():
                table[name] = [a + int(b) for a, b in zip(table[name], row)]
            counted += 1
        report["corpora"][corpus] = {"cases": counted, "seconds": round(time.perf_counter() - started, 1),
                                     "rankings": table}
        print(corpus, counted, json.dumps(table), flush=True)
    with open(argv[1], "w", encoding="utf-8") as f:
        json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
