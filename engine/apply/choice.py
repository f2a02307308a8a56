"""Where the merge leaves a choice (engine.apply.structure.Choice), the candidate merges, and who
picks one: the loaded model, by how likely it finds each merged region, or the fixed rule. The
structure-aware merge poses a rename or a new definition, and which of two alike definitions a
rename replaces; the line rules (engine.apply.align, on their own or for the lines the
structure-aware merge hands them) pose replace or insert: an update line next to an anchor on
one side only, alike the file line beyond it, is an edit of that line or a new line beside it.

The model reads the file (a window of it around the region) and the update, then each
candidate's region: the lines where the candidates differ with :data:`CONTEXT` lines on each side,
then the instruction. The score (:data:`MEASURE`) is how likely the instruction is after the
region: by Bayes, what the instruction adds to the region's likelihood, less the instruction's own
likelihood, the same for every candidate. What the candidates share is read once: the window, one
forward (the prefix cache may keep it for the next session); then the candidates in sorted order,
each forwarded only from where it parts from the one before, the cache cropped back to there, and
the LM head run only on the rows that predict the instruction. Without an instruction no reading
differs and the rule decides, with no forward at all. The other measures (:data:`Measure`) read
the instruction before the region and are kept to be measured beside it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Literal, Sequence

from engine.apply.align import Alignment
from engine.apply.plan import plan
from engine.apply.structure import Choice, merged_alignment
from engine.core.choices import never_cancelled
from engine.core.errors import Cancelled
from engine.runtime.loaded import LoadedModel
from engine.runtime.prefix_cache import common_prefix

CONTEXT = 3  # lines of common context on each side of the differing region the model scores
FILE_WINDOW = 160  # file lines the model reads around the region (the update's, at most as many)
CHOICE_RULES = "Merge an update into a file: write the merged file."

Decider = Literal["model", "rule"]
# How a region's likelihood is measured: summed token log-likelihood, its mean per token, the sum
# less the region's own likelihood without the file, update and instruction (what they add), less
# its likelihood without the instruction alone (what the instruction adds), or that same quantity
# in Bayes' form (``explains``): how likely the instruction is after the region, which differs
# from it by the instruction's likelihood alone, the same for every region (:func:`explaining_scores`).
Measure = Literal["sum", "mean", "pmi", "instruction", "explains"]
# What the instruction adds, read as what explains it: the measure that follows what the user asked,
# each region read once with no LM head on its rows (measured beside the others:
# scripts/measure_apply_choices.py, results/apply/choices.json); without an instruction every
# reading scores 0 and the rule decides.
MEASURE: Measure = "explains"


@dataclass(frozen=True)
class Candidate:
    """One reading's merge: what it is in words and its alignment and merged text."""

    reading: str
    alignment: Alignment
    text: str


@dataclass(frozen=True)
class Decision:
    """What was written where the rules left a choice: ``by`` whom, the ``chosen`` reading (None:
    the rule placed none), the ``alternatives`` and the model's ``scores`` (per candidate, in
    :attr:`Candidate` order; empty when the rule decided)."""

    by: Decider
    chosen: str | None
    alternatives: tuple[str, ...]
    scores: tuple[float, ...] = ()

    def note(self) -> str:
        """The result's warning line."""
        others = "; ".join(self.alternatives)
        if self.chosen is None:
            return f"the rule placed none of: {others} (a model may decide: --mode auto with a model)"
        who = "the model" if self.by == "model" else "the rule"
        return f"{who} chose: {self.chosen} (the alternative: {others})"

    def json(self) -> dict:
        """What every front door reports (the CLI's ``breakdown.choice``, the HTTP answer's
        ``choice``, the language server's answer, each file of an answer): ``note`` in words."""
        return {"by": self.by, "chosen": self.chosen, "alternatives": list(self.alternatives),
                "scores": [round(s, 3) for s in self.scores], "note": self.note()}


# What scores candidate texts: (instruction, file, update, candidate texts) -> one score each.
Scorer = Callable[[str, Sequence[str], Sequence[str], Sequence[str]], Sequence[float]]


def candidates(file: Sequence[str], update: Sequence[str], language: str) -> tuple[Choice, list[Candidate]] | None:
    """The first choice the merge meets (the structure-aware merge's or the line rules') and each
    reading's merge; None when it meets none, or every reading merges to the same text (nothing
    to choose)."""
    return survey(file, update, language)[1]


