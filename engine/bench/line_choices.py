"""Replace or insert: how the line rules (engine.apply.align) read an update line that stands
next to an anchor on one side only and is a variant of the file line there. The rule pairs the
two (:data:`engine.apply.align.PAIR_RATIO`, :func:`engine.core.lines.near_copy`): the update's
line replaces the file's (an edited line); below the ratio it is inserted beside it (a new line).

Cases come in twins cut from the same file line ``L`` of a source no training case is cut from
(engine.bench.apply_shapes.sources: Python's standard library, the JDK, code-server's
JavaScript, Rust's standard library, Git's contrib Go). ``L'`` is ``L`` with one to four of its
words or numbers changed (words of the same file), so that the twins span the similarity range:

* ``replace``: the truth is ``L`` edited into ``L'``;
* ``insert-shown``: the truth is ``L'`` added beside ``L``, and the update shows ``L`` as its
  context (a second import, assignment or call next to the first one);
* ``insert-hidden``: the truth is ``L'`` added beside ``L`` on the side away from the context
  the update shows: the update is the ``replace`` twin's, letter for letter.

Each is written in three shapes (:data:`SIDES`): context after the changed line only, before
it only, or on both sides (two lines each), with marker comments around it or none. Each case
carries the similarity of ``L'`` to the file line the rule would pair it with (the one next to
the anchor on the open side; ``L`` itself where the update does not show it), and the
instruction a user would write beside the update (:func:`said`): the only place the truth shows,
as the user would say it.
"""

from __future__ import annotations

import difflib
import random
import re
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

from engine.apply.align import PAIR_RATIO
from engine.bench.apply_rules import rule_row
from engine.bench.apply_shapes import COMMENT, MARKER, _broken, _statement_rows, sources
from engine.training.apply.updates import KEYWORDS, ApplyCase

LANGUAGES = ("python", "java", "javascript", "rust", "go")
SIDES = ("after", "before", "both")
TRUTHS = ("replace", "insert-shown", "insert-hidden")
BUCKETS = tuple(round(0.1 * k, 1) for k in range(11))  # [0.0, 0.1) ... [0.9, 1.0]
MAX_FILE_LINES = 800  # files cut to this many lines around the changed one (the merge is the same)
CONTEXT = 2  # context lines the update shows on a side
_WORD = re.compile(r"\b[A-Za-z_]\w{2,}\b|\b\d+\b")


@dataclass(frozen=True)
class LineCase:
    """One twin: the apply case, its truth and shape, and the similarity of the update's line to
    ``L`` (``twin``) and to the file line the rule pairs it with (``paired``; ``None`` where the
    update shows context on both sides)."""

    case: ApplyCase
    truth: str
    side: str
    markers: bool
    twin: float
    paired: float | None
    instruction: str = ""
    short: str = ""  # the same ask in fewer words: only the verb and the new line (:func:`said`)


def said(truth: str, old: str, new: str, after: bool = True, short: bool = False) -> str:
    """What a user asks for with the update: ``Change `L` to `L'`.`` for an edit, ``Add `L'`
    after `L`.`` (or before) for a new line; ``short``: ``Change that line to `L'`.`` and ``Add
    the line `L'`.`` (the old line unquoted); lines stripped."""
    if short:
        return f"Change that line to `{new.strip()}`." if truth == "replace" else f"Add the line `{new.strip()}`."
    if truth == "replace":
        return f"Change `{old.strip()}` to `{new.strip()}`."
    return f"Add `{new.strip()}` {'after' if after else 'before'} `{old.strip()}`."


def ratio(a: str, b: str) -> float:
    """The near-copy similarity of two lines (what engine.core.lines.near_copy thresholds)."""
    return difflib.SequenceMatcher(None, a.strip(), b.strip(), autojunk=False).ratio()


def variant(line: str, words: Sequence[str], changes: int, rng: random.Random) -> str | None:
    """``line`` with ``changes`` of its words or numbers replaced (by other words of its file, a
    number by the next one); None when it has too few."""
    spots = [m for m in _WORD.finditer(line) if m.group() not in KEYWORDS]
    if len(spots) < changes:
        return None
    out = line
    for m in sorted(rng.sample(spots, changes), key=lambda m: -m.start()):
        word = m.group()
        new = str(int(word) + 1) if word.isdigit() else rng.choice([w for w in words if w != word] or [word + "2"])
        out = out[:m.start()] + new + out[m.end():]
    return out if out != line else None


