"""The apply aligner alone (no model): each update style merges to the file a person expects,
marker lines never reach the output, and what cannot be placed is named with nothing written."""

from __future__ import annotations

import pytest

from engine.apply.job import aligned
from engine.apply.markers import is_marker
from engine.core.choices import never_cancelled
from engine.core.errors import EditError
from engine.decoding.events import EditFinished, EditResult, OpResolved
from engine.decoding.request import EditRequest
from engine.language.program import CopyUpdate, parse

PY = '''import os


def foo(a):
    x = a + 1
    y = x * 2
    return y


def bar(b):
    return b - 1


def baz(c):
    return c * 3
'''

JS = '''import { a } from "./a";

export function one(x) {
  const y = x + 1;
  if (y > 2) {
    return y;
  }
  return 0;
}

export function two(z) {
  return z * 2;
}
'''

CLASS = '''class A:
    def f(self):
        return 1

    def g(self):
        return 2

    def h(self):
        return 3
'''


def merged(text: str, update: str, **given) -> EditResult:
    events = list(aligned("test", EditRequest(text, "", update=update, **given), never_cancelled))
    result = events[-1].result if isinstance(events[-1], EditFinished) else None
    assert result is not None
    resolved = [e for e in events if isinstance(e, OpResolved)]
    if result.stop_reason == "done":
        assert "".join(e.text for e in resolved) == result.region_output
    return result


CASES = [
    ("marker around a changed function", PY, "# ... existing code ...\ndef bar(b):\n    return b - 2\n# ... existing code ...\n",
     PY.replace("b - 1", "b - 2")),
    ("marker inside a function", PY, "def foo(a):\n    # ... existing code ...\n    return y + 1\n",
     PY.replace("return y\n", "return y + 1\n")),
    ("no markers, two changed functions", PY,
     "def foo(a):\n    x = a + 2\n    y = x * 2\n    return y\n\n\ndef baz(c):\n    return c * 4\n",
     PY.replace("a + 1", "a + 2").replace("c * 3", "c * 4")),
    ("new function anchored by its neighbour", PY, "def qux(d):\n    return d\n\n\ndef bar(b):\n    return b - 1\n",
     PY.replace("def bar", "def qux(d):\n    return d\n\n\ndef bar")),
    ("deletion by adjacent neighbours", PY, "# ... existing code ...\n    return y\n\n\ndef baz(c):\n# ... existing code ...\n",
     PY.replace("def bar(b):\n    return b - 1\n\n\n", "")),
    ("append after a marker", PY, "# ... existing code ...\n\ndef end():\n    pass\n", PY + "\ndef end():\n    pass\n"),
    ("prepend before a marker", PY, "import sys\n# ... existing code ...\n", PY.replace("import os", "import sys")),
    ("tabs in a file of spaces", PY, "def bar(b):\n\treturn b - 7\n", PY.replace("b - 1", "b - 7")),
    ("brace language, marker inside", JS, "export function one(x) {\n  // ... existing code ...\n  return -1;\n}\n",
     JS.replace("return 0;", "return -1;")),
    ("brace language, two changes", JS,
     'import { a, b } from "./a";\n// ... existing code ...\nexport function two(z) {\n  return b(z) * 2;\n}\n',
     JS.replace("{ a }", "{ a, b }").replace("z * 2", "b(z) * 2")),
    ("keep-existing phrasing", JS, "// keep existing code\nexport function two(z) {\n  return z * 3;\n}\n"
     "// rest of the file unchanged\n", JS.replace("z * 2", "z * 3")),
    ("method shown at the margin", CLASS, "def g(self):\n    return 22\n", CLASS.replace("return 2\n", "return 22\n")),
    ("new method after a class marker", CLASS, "class A:\n    # ... existing methods ...\n\n    def k(self):\n"
     "        return 4\n", CLASS + "\n    def k(self):\n        return 4\n"),
    ("rename", CLASS, "    def g2(self):\n        return 2\n", CLASS.replace("def g(", "def g2(")),
]


@pytest.mark.parametrize("name,text,update,expected", CASES, ids=[c[0] for c in CASES])
def test_update_styles_merge(name: str, text: str, update: str, expected: str) -> None:
    result = merged(text, update)
    assert result.stop_reason == "done" and result.output_text == expected
    assert not result.unplaced


def test_whole_new_file_is_taken_as_is() -> None:
    new = CLASS.replace("return 2", "return 5").replace("def f", "def ff")
    result = merged(CLASS, new)
    assert result.output_text == new and any("whole new file" in w for w in result.warnings)


def test_update_that_matches_nothing_writes_nothing() -> None:
    result = merged(PY, "# ... existing code ...\ndef zzz():\n    totally_new()\n# ... existing code ...\n")
    assert result.stop_reason == "unplaced" and result.output_text == PY
    assert [(c.start, c.end) for c in result.unplaced] == [(2, 3)]
    assert "2-3" in result.warnings[0] and "nothing was written" in result.warnings[0]
    assert result.summary()["unplaced"] == [{"lines": [2, 3], "text": "def zzz():\n    totally_new()\n",
                                             "nearest": "no line matches `def zzz():`"}]


