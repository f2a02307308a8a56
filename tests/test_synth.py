"""Synthetic edit cases (engine/synth): bug classes, instructed edits, decontamination, split, determinism."""

from __future__ import annotations

import ast
import os
import random
import re
import shutil
import subprocess
import tempfile

import pytest

from engine.core.lines import split_lines
from engine.training.synth import BUG_KINDS, EDIT_KINDS, SynthCase, build_dataset, first_changed_line
from engine.training.synth.decontam import NgramIndex
from engine.training.synth.functions import SourceFunction
from engine.training.synth.js_edits import js_sites
from engine.training.synth.python_edits import python_sites
from engine.training.synth.python_source import functions_in_file, stdlib_dir

PY_FUNCTION = '''def count_words(text, limit=10):
    """Count words, at most limit."""
    counts = {}
    total = 0
    for word in text.split():
        if word.startswith("#") and limit > 0:
            continue
        counts[word] = counts.get(word, 0) + 1
        total += 1
        if total >= limit:
            break
    result = sorted(counts.items(), key=lambda kv: kv[1])
    return result[:limit], max(total, 0)
'''

JS_FUNCTION = '''function chunk(array, size, guard) {
  if (guard ? isIterateeCall(array, size, guard) : size === undefined) {
    size = 1;
  } else {
    size = Math.max(toInteger(size), 0);
  }
  size = Math.min(size, 4096);
  var length = array == null ? 0 : array.length;
  if (!length || size < 1) {
    return [];
  }
  var index = 0, resIndex = 0, result = Array(Math.ceil(length / size));
  while (index < length) {
    result.push(baseSlice(array, index, (index += size)));
  }
  const label = `chunk ${index}/${length}`;
  return result.filter(x => x !== null);
}
'''

SINGLE_LINE_KINDS = {"bug/value_misuse", "bug/off_by_one", "bug/operator_misuse", "bug/variable_misuse",
                     "bug/function_misuse", "edit/change_constant", "edit/swap_arguments"}


def _focus_is_right(edit_input: str, gold: str, line: int) -> None:
    """Lines before ``line`` are unchanged and the gold differs at ``line`` (changed or inserted before it)."""
    a, b = split_lines(edit_input), split_lines(gold)
    assert a[: line - 1] == b[: line - 1]
    assert a[line - 1:] != b[line - 1:]


def _node_check(code: str) -> bool:
    with tempfile.NamedTemporaryFile("w", suffix=".mjs", delete=False, encoding="utf-8") as handle:
        handle.write(code)
    try:
        return subprocess.run(["node", "--check", handle.name], capture_output=True, timeout=30).returncode == 0
    finally:
        os.unlink(handle.name)


@pytest.mark.parametrize("kind", BUG_KINDS)
def test_python_bug_classes_parse_differ_and_gold_is_original(kind: str) -> None:
    sites = python_sites(PY_FUNCTION, kind, random.Random(0))
    edits = [(s, e) for s in sites if (e := s.build()) is not None]
    assert edits, f"{kind} found nothing to mutate"
    for site, edit in edits:
        assert edit.gold == PY_FUNCTION and edit.input != PY_FUNCTION
        assert ast.dump(ast.parse(edit.input)) != ast.dump(ast.parse(edit.gold))
        line = first_changed_line(edit.input, edit.gold)
        _focus_is_right(edit.input, edit.gold, line)
        if kind in SINGLE_LINE_KINDS:
            assert line == site.line
            assert len(split_lines(edit.input)) == len(split_lines(PY_FUNCTION))
        # outside the changed line(s) the formatting is the original's
        assert sum(x != y for x, y in zip(split_lines(edit.input), split_lines(edit.gold))) <= 2 or kind in (
            "bug/missing_logic", "bug/excess_logic")


@pytest.mark.parametrize("kind", EDIT_KINDS)
def test_python_instructed_edits(kind: str) -> None:
    edits = [e for s in python_sites(PY_FUNCTION, kind, random.Random(1)) if (e := s.build()) is not None]
    assert edits, f"{kind} found nothing to edit"
    for edit in edits:
        assert edit.input == PY_FUNCTION and edit.gold != PY_FUNCTION and edit.instruction
        ast.parse(edit.gold)
        _focus_is_right(edit.input, edit.gold, first_changed_line(edit.input, edit.gold))


def test_python_rename_is_consistent() -> None:
    edit = next(e for s in python_sites(PY_FUNCTION, "edit/rename_identifier", random.Random(0))
                if (e := s.build()) is not None)
    old, new = re.findall(r"`(\w+)`", edit.instruction)[:2]
    assert old in edit.input and new not in edit.input
    tree = ast.parse(edit.gold)
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | {a.arg for a in ast.walk(tree)
                                                                          if isinstance(a, ast.arg)}
    assert new in names and old not in names