def survey(file: Sequence[str], update: Sequence[str],
           language: str) -> tuple[Alignment, tuple[Choice, list[Candidate]] | None]:
    """The rule's merge (engine.apply.structure.merged_alignment) and :func:`candidates`, the
    merge run once more per reading only where there is a choice. One choice is posed: the first
    a model may decide (:attr:`Choice.model_decides`), else the first met (the rule's, named in
    the result); any other in the same merge keeps the rule's reading."""
    found: list[Choice] = []
    ruled = merged_alignment(file, update, language, choices=found)
    if not found:
        return ruled, None
    posed = next((c for c in found if c.model_decides), found[0])
    return ruled, _readings(file, update, language, posed)


def _readings(file: Sequence[str], update: Sequence[str], language: str,
              choice: Choice) -> tuple[Choice, list[Candidate]] | None:
    out = []
    for k, reading in enumerate(choice.readings):
        alignment = merged_alignment(file, update, language, picks={choice.key: k})
        if alignment.unplaced:
            continue
        out.append(Candidate(reading, alignment, merged_text(alignment, file, update)))
    if len(out) < 2 or len({c.text for c in out}) < 2:
        return None
    return choice, out


def merged_text(alignment: Alignment, file: Sequence[str], update: Sequence[str]) -> str:
    return "".join(step.text for step in plan(alignment, file, update))


def by_rule(choice: Choice, found: list[Candidate]) -> tuple[int | None, Decision]:
    """The fixed rule's pick (an index into ``found``; None: it places none)."""
    rule = choice.readings[choice.rule] if choice.rule is not None else None
    index = next((k for k, c in enumerate(found) if c.reading == rule), None)
    others = tuple(c.reading for k, c in enumerate(found) if k != index)
    return index, Decision("rule", rule if index is not None else None, others)


def decide(score: Scorer | None, choice: Choice, instruction: str, file: Sequence[str], update: Sequence[str],
           found: list[Candidate]) -> tuple[int | None, Decision]:
    """The model's pick where there is one (``score``), the choice is one a model may decide and
    it tells the readings apart, else the rule's."""
    if score is not None and choice.model_decides:
        index, decision = by_model(score, instruction, file, update, found)
        if len(set(decision.scores)) > 1:
            return index, decision
    return by_rule(choice, found)


def by_model(score: Scorer, instruction: str, file: Sequence[str], update: Sequence[str],
             found: list[Candidate]) -> tuple[int, Decision]:
    """The model's pick: the candidate whose region it finds likeliest (the first of equals)."""
    scores = list(score(instruction, file, update, [c.text for c in found]))
    best = max(range(len(found)), key=lambda k: (scores[k], -k))
    others = tuple(c.reading for k, c in enumerate(found) if k != best)
    return best, Decision("model", found[best].reading, others, tuple(scores))


def differing_region(texts: Sequence[str], context: int = CONTEXT) -> tuple[int, list[list[str]]]:
    """The first line of the region (0-based) and each text's lines from there on: the lines
    where the texts differ with ``context`` common lines before and after."""
    lines = [text.splitlines(keepends=True) for text in texts]
    shortest = min(len(ls) for ls in lines)
    head = 0
    while head < shortest and all(ls[head] == lines[0][head] for ls in lines):
        head += 1
    tail = 0
    while tail < shortest - head and all(ls[-1 - tail] == lines[0][-1 - tail] for ls in lines):
        tail += 1
    start = max(0, head - context)
    keep = max(0, tail - context)
    return start, [ls[start:len(ls) - keep] for ls in lines]


def model_scorer(loaded: LoadedModel, measure: Measure = MEASURE,
                 cancelled: Callable[[], bool] = never_cancelled) -> Scorer:
    """The scorer on ``loaded`` (an in-process runtime: one with sessions), by ``measure``; once
    ``cancelled`` returns True it stops within one forward (a prompt chunk; on transformers one
    layer) with :class:`engine.core.errors.Cancelled`."""
    def score(instruction: str, file: Sequence[str], update: Sequence[str], texts: Sequence[str]) -> list[float]:
        if measure == "explains":
            return explaining_scores(loaded, instruction, file, update, texts, cancelled)
        found = region_scores(loaded, instruction, file, update, texts,
                              baseline="bare" if measure == "pmi" else "uninstructed" if measure == "instruction"
                              else None, cancelled=cancelled)
        return [r.measured(measure) for r in found]

    return score