def test_partial_writes_what_could_be_placed() -> None:
    update = "# ...\ndef zzz(): pass\n# ...\n    def h(self):\n        return 33\n"
    whole = merged(CLASS, update)
    assert whole.stop_reason == "unplaced" and whole.output_text == CLASS
    part = merged(CLASS, update, partial=True)
    assert part.stop_reason == "done" and part.output_text == CLASS.replace("return 3", "return 33")
    assert [(c.start, c.end) for c in part.unplaced] == [(2, 2)]


def test_marker_lines_are_never_copied() -> None:
    for _, text, update, _ in CASES:
        result = merged(text, update)
        markers = {j + 1 for j, line in enumerate(update.splitlines(True)) if is_marker(line)}
        for op in result.program.ops:
            if isinstance(op, CopyUpdate):
                assert not markers & set(range(op.start, op.end + 1))
        assert not any(is_marker(line) for line in result.output_text.splitlines()) or any(
            is_marker(line) for line in text.splitlines())


def test_program_round_trips_and_moves_forward() -> None:
    for _, text, update, _ in CASES:
        program = merged(text, update).program
        assert parse(program.serialize()) == program
        ends: dict[type, int] = {}
        for op in program.ops:
            if hasattr(op, "start"):
                assert op.start > ends.get(type(op), 0)
                ends[type(op)] = op.end


@pytest.mark.parametrize("line,marker", [
    ("// ... existing code ...", True), ("# ... rest of the code unchanged ...", True), ("# ...", True),
    ("// keep existing code", True), ("    /* ... */", True), ("<!-- ... -->", True), ("{/* ... */}", True),
    ("# keep the cache warm", False), ("x = 1  # ...", False), ("# TODO fix this", False), ("...", False),
])
def test_marker_phrasings(line: str, marker: bool) -> None:
    assert is_marker(line) is marker


def test_no_final_newline_and_a_file_without_one() -> None:
    assert merged("a = 1\nb = 2", "a = 1\nb = 3\n").output_text == "a = 1\nb = 3"
    assert merged("a = 1\nb = 2\n", "# ...\nb = 3").output_text == "a = 1\nb = 3\n"


@pytest.mark.parametrize("update,message", [("", "empty"), ("  \n\n", "empty"), ("a\x00b", "binary"),
                                            ("x\n" * 6000, "too large")])
def test_bad_updates_are_refused(update: str, message: str) -> None:
    with pytest.raises(EditError, match=message):
        EditRequest(PY, "", update=update).validate()


def test_code_that_appears_twice_is_changed_where_the_changed_line_stands() -> None:
    """The update's context recurs in two functions; the one whose changed line it varies (and
    whose lines keep the update's spacing) is merged, and the code between is kept."""
    body = "    x = load()\n    if x:\n        check(x)\n        log(\"{name}: bad\")\n        x.close()\n        x.free()\n    return x\n"
    text = "def a():\n" + body.format(name="a") + "\n\ndef b():\n" + body.format(name="b")
    update = "# ...\n" + body.format(name="b").replace("b: bad", "b: worse") + "# ...\n"
    assert merged(text, update).output_text == text.replace("b: bad", "b: worse")


def test_recurring_lines_next_to_a_changed_line_are_anchored_at_its_copy() -> None:
    """A chunk between markers whose every line but the changed one recurs in the file: the copy
    whose neighbouring line the changed line is a variant of is the one it rewrites."""
    fail = "    {\n      fail ();\n      return 0;\n    }\n"
    text = f"int f (int x)\n{{\n  if (x < 0)\n{fail}  step (x);\n  if (x != end)\n{fail}  return 1;\n}}\n"
    update = f"// ... existing code ...\n  if (x != endRenamed)\n{fail}// ... existing code ...\n"
    assert merged(text, update, language="c").output_text == text.replace("x != end)", "x != endRenamed)")



RECURRING = "def a():\n    x = 0\n    y = 1\n    return x\n\n\ndef b():\n    y = 1\n    x = 0\n    return x\n\n\n" \
            "X = 1\n\n\ndef c():\n    return 3\n"
ABOVE_C = "# ...\n    x = 0\n    return x\ndef c():\n    return 3\n# ...\n"


def test_recurring_lines_shown_right_above_an_anchor_delete_what_stood_between() -> None:
    """Each shown line recurs (no anchor), the two stand together once (ending b): b's end and c
    stand adjacent, X and the blank lines (the update shows none) are deleted."""
    assert merged(RECURRING, ABOVE_C).output_text == RECURRING.replace("\n\n\nX = 1\n\n\n", "\n")


def test_recurring_lines_right_above_an_anchor_with_no_copy_adjacent_are_refused() -> None:
    text = RECURRING.replace("    y = 1\n    return x", "    return x")
    result = merged(text, ABOVE_C)  # b deleted with X, or X alone: the rules cannot tell
    assert result.stop_reason == "unplaced" and result.output_text == text


def test_a_new_block_above_the_first_anchor_keeps_the_closing_brace_before_it() -> None:
    """The new function's closing brace is no anchor on the one before it (the diff extends the
    match of the next function over a brace and a blank line)."""
    text = "int f (void)\n{\n  return 1;\n}\n\nint g (void)\n{\n  return 2;\n}\n"
    update = "int h (void)\n{\n  puts (\"hello\");\n}\n\nint g (void)\n{\n  return 2;\n}\n"
    assert merged(text, update).output_text == text.replace("int g", "int h (void)\n{\n  puts (\"hello\");\n}\n\nint g")