def _usable(lines: list[str], i: int, counts: dict[str, int], statements: set[int]) -> bool:
    """Line ``i`` and two lines each side: code, the line one whole statement (tree-sitter's)
    unique in its file, each side with a line unique too."""
    if i not in statements or i < CONTEXT + 1 or i + CONTEXT + 1 >= len(lines):
        return False
    near = lines[i - CONTEXT - 1:i + CONTEXT + 2]
    if any(not ln.strip() for ln in near):
        return False
    line = lines[i].strip()
    if len(line) < 12 or counts[line] != 1:
        return False
    unique = [counts[ln.strip()] == 1 and any(c.isalnum() for c in ln) for ln in lines]
    return any(unique[i - CONTEXT - 1:i - 1]) and any(unique[i + 2:i + CONTEXT + 2]) and unique[i - 1] and unique[i + 1]


def _marker(language: str, indent: str) -> str:
    return f"{indent}{COMMENT.get(language, '//')} {MARKER}\n"


def twins(language: str, name: str, lines: list[str], i: int, new: str, tag: str = "") -> Iterator[LineCase]:
    """Every truth, side and marker setting for ``L = lines[i]`` and ``L' = new``."""
    old = lines[i]
    indent = old[:len(old) - len(old.lstrip())]
    before, after = lines[i - CONTEXT:i], lines[i + 1:i + 1 + CONTEXT]
    for truth in TRUTHS:
        for side in SIDES:
            if side == "both" and truth == "insert-hidden":
                continue  # with context on both sides the update shows L
            # where L' goes: in place of L, or after L (the update shows L before it, or the context
            # after hides it) or before L (the update shows L after it, or the context before hides it)
            after_l = (side == "both" or (side == "before") == (truth == "insert-shown"))
            if truth == "replace":
                gold = [*lines[:i], new, *lines[i + 1:]]
                shown = [*before, new, *after]
                paired = old
            elif after_l:
                gold = [*lines[:i + 1], new, *lines[i + 1:]]
                shown = [*before[1:], old, new, *after]
                paired = lines[i + 1] if truth == "insert-shown" else old
            else:
                gold = [*lines[:i], new, *lines[i:]]
                shown = [*before, new, old, *after[:-1]]
                paired = lines[i - 1] if truth == "insert-shown" else old
            if side == "after":
                at = shown.index(new)
                shown = shown[at:at + CONTEXT + 1]
            elif side == "before":
                at = shown.index(new)
                shown = shown[at - CONTEXT:at + 1]
            for markers in (False, True):
                update = [_marker(language, indent), *shown, _marker(language, indent)] if markers else shown
                label = f"{language}-{truth}-{side}-{'markers' if markers else 'bare'}-{name}:{i + 1}{tag}"
                yield LineCase(ApplyCase(label, language, f"{truth}/{side}", len(lines), "".join(lines),
                                         "".join(update), "".join(gold)),
                               truth, side, markers, round(ratio(new, old), 3),
                               None if side == "both" else round(ratio(new, paired), 3),
                               said(truth, old, new, after_l), said(truth, old, new, short=True))