@dataclass(frozen=True)
class RegionScore:
    """A candidate region's summed token log-likelihood given the prompt, its token count and
    (where asked) its summed log-likelihood given a baseline prompt (:func:`region_scores`)."""

    total: float
    tokens: int
    bare: float = 0.0

    def measured(self, measure: Measure) -> float:
        if measure == "mean":
            return self.total / max(self.tokens, 1)
        if measure in ("pmi", "instruction"):
            return self.total - self.bare
        return self.total


def region_scores(loaded: LoadedModel, instruction: str, file: Sequence[str], update: Sequence[str],
                  texts: Sequence[str], baseline: str | None = None,
                  cancelled: Callable[[], bool] = never_cancelled) -> list[RegionScore]:
    """Each text's differing region scored under ``loaded``, given the file's window around it,
    the update and the instruction (last), and the common lines before it; ``baseline`` "bare":
    also given only those common lines, "uninstructed": also given all but the instruction."""
    prompts, ids = reading_prompts(loaded, instruction, file, update, texts, baseline)
    if baseline == "uninstructed" and prompts[0] == prompts[1]:  # no instruction: every region scores 0
        return [RegionScore(0.0, len(i), 0.0) for i in ids]
    found = _likelihoods(loaded, prompts, ids, cancelled)
    plain = found[1] if baseline is not None else [0.0] * len(ids)
    return [RegionScore(g, len(i), p) for g, i, p in zip(found[0], ids, plain)]


