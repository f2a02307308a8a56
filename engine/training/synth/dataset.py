"""Build the span selector's synthetic edit cases: sources -> dedupe -> split -> decontaminate -> edits.

Determinism: every random choice comes from ``random.Random`` seeded with ``seed`` and the split
name, pools are in sorted source order, and nothing depends on hash order or wall time, so the
same seed, interpreter and package pins give the same JSONL bytes. The held-out split is drawn by
whole source file from a hash of the file's name alone (10% of files), so it is the same for every
seed and size: no training set of any size ever holds a held-out file.
"""

from __future__ import annotations

import hashlib
import platform
import random
import time
from collections import Counter
from contextlib import ExitStack
from typing import Callable, Iterable, Sequence

from engine.core.lines import split_lines
from engine.training.synth.cases import SynthCase, SynthDataset
from engine.training.synth.cursor import EXACT_SHARE, cursor_placement
from engine.training.synth.decontam import NGRAM, THRESHOLD, NgramIndex, code_tokens, evaluation_index
from engine.training.synth.edits import ALL_KINDS, BUG_KINDS, Edit, Site, first_changed_line
from engine.training.synth.functions import SourceFunction
from engine.training.synth.instructions import fix_instruction
from engine.training.synth.js_edits import js_sites
from engine.training.synth.js_source import JsParser, ensure_installed, js_functions
from engine.training.synth.python_edits import python_sites
from engine.training.synth.python_source import python_functions

HELDOUT_FILE_PERMILLE = 100
KIND_WEIGHTS = {kind: (1.0 if kind in BUG_KINDS else 0.6) for kind in ALL_KINDS}
POSITION_BINS = 10
FOCUS_SHARE = 0.5
_BUILDS_PER_FUNCTION = 6
_FUNCTIONS_PER_CASE = 400

Progress = Callable[[str, int, int], None]  # (stage, done, total)


class SynthError(RuntimeError):
    """The dataset cannot be built as asked; the message says what to change."""


def is_heldout_file(file_id: str) -> bool:
    """Whether a source file belongs to the held-out split (stable across seeds and sizes)."""
    return int(hashlib.sha1(file_id.encode("utf-8")).hexdigest()[:8], 16) % 1000 < HELDOUT_FILE_PERMILLE


def relative_position(changed_line: int, n_lines: int) -> float:
    """Where the changed line sits in the function: 0.0 = first line, 1.0 = last."""
    return (changed_line - 1) / max(n_lines - 1, 1)


def position_bin(changed_line: int, n_lines: int, bins: int = POSITION_BINS) -> int:
    return min(int(relative_position(changed_line, n_lines) * bins), bins - 1)


def _dedupe(functions: Iterable[SourceFunction]) -> tuple[list[SourceFunction], int]:
    seen: set[str] = set()
    kept, dropped = [], 0
    for fn in functions:
        key = " ".join(code_tokens(fn.code))
        if key in seen:
            dropped += 1
            continue
        seen.add(key)
        kept.append(fn)
    return kept, dropped


def _ordered_sites(sites: list[Site], n_lines: int, target: int, rng: random.Random) -> list[Site]:
    """Sites in the target position bin first (shuffled), then the rest by distance to that bin."""
    in_bin = [s for s in sites if position_bin(s.line, n_lines) == target]
    rng.shuffle(in_bin)
    center = (target + 0.5) / POSITION_BINS
    rest = sorted((s for s in sites if position_bin(s.line, n_lines) != target),
                  key=lambda s: (abs(relative_position(s.line, n_lines) - center), s.line))
    return in_bin + rest


def _make_edit(fn: SourceFunction, kind: str, target: int, rng: random.Random,
               js_check: Callable[[str], bool] | None) -> Edit | None:
    if fn.language == "python":
        sites = python_sites(fn.code, kind, rng)
    else:
        assert js_check is not None
        sites = js_sites(fn.code, kind, rng, js_check)
    n_lines = len(split_lines(fn.code))
    for site in _ordered_sites(sites, n_lines, target, rng)[:_BUILDS_PER_FUNCTION]:
        edit = site.build()
        if edit is not None and edit.input.endswith("\n") and edit.gold.endswith("\n"):
            return edit
    return None