def line_cases(per_language: int = 20, seed: int = 0,
               languages: Sequence[str] = LANGUAGES) -> Iterator[LineCase]:
    """``per_language`` file lines of each language's sources (seeded), each with variants of one
    to four changed words, every twin of each."""
    for language in languages:
        files = list(sources(language))
        rng = random.Random(f"{seed}-{language}-lines")
        rng.shuffle(files)
        made = 0
        for source in files:
            if made >= per_language:
                break
            lines = source.text.splitlines(keepends=True)
            if _broken(source.text, language):
                continue
            statements = _statement_rows(language, source.text)
            counts: dict[str, int] = {}
            for ln in lines:
                counts[ln.strip()] = counts.get(ln.strip(), 0) + 1
            spots = [i for i in range(len(lines)) if _usable(lines, i, counts, statements)]
            if not spots:
                continue
            i = rng.choice(spots)
            low = max(0, min(i - MAX_FILE_LINES // 2, len(lines) - MAX_FILE_LINES))
            cut, at = lines[low:low + MAX_FILE_LINES], i - low
            words = sorted({m.group() for ln in cut for m in _WORD.finditer(ln)
                            if not m.group().isdigit() and m.group() not in KEYWORDS})
            seen: set[str] = set()
            for changes in (1, 2, 3, 4):
                new = variant(cut[at], words, changes, rng)
                if new is None or new in seen or counts.get(new.strip(), 0):
                    continue
                made_twins = list(twins(language, source.name, cut, at, new, f"/{changes}"))
                if not any(_broken(lc.case.gold, language) for lc in made_twins):
                    seen.add(new)
                    yield from made_twins
            made += bool(seen)


def bucket(value: float) -> str:
    """The similarity bucket's label (``0.5-0.6``; 1.0 goes with 0.9)."""
    low = min(int(value * 10), 9) / 10
    return f"{low:.1f}-{low + 0.1:.1f}"


def measure(cases: Sequence[LineCase], arms: Sequence[str] = ("lines",)) -> dict[str, Any]:
    """Each arm on every case: rows (right, wrong and written, refused; for ``structure``, what
    ``auto`` runs, the choice it meets: :func:`choice_verdict`), and tallies by truth, side and
    similarity bucket (of the paired lines; of ``L`` and ``L'`` where the update shows both
    sides)."""
    rows = []
    for lc in cases:
        for arm in arms:
            row = rule_row(arm, lc.case)
            verdict, met = choice_verdict(lc.case) if arm == "structure" else (None, None)
            rows.append({"case": lc.case.name, "arm": arm, "truth": lc.truth, "side": lc.side,
                         "markers": lc.markers, "twin": lc.twin, "paired": lc.paired,
                         "bucket": bucket(lc.paired if lc.paired is not None else lc.twin),
                         "pairs": (lc.paired if lc.paired is not None else lc.twin) >= PAIR_RATIO,
                         "right": row["exact"], "whitespace": row["whitespace"], "wrong": row["wrong"],
                         "refused": row["refused"],
                         "choice": None if met is None else f"{met['kind']}: {verdict}"})
    return {"rows": rows, "tally": tally(rows)}


def _counts(rows: list[dict[str, Any]]) -> dict[str, int]:
    out = {"n": len(rows), "right": sum(r["right"] for r in rows), "whitespace": sum(r["whitespace"] for r in rows),
           "wrong": sum(r["wrong"] for r in rows), "refused": sum(r["refused"] for r in rows)}
    if rows and rows[0]["arm"] == "structure":  # (the arm that surveys the choices)
        out["choice"] = sum(r["choice"] is not None for r in rows)
        out["wrong_other_reading_right"] = sum(r["wrong"] and r["choice"] == "line: other" for r in rows)
    return out


def tally(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per arm, side and truth: the counts overall and by bucket."""
    out: dict[str, Any] = {}
    for arm in dict.fromkeys(r["arm"] for r in rows):
        for side in SIDES:
            for truth in TRUTHS:
                mine = [r for r in rows if r["arm"] == arm and r["side"] == side and r["truth"] == truth]
                if not mine:
                    continue
                by = {b: _counts([r for r in mine if r["bucket"] == b])
                      for b in sorted(dict.fromkeys(r["bucket"] for r in mine))}
                out.setdefault(arm, {}).setdefault(side, {})[truth] = {**_counts(mine), "by_bucket": by}
    return out



def choice_verdict(case: ApplyCase) -> tuple[str | None, dict[str, Any] | None]:
    """The first choice the merge ``auto`` runs meets on ``case`` (engine.apply.choice.survey):
    whose it is (``line``: the line rules' replace or insert; ``structure``), and which reading
    merges to the gold: ``rule`` (the rule's), ``other`` (only the other's), ``neither``; (None,
    None) where it meets none."""
    from engine.apply.choice import survey

    _, found = survey(case.file.splitlines(keepends=True), case.update.splitlines(keepends=True), case.language)
    if found is None:
        return None, None
    choice, readings = found
    right = [c.reading for c in readings if c.text == case.gold]
    rule = choice.readings[choice.rule] if choice.rule is not None else None
    verdict = "rule" if rule in right else "other" if right else "neither"
    return verdict, {"kind": "line" if choice.key < 0 else "structure", "readings": list(choice.readings),
                     "rule": rule, "right": right}


def firing(cases: Sequence[ApplyCase]) -> dict[str, Any]:
    """How often the merge ``auto`` runs meets a choice on ``cases`` (the bench's own: what a model
    decision would cost), by whose it is, and for the line rules' whether the rule's reading or
    the other merges to the gold."""
    out: dict[str, Any] = {"cases": len(cases), "line": 0, "structure": 0, "line_rule_right": 0,
                           "line_other_right": 0, "line_neither": 0, "line_cases": []}
    for case in cases:
        verdict, met = choice_verdict(case)
        if met is None:
            continue
        out[met["kind"]] += 1
        if met["kind"] == "line":
            out[f"line_{verdict}" if verdict == "neither" else f"line_{verdict}_right"] += 1
            out["line_cases"].append({"case": case.name, **met})
    return out


_LINES = re.compile(r"lines? (\d+)(?:-(\d+))?")


def bench_instruction(case: ApplyCase, reading: str, short: bool = False) -> str:
    """What a user would write for the change a bench case (which carries no instruction) makes
    at a line choice whose reading names file lines (``replace lines 11-12``): :func:`said` for the
    first difference between the file and the gold that touches those lines, its lines joined;
    "" where none does."""
    found = _LINES.search(reading)
    if found is None:
        return ""
    low, high = int(found.group(1)) - 1, int(found.group(2) or found.group(1))
    file, gold = case.file.splitlines(), case.gold.splitlines()
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, file, gold, autojunk=False).get_opcodes():
        if tag == "equal" or i2 < low or i1 > high:
            continue
        old = " ".join(ln.strip() for ln in file[i1:i2] if ln.strip())
        new = " ".join(ln.strip() for ln in gold[j1:j2] if ln.strip())
        if tag == "replace" and old and new:
            return said("replace", old, new, short=short)
        if tag == "insert" and new and i1 > 0:
            return said("insert", file[i1 - 1], new, short=short)
        if tag == "delete" and old:
            return "Remove that line." if short else f"Remove `{old}`."
    return ""


def model_sample(cases: Sequence[LineCase], n: int, seed: int = 0) -> list[LineCase]:
    """``n`` one-sided twins (seeded) where the line rules pose a choice (the paired similarity
    from :data:`engine.apply.align.CHOICE_RATIO` up), balanced over truths (``n`` split evenly)
    and, within each, over similarity buckets (round-robin, each bucket shuffled)."""
    from engine.apply.align import CHOICE_RATIO

    rng = random.Random(f"{seed}-model-sample")
    out: list[LineCase] = []
    for k, truth in enumerate(TRUTHS):
        groups: dict[str, list[LineCase]] = {}
        for lc in cases:
            if lc.truth == truth and lc.paired is not None and lc.paired >= CHOICE_RATIO:
                groups.setdefault(bucket(lc.paired), []).append(lc)
        order = sorted(groups)
        for key in order:
            rng.shuffle(groups[key])
        want = len(out) + (n - len(out)) // (len(TRUTHS) - k)
        while len(out) < want and any(groups[b] for b in order):
            for key in order:
                if groups[key] and len(out) < want:
                    out.append(groups[key].pop())
    return out


def model_row(score: Any, case: ApplyCase, instruction: str) -> dict[str, Any] | None:
    """The line choice on ``case`` decided by ``score`` (engine.apply.choice.model_scorer) with
    ``instruction`` and by the rule, beside the truth (the readings that merge to the gold); None
    where the merge ``auto`` runs meets no line choice (a structure choice is not this measure's).
    The model is asked as if it decided the line choice, which it does not in the product
    (Choice.model_decides): this is the measure that says why."""
    import time
    from dataclasses import replace

    from engine.apply.choice import by_rule, decide, survey

    file, update = case.file.splitlines(keepends=True), case.update.splitlines(keepends=True)
    _, found = survey(file, update, case.language)
    if found is None or found[0].key >= 0:
        return None
    choice, readings = found
    _, rule = by_rule(choice, readings)
    started = time.perf_counter()
    _, model = decide(score, replace(choice, model_decides=True), instruction, file, update, readings)
    right = [c.reading for c in readings if c.text == case.gold]
    return {"case": case.name, "instruction": instruction, "readings": [c.reading for c in readings],
            "truth": right, "rule": rule.chosen, "model": model.chosen, "by": model.by,
            "scores": [round(s, 2) for s in model.scores], "rule_right": rule.chosen in right,
            "model_right": model.chosen in right, "seconds": round(time.perf_counter() - started, 2)}


def model_tally(rows: Sequence[dict[str, Any]], keys: Sequence[str]) -> dict[str, Any]:
    """Right / wrong of the model and of the rule, overall and by each of ``keys`` (a row's
    field), and how often the model fell back to the rule (its scores tied)."""
    def counts(mine: list[dict[str, Any]]) -> dict[str, int]:
        return {"n": len(mine), "model_right": sum(r["model_right"] for r in mine),
                "rule_right": sum(r["rule_right"] for r in mine),
                "model_fell_to_rule": sum(r["by"] == "rule" for r in mine),
                "model_differs": sum(r["model"] != r["rule"] for r in mine)}

    out: dict[str, Any] = {"all": counts(list(rows))}
    for key in keys:
        out[f"by_{key}"] = {v: counts([r for r in rows if r[key] == v])
                            for v in sorted(dict.fromkeys(r[key] for r in rows))}
    return out