def reading_prompts(loaded: LoadedModel, instruction: str, file: Sequence[str], update: Sequence[str],
                    texts: Sequence[str], baseline: str | None = None) -> tuple[list[list[int]], list[list[int]]]:
    """The prompts of :func:`region_scores` (the instructed one first, then the ``baseline``'s)
    and each text's differing region, as token ids."""
    from engine.decoding.prompt import render

    start, regions = differing_region(texts)
    before = "".join(texts[0].splitlines(keepends=True)[max(0, start - CONTEXT):start])
    low = max(0, start - FILE_WINDOW // 2)
    window = "".join(file[low:low + FILE_WINDOW])
    shown = "".join(update[:FILE_WINDOW])
    asked = f"\nInstruction: {instruction.strip()}" if instruction.strip() else ""
    common = f"File:\n```\n{window}```\nUpdate:\n```\n{shown}```"

    def prompt(content: str) -> list[int]:
        messages = [{"role": "system", "content": CHOICE_RULES}, {"role": "user", "content": content}]
        return render(loaded.tokenizer, messages, "```\n" + before)

    ids = [list(loaded.tokenizer.encode("".join(region), add_special_tokens=False)) for region in regions]
    prompts = [prompt(common + asked)]  # the instruction last: all before it is shared
    if baseline is not None:
        prompts.append(prompt("Code:" if baseline == "bare" else common))
    return prompts, ids


INSTRUCTION_HEAD = "```\nInstruction:"  # what follows a region, before the instruction it is scored on


def explaining_scores(loaded: LoadedModel, instruction: str, file: Sequence[str], update: Sequence[str],
                      texts: Sequence[str], cancelled: Callable[[], bool] = never_cancelled) -> list[float]:
    """Each text's score as how likely ``instruction`` is after its differing region, given the
    file's window and the update before it: by Bayes, what the instruction adds to the region's
    likelihood, less the instruction's own likelihood, which is the same for every region. Each
    region is read once, in sorted order from where it parts from the one before (as
    :func:`_rests`), and the LM head runs only on the rows that predict the instruction's tokens;
    what comes before the regions is one forward. No instruction: every text scores 0."""
    asked = instruction.strip()
    if not asked:
        return [0.0] * len(texts)
    prompts, regions = reading_prompts(loaded, "", file, update, texts)
    encode = loaded.tokenizer.encode
    head = list(encode(INSTRUCTION_HEAD, add_special_tokens=False))
    said = list(encode(" " + asked, add_special_tokens=False))
    sequences = [ids + head + said for ids in regions]
    session = loaded.session()
    session.cancelled = cancelled
    try:
        session.append(prompts[0], "choice_prompt")
        return _instruction_likelihoods(session, sequences, len(said), cancelled)
    finally:
        session.close()


def _instruction_likelihoods(session, sequences: list[list[int]], scored: int,
                             cancelled: Callable[[], bool]) -> list[float]:
    """Each sequence's last ``scored`` tokens summed in log-likelihood after what the session
    holds and the sequence's earlier tokens. In sorted order, each sequence forwards only from
    where it parts from the one before (the cache cropped back to there), asking for the rows
    that predict its scored tokens alone."""
    import torch

    after = session.length
    path: list[int] = []  # the tokens the session holds after ``after``
    scores = [0.0] * len(sequences)
    for k in sorted(range(len(sequences)), key=lambda k: sequences[k]):
        if cancelled():  # (a backend that cannot stop inside a forward stops here)
            raise Cancelled("cancelled while the model decided a choice")
        sequence = sequences[k]
        keep = min(common_prefix(path, sequence), len(sequence) - scored - 1)
        session.crop(after + keep)
        first = len(sequence) - scored - 1  # the row that predicts the first scored token
        logits = session.append(sequence[keep:-1], "choice", rows=list(range(first - keep, len(sequence) - 1 - keep)))
        picked = torch.log_softmax(logits.float(), dim=-1).gather(
            1, torch.tensor(sequence[-scored:], dtype=torch.long).unsqueeze(1))
        scores[k] = float(picked.sum())
        path = sequence[:-1]
    session.crop(after)
    return scores


def _likelihoods(loaded: LoadedModel, prompts: list[list[int]], regions: list[list[int]],
                 cancelled: Callable[[], bool] = never_cancelled) -> list[list[float]]:
    """Per prompt, each region's summed token log-likelihood after it. What is common is read
    once: the prompts' common prefix is the session's first append (the prefix cache may restore
    it); each prompt's tail goes in one forward with the regions' common leading tokens (the
    context lines before they differ); then the regions' rests in order, each forwarding only
    what it does not share with the one before (:func:`_rests`)."""
    import torch

    common = _common_prefix(prompts)
    lead = _common_prefix(regions, keep_tail=False)
    rests = [ids[len(lead):] for ids in regions]
    session = loaded.session()
    session.cancelled = cancelled  # polled between prompt chunks and (transformers) between layers
    try:
        session.append(common, "choice_prompt")
        base = session.length
        out = []
        for prompt in prompts:
            tail = prompt[len(common):]
            rows = list(range(len(tail) - 1, len(tail) + len(lead)))  # each lead token's, then the next's
            head = torch.log_softmax(session.append(tail + lead, "choice", rows=rows).float(), dim=-1)
            shared = float(head[:len(lead)].gather(1, torch.tensor(lead, dtype=torch.long).unsqueeze(1)).sum())
            rest = _rests(session, rests, head[len(lead)], cancelled)
            session.crop(base)
            out.append([shared + r for r in rest])
        return out
    finally:
        session.close()


def _rests(session, rests: list[list[int]], first, cancelled: Callable[[], bool]) -> list[float]:
    """Each of ``rests`` (token ids after what the session holds) summed in log-likelihood, given
    ``first``, the log-probabilities of the token after the session's end. The rests are taken in
    sorted order, so a rest that begins as the one before does (two readings that keep the same
    function first) forwards only from where they part: the cache is cropped back to there. Of
    each forward's rows only the log-probabilities of the tokens some rest has there are kept."""
    import torch

    def kept(row, i: int) -> dict[int, float]:
        wanted = sorted({r[i] for r in rests if len(r) > i})
        return dict(zip(wanted, row[wanted].tolist()))

    after = session.length
    path: list[int] = []  # the tokens the session holds after ``after``
    known = [kept(first, 0)]  # known[i]: the log-probabilities of the tokens some rest has at i
    scores = [0.0] * len(rests)
    for k in sorted(range(len(rests)), key=lambda k: rests[k]):
        if cancelled():  # (a backend that cannot stop inside a forward stops here)
            raise Cancelled("cancelled while the model decided a choice")
        rest = rests[k]
        keep = common_prefix(path, rest)
        if keep < len(path):
            session.crop(after + keep)
            del path[keep:], known[keep + 1:]
        more = rest[len(path):len(rest) - 1]  # the tokens whose next token the rest still needs
        if more:
            logits = torch.log_softmax(session.append(more, "choice", all_logits=True).float(), dim=-1)
            known.extend(kept(row, len(path) + 1 + i) for i, row in enumerate(logits))
            path.extend(more)
        scores[k] = sum(known[i][t] for i, t in enumerate(rest))
    session.crop(after)
    return scores


def _common_prefix(seqs: list[list[int]], keep_tail: bool = True) -> list[int]:
    """The sequences' longest common prefix; ``keep_tail``: short of each one's last token (every
    prompt keeps a tail, whose last row's logits predict what follows it)."""
    n = min(common_prefix(seqs[0], s) for s in seqs)
    if keep_tail:
        n = max(0, min(n, min(len(s) for s in seqs) - 1))
    return seqs[0][:n]