def test_changed_line_of_an_insertion_and_of_equal_texts() -> None:
    assert first_changed_line("a\nc\n", "a\nb\nc\n") == 2
    assert first_changed_line("a\nb\n", "a\nb\nc\n") == 2  # append: clamped to the last input line
    with pytest.raises(ValueError):
        first_changed_line("a\n", "a\n")


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed: cannot re-parse JavaScript")
@pytest.mark.parametrize("kind", BUG_KINDS + EDIT_KINDS)
def test_javascript_edits_on_an_inline_snippet(kind: str) -> None:
    assert _node_check(JS_FUNCTION)
    sites = js_sites(JS_FUNCTION, kind, random.Random(0), _node_check)
    edits = [e for s in sites[:3] if (e := s.build()) is not None]
    assert edits, f"{kind} found nothing to edit in the snippet"
    for edit in edits:
        original = edit.gold if kind.startswith("bug/") else edit.input
        assert original == JS_FUNCTION and edit.input != edit.gold
        assert _node_check(edit.input) and _node_check(edit.gold)
        _focus_is_right(edit.input, edit.gold, first_changed_line(edit.input, edit.gold))


def test_javascript_check_rejects_a_broken_mutation() -> None:
    """A rewrite the parser rejects is dropped (the check is what makes token-level rewrites safe)."""
    sites = js_sites(JS_FUNCTION, "bug/operator_misuse", random.Random(0), lambda code: False)
    assert sites and all(s.build() is None for s in sites)


# -- decontamination, split, determinism ----------------------------------------------------------

def _stdlib_pool(names: tuple[str, ...]) -> list[SourceFunction]:
    root = stdlib_dir()
    out: list[SourceFunction] = []
    for name in names:
        out.extend(functions_in_file(root / name, f"test-stdlib/{name}", "python-stdlib-test"))
    return out


POOL_FILES = ("textwrap.py", "heapq.py", "bisect.py", "statistics.py", "fractions.py", "shlex.py", "difflib.py",
              "calendar.py", "colorsys.py", "ipaddress.py", "argparse.py", "csv.py", "glob.py", "fnmatch.py",
              "gettext.py", "netrc.py", "platform.py", "pprint.py", "string.py", "tokenize.py", "zipfile.py",
              "tarfile.py", "configparser.py", "ftplib.py", "mailbox.py", "inspect.py", "locale.py", "pathlib.py")


def test_ngram_index_similarity() -> None:
    index = NgramIndex().add_all([("def f(x):\n    return [y * 2 for y in x if y > 0]\n", "eval/1")])
    assert index.most_similar("def f(x):\n    return [y * 2 for y in x if y > 0]\n") == (1.0, "eval/1")
    assert index.most_similar("def g(a, b):\n    return a.join(b) if b else a\n")[0] == 0.0


def test_decontamination_drops_a_copied_humanevalfix_function() -> None:
    from engine.evaluation.corpora import CorpusError, load_corpus
    from engine.training.synth.decontam import evaluation_index

    try:
        case = load_corpus("humanevalfix-python")[0]
        index = evaluation_index()
    except CorpusError as exc:
        pytest.skip(f"evaluation corpora not available: {exc}")
    copied = SourceFunction(code=case.gold, language="python", name="copied", file="test-copied/copied.py",
                            package="copied", license="MIT")
    pool = _stdlib_pool(POOL_FILES)
    dataset = build_dataset(30, 5, seed=0, languages=("python",), functions=[copied] + pool, eval_index=index)
    decontamination = dataset.stats["decontamination"]
    assert decontamination["dropped"] == 1
    assert decontamination["dropped_examples"][0]["source"] == copied.source
    assert all(c.source != copied.source for c in dataset.train + dataset.heldout)
    # every unrelated function was kept: only exact duplicates and the copy left the pool
    duplicates = dataset.stats["pool"]["exact_duplicates_dropped"]
    assert decontamination["functions_checked"] == len(pool) + 1 - duplicates


