"""engine.apply.answer and engine.apply.patch: the forms of a chat answer that names files, and a
unified diff's hunks applied exactly (or not placed)."""

from __future__ import annotations

import pytest

from engine.apply.answer import split_answer
from engine.apply.patch import apply_hunks, parse_hunks

FENCE = "```"


@pytest.mark.parametrize("header, path", [
    (f"{FENCE}python src/app.py", "src/app.py"),
    (f"{FENCE}app.py", "app.py"),
    (f"{FENCE}python:src/app.py", "src/app.py"),
    (f'{FENCE}python title="src/app.py"', "src/app.py"),
    (f"{FENCE}ts path=web/a.ts", "web/a.ts"),
    (f"`src/app.py`\n{FENCE}python", "src/app.py"),
    (f"**src/app.py**\n\n{FENCE}python", "src/app.py"),
    (f"**`src/app.py`**:\n{FENCE}python", "src/app.py"),
    (f"File: src/app.py\n{FENCE}", "src/app.py"),
    (f"# src/app.py\n{FENCE}python", "src/app.py"),
    (f"### `Makefile.am`\n{FENCE}", "Makefile.am"),
    (f"- `src/app.py`:\n{FENCE}python", "src/app.py"),
])
def test_a_block_is_named_by_its_fence_or_the_line_above(header: str, path: str) -> None:
    answer = f"Here is the change.\n\n{header}\nx = 1\n{FENCE}\n\nDone."
    parsed = split_answer(answer)
    assert [(b.path, b.kind, b.text) for b in parsed.blocks] == [(path, "update", "x = 1\n")]
    assert parsed.unnamed == []


@pytest.mark.parametrize("header", [f"{FENCE}python", f"{FENCE}", f"{FENCE}c++", f"Update the function as follows:\n{FENCE}python",
                                    f"This fixes it.\n{FENCE}js"])
def test_a_block_without_a_path_names_no_file(header: str) -> None:
    parsed = split_answer(f"{header}\nx = 1\n{FENCE}\n")
    assert parsed.blocks == [] and parsed.unnamed == ["x = 1\n"]


def test_several_files_in_answer_order_and_a_longer_fence_holds_a_shorter_one() -> None:
    answer = (f"`a.py`\n{FENCE}python\na = 1\n{FENCE}\n\n````md docs/b.md\n# B\n{FENCE}sh\nls\n{FENCE}\n````\n"
              f"\nFile: c/d.go\n{FENCE}go\npackage d\n{FENCE}\n")
    parsed = split_answer(answer)
    assert [(b.path, b.text) for b in parsed.blocks] == [("a.py", "a = 1\n"), ("docs/b.md", f"# B\n{FENCE}sh\nls\n{FENCE}\n"),
                                                         ("c/d.go", "package d\n")]
    assert [b.line for b in parsed.blocks] == [2, 6, 14]  # the fence lines


DIFF = """diff --git a/x.py b/x.py
index 1234567..89abcde 100644
--- a/x.py
+++ b/x.py
@@ -1,3 +1,3 @@
 a = 1
-b = 2
+b = 3
 c = 4
--- a/lib/y.py
+++ b/lib/y.py
@@ -10,2 +10,3 @@ def f():
     x = 1
+    y = 2
     return x
"""


@pytest.mark.parametrize("wrap", ["bare", "fenced"])
def test_a_unified_diff_gives_one_block_per_file(wrap: str) -> None:
    answer = f"The patch:\n\n{FENCE}diff\n{DIFF}{FENCE}\n" if wrap == "fenced" else f"The patch:\n\n{DIFF}\nThanks."
    parsed = split_answer(answer)
    assert [(b.path, b.kind) for b in parsed.blocks] == [("x.py", "diff"), ("lib/y.py", "diff")]
    x, y = parsed.blocks
    assert [(h.old, h.new, h.old_start) for h in x.hunks] == [(("a = 1", "b = 2", "c = 4"), ("a = 1", "b = 3", "c = 4"), 1)]
    assert [(h.old, h.new, h.old_start) for h in y.hunks] == [(("    x = 1", "    return x"),
                                                               ("    x = 1", "    y = 2", "    return x"), 10)]


def test_new_and_deleted_files_in_a_diff() -> None:
    parsed = split_answer("--- /dev/null\n+++ b/new.py\n@@ -0,0 +1,2 @@\n+a = 1\n+b = 2\n"
                          "--- a/old.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-x = 1\n")
    new, old = parsed.blocks
    assert (new.path, new.created, old.path, old.deleted) == ("new.py", True, "old.py", True)
    assert apply_hunks("", new.hunks).text == "a = 1\nb = 2\n"


FILE = "".join(f"line {i}\n" for i in range(1, 41))


def hunks(text: str):
    return parse_hunks(text.splitlines(), 1)


def test_a_hunk_applies_at_its_line_and_with_an_offset() -> None:
    exact = hunks("@@ -5,3 +5,3 @@\n line 5\n-line 6\n+line six\n line 7\n")
    assert apply_hunks(FILE, exact).text == FILE.replace("line 6\n", "line six\n")
    shifted = hunks("@@ -1,3 +1,3 @@\n line 5\n-line 6\n+line six\n line 7\n")  # wrong numbers, unique lines
    assert apply_hunks(FILE, shifted).text == FILE.replace("line 6\n", "line six\n")


def test_a_hunk_whose_lines_are_not_in_the_file_is_not_placed() -> None:
    missing = hunks("@@ -5,3 +5,3 @@\n line 5\n-line 66\n+line six\n line 7\n")
    patched = apply_hunks(FILE, missing)
    assert patched.text == FILE and len(patched.unplaced) == 1
    assert "@@ -5 at answer line 1" in patched.unplaced[0].describe()


def test_an_ambiguous_hunk_far_from_its_line_is_not_placed() -> None:
    text = "x = 1\n" + "pass\n" * 60 + "x = 1\n"
    far = hunks("@@ -30,1 +30,1 @@\n-x = 1\n+x = 2\n")
    assert apply_hunks(text, far).unplaced  # two occurrences, both over FUZZ_LINES away
    near = hunks("@@ -58,1 +58,1 @@\n-x = 1\n+x = 2\n")
    assert apply_hunks(text, near).text == "x = 1\n" + "pass\n" * 60 + "x = 2\n"


def test_crlf_and_a_missing_final_newline_are_kept() -> None:
    text = "a\r\nb\r\nc"
    patched = apply_hunks(text, hunks("@@ -2,2 +2,2 @@\n b\n-c\n+C\n"))
    assert patched.text == "a\r\nb\r\nC"