def _generate(split: str, pools: dict[str, list[SourceFunction]], n: int, seed: int, js_share: float,
              js_check: Callable[[str], bool] | None, progress: Progress | None,
              focus_share: float = FOCUS_SHARE,
              exact_share: float = EXACT_SHARE) -> tuple[list[SynthCase], Counter]:
    rng = random.Random(f"copy-as-decode-synth:{seed}:{split}")
    orders = {lang: rng.sample(pool, len(pool)) for lang, pool in pools.items()}
    cursors = Counter()
    misses: Counter[str] = Counter()
    languages = sorted(orders)
    cases: list[SynthCase] = []
    kinds, weights = list(KIND_WEIGHTS), list(KIND_WEIGHTS.values())
    while len(cases) < n:
        if len(languages) == 2:
            language = "javascript" if rng.random() < js_share else "python"
        else:
            language = languages[0]
        kind = rng.choices(kinds, weights)[0]
        target = rng.randrange(POSITION_BINS)
        order = orders[language]
        edit, fn = None, None
        for _ in range(min(_FUNCTIONS_PER_CASE, len(order))):
            fn = order[cursors[language] % len(order)]
            cursors[language] += 1
            edit = _make_edit(fn, kind, target, rng, js_check)
            if edit is not None:
                break
        if edit is None or fn is None:
            misses[f"{language}/{kind}"] += 1
            if misses[f"{language}/{kind}"] > 50:
                raise SynthError(f"no {kind} edit found in {split} {language} functions 50 times in a row; "
                                 f"the pool ({len(order)} functions) is too small: lower js_share or the sizes")
            continue
        changed = first_changed_line(edit.input, edit.gold)
        instruction = edit.instruction or fix_instruction(fn.name, rng)
        focus = None
        if rng.random() < focus_share:  # the same one draw per case as ever: the cases do not depend on it
            cursor = random.Random(f"copy-as-decode-cursor:{seed}:{split}:{len(cases)}")
            focus, _placement = cursor_placement(edit.input, edit.gold, changed, cursor, exact_share)
        cases.append(SynthCase(input=edit.input, gold=edit.gold, instruction=instruction, kind=kind,
                               language=language, source=fn.source, license=fn.license, split=split,
                               changed_line=changed, focus_line=focus))
        if progress:
            progress(split, len(cases), n)
    return cases, misses


def _split_stats(cases: Sequence[SynthCase], functions_used: dict[str, SourceFunction]) -> dict:
    histogram = [0] * POSITION_BINS
    by_line: Counter[int] = Counter()
    for case in cases:
        histogram[position_bin(case.changed_line, len(split_lines(case.input)))] += 1
        by_line[case.changed_line] += 1
    packages = Counter(functions_used[c.source].package for c in cases)
    return {
        "cases": len(cases),
        "by_kind": dict(sorted(Counter(c.kind for c in cases).items())),
        "by_language": dict(sorted(Counter(c.language for c in cases).items())),
        "by_kind_language": dict(sorted(Counter(f"{c.language}/{c.kind}" for c in cases).items())),
        "by_license": dict(sorted(Counter(c.license for c in cases).items())),
        "by_package": dict(sorted(packages.items())),
        "distinct_functions": len({c.source for c in cases}),
        "distinct_files": len({functions_used[c.source].file for c in cases}),
        "focus_hint_share": round(sum(c.focus_line is not None for c in cases) / max(len(cases), 1), 3),
        "focus_placement": focus_placement(cases),
        "position_histogram": {"bins": POSITION_BINS, "meaning": "bin k holds changed lines at relative position "
                               "(changed_line-1)/(lines-1) in [k/10, (k+1)/10)", "counts": histogram},
        "changed_line_histogram": {str(k): v for k, v in sorted(by_line.items())},
    }