def test_heldout_files_are_disjoint_from_train_and_build_is_deterministic(tmp_path) -> None:
    pool = _stdlib_pool(POOL_FILES)
    first = build_dataset(80, 20, seed=3, languages=("python",), functions=pool, eval_index=NgramIndex())
    second = build_dataset(80, 20, seed=3, languages=("python",), functions=pool, eval_index=NgramIndex())
    other = build_dataset(80, 20, seed=4, languages=("python",), functions=pool, eval_index=NgramIndex())
    assert len(first.train) == 80 and len(first.heldout) == 20
    train_files = {c.source.rsplit(":", 1)[0] for c in first.train}
    heldout_files = {c.source.rsplit(":", 1)[0] for c in first.heldout}
    assert heldout_files and not train_files & heldout_files
    paths_a = first.write(tmp_path / "a")
    paths_b = second.write(tmp_path / "b")
    for split in ("train", "heldout"):
        assert paths_a[split].read_bytes() == paths_b[split].read_bytes()
    assert [c.to_json() for c in other.train] != [c.to_json() for c in first.train]
    for case in first.train + first.heldout:
        assert isinstance(case, SynthCase) and case.input.endswith("\n") and case.gold.endswith("\n")
        assert case.changed_line == first_changed_line(case.input, case.gold)
        assert case.focus_line is None or 1 <= case.focus_line <= len(case.input.splitlines())
        assert SynthCase.from_json(case.to_json()) == case
    focus_share = sum(c.focus_line is not None for c in first.train) / len(first.train)
    assert 0.3 < focus_share < 0.7
    placed = first.stats["splits"]["train"]["focus_placement"]
    assert placed["exact"] + placed["near"] + placed["away"] == sum(c.focus_line is not None for c in first.train)
    assert placed["exact"] and placed["near"]  # a cursor: on the changed line and near it, not only on it
    assert sum(first.stats["splits"]["train"]["position_histogram"]["counts"]) == 80
    assert set(first.stats["splits"]["train"]["by_kind"]) <= set(BUG_KINDS + EDIT_KINDS)


def test_cursor_placement_shares_and_rules() -> None:
    """About half the hints on the changed line, most of the rest 1-3 lines away (clipped to the
    function), a few farther on a line the edit does not touch; seeded."""
    from collections import Counter

    from engine.training.synth.cursor import AWAY_SHARE, EXACT_SHARE, NEAR_SHARE, cursor_placement

    source = "".join(f"x{i} = {i}\n" for i in range(1, 21))
    gold = source.replace("x10 = 10\n", "x10 = 11\n").replace("x11 = 11\n", "x11 = 12\n")
    counts: Counter[str] = Counter()
    for k in range(3000):
        line, placement = cursor_placement(source, gold, 10, random.Random(k))
        counts[placement] += 1
        offset = line - 10
        assert {"exact": offset == 0, "near": 1 <= abs(offset) <= 3, "away": abs(offset) > 3}[placement]
        assert placement != "away" or line not in (10, 11)  # never a line the edit touches
    for placement, share in (("exact", EXACT_SHARE), ("near", NEAR_SHARE), ("away", AWAY_SHARE)):
        assert abs(counts[placement] / 3000 - share) < 0.04, counts
    assert cursor_placement(source, gold, 10, random.Random(7)) == cursor_placement(source, gold, 10, random.Random(7))
    # at the first line a near cursor moves down only; a 1-line function has nowhere else to point
    assert all(cursor_placement(source, gold, 1, random.Random(k))[0] in range(1, 5) or
               cursor_placement(source, gold, 1, random.Random(k))[1] == "away" for k in range(200))
    assert cursor_placement("x = 1\n", "x = 2\n", 1, random.Random(3)) == (1, "exact")


def test_cursor_placement_exact_share() -> None:
    """``exact_share`` sets the share on the changed line and keeps the near:away ratio in the
    rest; 1.0 always puts the hint on the changed line (the shipped adapter's data), 0.0 never."""
    from collections import Counter

    from engine.training.synth.cursor import AWAY_SHARE, NEAR_SHARE, cursor_placement

    source = "".join(f"x{i} = {i}\n" for i in range(1, 21))
    gold = source.replace("x10 = 10\n", "x10 = 11\n")
    assert all(cursor_placement(source, gold, 10, random.Random(k), 1.0) == (10, "exact") for k in range(300))
    counts = Counter(cursor_placement(source, gold, 10, random.Random(k), 0.0)[1] for k in range(3000))
    assert counts["exact"] == 0
    assert abs(counts["near"] / 3000 - NEAR_SHARE / (NEAR_SHARE + AWAY_SHARE)) < 0.04, counts


@pytest.mark.skipif(shutil.which("npm") is None or shutil.which("node") is None,
                    reason="npm/node not installed: the JavaScript sources come from npm packages")
def test_javascript_sources_from_npm_with_allowed_licenses() -> None:
    from engine.training.synth.js_source import ALLOWED_LICENSES, PACKAGES, JsParser, ensure_installed, js_functions

    cache = ensure_installed()
    wanted = tuple(p for p in PACKAGES if p.name in ("lodash-es", "semver"))
    report: dict = {}
    with JsParser(cache) as parser:
        functions = js_functions(parser, cache, wanted, report=report)
        assert parser.check(JS_FUNCTION) and not parser.check("function f( {\n")
        chunk = next(f for f in functions if f.source.endswith("/chunk.js:chunk"))
        assert chunk.code.startswith("function chunk(") and chunk.license in ALLOWED_LICENSES
        edits = [e for s in js_sites(chunk.code, "bug/operator_misuse", random.Random(0), parser.check)
                 if (e := s.build()) is not None]
        assert edits and all(e.gold == chunk.code for e in edits)
    assert {f.package for f in functions} == {p.spec for p in wanted}
    assert all(entry["license"] in ALLOWED_LICENSES for entry in report.values())