def focus_placement(cases: Sequence[SynthCase]) -> dict:
    """Where the shown hints sit relative to the first changed line: exact, 1-3 lines away, farther
    (always a line the edit does not touch), and the histogram of focus - changed."""
    offsets = Counter(c.focus_line - c.changed_line for c in cases if c.focus_line is not None)
    return {"exact": offsets.get(0, 0),
            "near": sum(v for k, v in offsets.items() if 1 <= abs(k) <= 3),
            "away": sum(v for k, v in offsets.items() if abs(k) > 3),
            "offsets": {str(k): v for k, v in sorted(offsets.items())}}


def mine_functions(languages: Sequence[str], js_cache=None, report: dict | None = None,
                   js_parser=None) -> list[SourceFunction]:
    """Every source function of the requested languages (Python stdlib, then the pinned npm packages)."""
    functions: list[SourceFunction] = []
    if "python" in languages:
        functions.extend(python_functions())
    if "javascript" in languages:
        functions.extend(js_functions(js_parser, js_cache, report=report))
    return functions


def build_dataset(n_train: int, n_heldout: int, seed: int = 0, languages: Sequence[str] = ("python", "javascript"),
                  js_share: float = 0.35, progress: Progress | None = None, *, focus_share: float = FOCUS_SHARE,
                  exact_share: float = EXACT_SHARE,
                  functions: Sequence[SourceFunction] | None = None, eval_index: NgramIndex | None = None,
                  js_check: Callable[[str], bool] | None = None, js_cache=None) -> SynthDataset:
    """The synthetic edit cases of both splits and their statistics.

    ``focus_share`` is the share of cases that show the focus hint (one seeded draw per case
    whatever the share, so the cases themselves do not change with it); ``exact_share`` the share
    of those hints on the changed line (engine.training.synth.cursor). ``functions`` replaces
    the mined sources and ``eval_index`` the evaluation corpora (tests use both to stay fast);
    ``js_check`` replaces the acorn parser that re-parses JavaScript edits.
    """
    languages = tuple(sorted(set(languages)))
    unknown = set(languages) - {"python", "javascript"}
    if unknown or not languages:
        raise SynthError(f"unknown languages {sorted(unknown)}; choose from python, javascript")
    if not 0.0 <= js_share <= 1.0:
        raise SynthError(f"js_share {js_share} is outside [0, 1]")
    if not 0.0 <= focus_share <= 1.0:
        raise SynthError(f"focus_share {focus_share} is outside [0, 1]")
    if not 0.0 <= exact_share <= 1.0:
        raise SynthError(f"exact_share {exact_share} is outside [0, 1]")
    started = time.perf_counter()
    seconds: dict[str, float] = {}
    package_report: dict = {}
    with ExitStack() as stack:
        needs_js = "javascript" in languages
        if needs_js and (js_check is None or functions is None):
            js_cache = ensure_installed(js_cache)
            parser = stack.enter_context(JsParser(js_cache))
            js_check = js_check or parser.check
        else:
            parser = None
        if functions is None:
            if progress:
                progress("mine sources", 0, 1)
            functions = mine_functions(languages, js_cache, package_report, parser)
        functions = [fn for fn in functions if fn.language in languages]
        seconds["mine"] = time.perf_counter() - started
        extracted = Counter(fn.language for fn in functions)
        functions, duplicates = _dedupe(functions)

        t0 = time.perf_counter()
        index = eval_index if eval_index is not None else evaluation_index()
        contaminated: list[dict] = []
        clean: list[SourceFunction] = []
        for k, fn in enumerate(functions):
            score, label = index.most_similar(fn.code)
            if score > THRESHOLD:
                contaminated.append({"source": fn.source, "evaluation_case": label, "jaccard": round(score, 3)})
            else:
                clean.append(fn)
            if progress and k % 500 == 0:
                progress("decontaminate", k, len(functions))
        seconds["decontaminate"] = time.perf_counter() - t0

        heldout_pool = [fn for fn in clean if is_heldout_file(fn.file)]
        leak_index = NgramIndex().add_all((fn.code, fn.source) for fn in heldout_pool)
        train_pool, leaks = [], 0
        for fn in clean:
            if is_heldout_file(fn.file):
                continue
            if leak_index.most_similar(fn.code)[0] > THRESHOLD:
                leaks += 1
            else:
                train_pool.append(fn)

        pools = {split: {lang: [fn for fn in pool if fn.language == lang] for lang in languages}
                 for split, pool in (("train", train_pool), ("heldout", heldout_pool))}
        for split, n in (("train", n_train), ("heldout", n_heldout)):
            empty = [lang for lang, pool in pools[split].items() if not pool]
            if n and empty:
                raise SynthError(f"no {split} functions for {', '.join(empty)}; add sources or drop the language")
        t0 = time.perf_counter()
        train, train_misses = _generate("train", pools["train"], n_train, seed, js_share, js_check, progress,
                                           focus_share, exact_share)
        heldout, heldout_misses = _generate("heldout", pools["heldout"], n_heldout, seed, js_share, js_check,
                                               progress, focus_share, exact_share)
        seconds["generate"] = time.perf_counter() - t0

    by_source = {fn.source: fn for fn in functions}
    contaminated_by_language = Counter(by_source[c["source"]].language for c in contaminated)
    stats = {
        "seed": seed, "n_train": n_train, "n_heldout": n_heldout, "languages": list(languages), "js_share": js_share,
        "python_version": platform.python_version(),
        "kind_weights": KIND_WEIGHTS, "focus_share": focus_share, "exact_share": exact_share,
        "heldout_rule": f"whole source files whose sha1(file id) % 1000 < {HELDOUT_FILE_PERMILLE} (seed-independent)",
        "sources": _source_stats(functions, package_report),
        "pool": {
            "extracted_by_language": dict(sorted(extracted.items())),
            "exact_duplicates_dropped": duplicates,
            "train_functions": dict(sorted(Counter(fn.language for fn in train_pool).items())),
            "heldout_functions": dict(sorted(Counter(fn.language for fn in heldout_pool).items())),
            "train_files": len({fn.file for fn in train_pool}),
            "heldout_files": len({fn.file for fn in heldout_pool}),
            "train_functions_dropped_as_near_duplicates_of_heldout": leaks,
        },
        "decontamination": {
            "against": "HumanEvalPack fix (python, js, cpp, go, java, rust) and CanItEdit, input and gold",
            "method": f"token {NGRAM}-gram Jaccard similarity > {THRESHOLD} drops the function; tokens from the "
                      "regex code tokenizer [A-Za-z_$][\\w$]*|\\d+(\\.\\d+)?|\\S",
            "evaluation_documents": len(index),
            "functions_checked": len(functions),
            "dropped": len(contaminated),
            "dropped_by_language": dict(sorted(contaminated_by_language.items())),
            "dropped_examples": contaminated[:20],
        },
        "generation_misses": dict(sorted((train_misses + heldout_misses).items())),
        "splits": {"train": _split_stats(train, by_source), "heldout": _split_stats(heldout, by_source)},
        "seconds": {k: round(v, 2) for k, v in seconds.items()} | {"total": round(time.perf_counter() - started, 2)},
    }
    return SynthDataset(train=train, heldout=heldout, stats=stats)


def _source_stats(functions: Sequence[SourceFunction], package_report: dict) -> dict:
    out: dict[str, dict] = {}
    for fn in functions:
        entry = out.setdefault(fn.package, {"language": fn.language, "license": fn.license, "functions": 0,
                                            "files": set()})
        entry["functions"] += 1
        entry["files"].add(fn.file)
    for package, report in package_report.items():
        if "skipped" in report:
            out[package] = {"language": "javascript", "license": report["license"], "skipped": report["skipped"]}
    return {k: ({**v, "files": len(v["files"])} if "files" in v else v) for k, v in sorted(out.items())}
