"""`copy-as-decode apply --update answer.md --root DIR` (no FILE): an answer that names several
files is merged into all of them or none, through the real CLI; every bad input leaves every file
(and the folder) exactly as it was."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from engine.cli import main
from engine.verdict import EXIT_BAD_REQUEST, EXIT_SYNTAX, EXIT_UNPLACED

F = "```"
APP = "def add(a, b):\n    return a - b\n\n\ndef sub(a, b):\n    return a - b\n"
GO = "package calc\n\nfunc Mul(a, b int) int {\n\treturn a + b\n}\n"
CONF = "name = 'calc'\nversion = 1\ndebug = True\n"
FILES = {"src/app.py": APP, "calc/mul.go": GO, "conf.py": CONF}

APP_BLOCK = f"`src/app.py`\n{F}python\ndef add(a, b):\n    return a + b\n# ... rest of the file unchanged ...\n{F}\n"
GO_BLOCK = f"{F}go calc/mul.go\npackage calc\n\nfunc Mul(a, b int) int {{\n\treturn a * b\n}}\n{F}\n"
CONF_DIFF = f"{F}diff\n--- a/conf.py\n+++ b/conf.py\n@@ -1,3 +1,3 @@\n name = 'calc'\n-version = 1\n+version = 2\n debug = True\n{F}\n"
ANSWER = f"Three changes.\n\n{APP_BLOCK}\nThen the Go side:\n\n{GO_BLOCK}\nAnd the config:\n\n{CONF_DIFF}"
MERGED = {"src/app.py": APP.replace("a - b", "a + b", 1), "calc/mul.go": GO.replace("a + b", "a * b"),
          "conf.py": CONF.replace("version = 1", "version = 2")}
# A chunk between two markers that matches nothing in app.py (update lines 5-6 of its block).
NOWHERE = (f"**src/app.py**\n{F}python\ndef add(a, b):\n    return a + b\n# ... existing code ...\n"
           f"def zzz():\n    totally_new()\n# ... existing code ...\n{F}\n")


def tree(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (temporary files included) and its bytes."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
            and p.name != "answer.md"}


@pytest.fixture()
def root(tmp_path: Path) -> Path:
    base = tmp_path / "project"
    for name, text in FILES.items():
        (base / name).parent.mkdir(parents=True, exist_ok=True)
        (base / name).write_text(text)
    return base


def apply(capsys, root: Path, answer: str, *flags: str) -> tuple[int, str, str]:
    given = root / "answer.md"
    given.write_text(answer)
    try:
        code = main(["apply", "--update", str(given), "--root", str(root), *flags])
    except SystemExit as exc:
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    given.unlink()
    return code, captured.out, " ".join(captured.err.split())


def test_three_files_are_written_together(capsys, root: Path) -> None:
    code, out, err = apply(capsys, root, ANSWER, "--json")
    assert code == 0, err
    assert tree(root) == {name: text.encode() for name, text in MERGED.items()}
    summary = json.loads(out)
    assert [(f["path"], f["status"], f["written"]) for f in summary["files"]] == [
        ("src/app.py", "write", True), ("calc/mul.go", "write", True), ("conf.py", "write", True)]
    assert summary["exit_code"] == 0 and summary["refused"] is None and len(summary["written"]) == 3


def test_a_block_that_names_no_file_is_said_not_applied(capsys, root: Path) -> None:
    code, out, err = apply(capsys, root, ANSWER + f"\nRun the tests:\n{F}sh\npytest -q\n{F}\n", "--json")
    assert code == 0 and "1 fenced block(s) of the answer name no file and were not applied" in err
    assert json.loads(out)["not_applied"].startswith("1 fenced block(s)")


def test_the_root_defaults_to_the_working_folder(capsys, root: Path, monkeypatch) -> None:
    monkeypatch.chdir(root)
    (root / "answer.md").write_text(ANSWER)
    code = main(["apply", "--update", "answer.md"])
    (root / "answer.md").unlink()
    assert code == 0 and tree(root) == {name: text.encode() for name, text in MERGED.items()}


def test_one_unplaceable_chunk_leaves_all_three_files_untouched(capsys, root: Path) -> None:
    before = tree(root)
    answer = ANSWER.replace(APP_BLOCK, NOWHERE)
    code, out, err = apply(capsys, root, answer, "--json")
    assert code == EXIT_UNPLACED and tree(root) == before
    summary = json.loads(out)
    (app,) = [f for f in summary["files"] if f["path"] == "src/app.py"]
    assert app["status"] == "unplaced" and app["unplaced"][0].startswith("update lines 4-5 of the block at answer line")
    assert "'def zzz():'" in app["unplaced"][0] and summary["written"] == []
    assert "nothing was written: src/app.py: could not place update lines 4-5" in err
    code, _, _ = apply(capsys, root, answer, "--partial")  # the rest of every file, when asked
    assert code == 0 and tree(root)["calc/mul.go"] == MERGED["calc/mul.go"].encode()


def test_a_merge_that_breaks_a_files_syntax_writes_no_file(capsys, root: Path) -> None:
    before = tree(root)
    broken = GO_BLOCK.replace("\treturn a * b\n}", "\treturn a * \n}")
    code, _, err = apply(capsys, root, ANSWER.replace(GO_BLOCK, broken))
    assert code == EXIT_SYNTAX and tree(root) == before
    assert "calc/mul.go: refusing an edit that breaks the syntax: it would break the go syntax (line 4" in err
    code, _, err = apply(capsys, root, ANSWER.replace(GO_BLOCK, broken), "--force")
    assert code == 0 and "written anyway (--force)" in err and b"return a * \n" in tree(root)["calc/mul.go"]


def test_a_failed_write_restores_the_files_already_written(capsys, root: Path, monkeypatch) -> None:
    """A fake rename that fails on the second file (a full disk, a lost permission: a real one
    cannot be provoked portably) stands for the failure; the first file gets its text back."""
    before = tree(root)
    real_replace = os.replace
    calls = []

    def fake_replace_failing_the_second(src, dst):
        calls.append(dst)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", fake_replace_failing_the_second)
    code, _, err = apply(capsys, root, ANSWER)
    assert code == EXIT_BAD_REQUEST and "could not write calc/mul.go: No space left on device" in err
    assert "restored" in err and tree(root) == before


# --- bad input: each leaves every file as it was -------------------------------------------------

def test_a_file_that_does_not_exist_is_refused_unless_create(capsys, root: Path) -> None:
    before = tree(root)
    answer = ANSWER + f"\n`src/new_mod.py`\n{F}python\ndef new():\n    return 1\n{F}\n"
    code, _, err = apply(capsys, root, answer)
    assert code == EXIT_BAD_REQUEST and tree(root) == before
    assert "src/new_mod.py: no such file under" in err and "--create" in err
    code, _, err = apply(capsys, root, answer, "--create")
    assert code == 0, err
    assert tree(root)["src/new_mod.py"] == b"def new():\n    return 1\n" and tree(root)["conf.py"] == MERGED["conf.py"].encode()


def test_a_new_file_whose_update_elides_code_is_refused(capsys, root: Path) -> None:
    before = tree(root)
    answer = f"`src/ghost.py`\n{F}python\n# ... existing code ...\nx = 1\n{F}\n"
    code, _, err = apply(capsys, root, answer, "--create")
    assert code == EXIT_BAD_REQUEST and tree(root) == before and "nothing to keep" in err


def test_two_blocks_for_the_same_file_are_refused(capsys, root: Path) -> None:
    before = tree(root)
    again = f"\n`./src/app.py`\n{F}python\ndef sub(a, b):\n    return b - a\n{F}\n"
    code, _, err = apply(capsys, root, ANSWER + again)
    assert code == EXIT_BAD_REQUEST and tree(root) == before
    assert "src/app.py: the answer has several blocks for this file (answer lines 4 and" in err


def test_a_diff_that_does_not_apply_is_an_unplaced_chunk(capsys, root: Path) -> None:
    before = tree(root)
    code, _, err = apply(capsys, root, ANSWER.replace("-version = 1", "-version = 7"))
    assert code == EXIT_UNPLACED and tree(root) == before
    assert "conf.py: could not place hunk @@ -1 at answer line" in err


@pytest.mark.parametrize("path, says", [
    ("../outside.py", "climbs out of the root"),
    ("src/../../outside.py", "climbs out of the root"),
    ("/etc/hostname", "is an absolute path"),
    ("C:/Windows/win.ini", "is an absolute path"),
    ("~/.bashrc", "is an absolute path"),
    (".git/config", "inside a version control folder"),
])
def test_a_path_outside_the_root_is_refused(capsys, root: Path, path: str, says: str) -> None:
    (root.parent / "outside.py").write_text("x = 1\n")
    before = tree(root)
    code, _, err = apply(capsys, root, ANSWER + f"\n`{path}`\n{F}python\nx = 2\n{F}\n", "--create")
    assert code == EXIT_BAD_REQUEST and tree(root) == before and says in err
    assert (root.parent / "outside.py").read_text() == "x = 1\n"


def test_a_symbolic_link_leading_out_of_the_root_is_refused(capsys, root: Path) -> None:
    outside = root.parent / "secret"
    outside.mkdir()
    (outside / "keys.py").write_text("KEY = 1\n")
    (root / "link").symlink_to(outside, target_is_directory=True)
    before = tree(root)
    code, _, err = apply(capsys, root, ANSWER + f"\n`link/keys.py`\n{F}python\nKEY = 2\n{F}\n")
    assert code == EXIT_BAD_REQUEST and tree(root) == before and "leads outside the root" in err
    assert (outside / "keys.py").read_text() == "KEY = 1\n"


def test_a_binary_file_is_refused(capsys, root: Path) -> None:
    (root / "logo.py").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    before = tree(root)
    code, _, err = apply(capsys, root, ANSWER + f"\n`logo.py`\n{F}\nx = 1\n{F}\n")
    assert code == EXIT_BAD_REQUEST and tree(root) == before and "logo.py: a binary file" in err


def test_a_file_over_apply_max_lines_is_refused(capsys, root: Path) -> None:
    before = tree(root)
    code, _, err = apply(capsys, root, ANSWER, "--apply-max-lines", "4")
    assert code == EXIT_BAD_REQUEST and tree(root) == before
    assert "src/app.py: file too large to apply an update to: 6 lines (applyMaxLines is 4)" in err
    assert "calc/mul.go: file too large" in err  # every refused file is named; conf.py (3 lines) is not


def test_a_grammar_that_fails_to_load_still_merges_and_says_so(capsys, root: Path, monkeypatch) -> None:
    """A fake loader stands for a broken grammar install: the merge (line rules) is written and
    the file's result says its syntax was not checked."""
    from engine.checks import syntax

    def fake_grammar_that_fails(name: str):
        raise OSError(f"cannot open shared object for {name}")

    monkeypatch.setattr(syntax, "_language", fake_grammar_that_fails)
    code, out, _ = apply(capsys, root, ANSWER, "--json")
    assert code == 0 and tree(root)["calc/mul.go"] == MERGED["calc/mul.go"].encode()
    (go,) = [f for f in json.loads(out)["files"] if f["path"] == "calc/mul.go"]
    assert go["syntax"]["parsed_before"] is None and "the go grammar did not load" in go["syntax"]["note"]
    assert any("the go grammar did not load" in w for w in go["warnings"])


def test_an_answer_that_names_no_file_says_how_to_name_one(capsys, root: Path) -> None:
    before = tree(root)
    code, _, err = apply(capsys, root, f"{F}python\nx = 1\n{F}\n")
    assert code == EXIT_BAD_REQUEST and tree(root) == before
    assert "the answer names no file (1 fenced block(s) without a path)" in err


def test_one_file_flags_are_refused_without_file(capsys, root: Path) -> None:
    code, _, err = apply(capsys, root, ANSWER, "--in-place")
    assert code == EXIT_BAD_REQUEST and "--in-place takes FILE" in err
    code, _, err = apply(capsys, root, ANSWER, "--output", str(root / "o.py"))
    assert code == EXIT_BAD_REQUEST and not (root / "o.py").exists()


# --- with FILE: the one file's block of an answer ------------------------------------------------

def test_with_file_an_answers_one_block_for_it_is_its_update(capsys, root: Path) -> None:
    target = root / "src/app.py"
    answer = root / "answer.md"
    answer.write_text(f"Here is the fix.\n\n{APP_BLOCK}\nThat is all.\n")
    assert main(["apply", str(target), "--update", str(answer), "--in-place"]) == 0
    assert target.read_text() == MERGED["src/app.py"]
    target.write_text(APP)
    answer.write_text(f"{F}python\ndef add(a, b):\n    return a + b\n# ... rest of the file unchanged ...\n{F}\n")
    assert main(["apply", str(target), "--update", str(answer), "--in-place"]) == 0  # the fence is the chat's
    assert target.read_text() == MERGED["src/app.py"]


def test_with_file_an_answer_naming_several_files_says_to_leave_file_out(capsys, root: Path) -> None:
    before = tree(root)
    (root / "answer.md").write_text(ANSWER)
    code = main(["apply", str(root / "src/app.py"), "--update", str(root / "answer.md"), "--in-place"])
    (root / "answer.md").unlink()
    err = " ".join(capsys.readouterr().err.split())
    assert code == EXIT_BAD_REQUEST and tree(root) == before
    assert "names 3 file block(s) (src/app.py, calc/mul.go, conf.py): leave FILE out" in err


def test_a_markdown_files_update_keeps_its_fences(capsys, tmp_path: Path) -> None:
    doc = tmp_path / "guide.md"
    doc.write_text("# Guide\n\nIntro.\n\n## Use\n\nOld text.\n")
    update = tmp_path / "u.md"
    update.write_text(f"## Use\n\n`src/app.py`\n{F}python\nx = 1\n{F}\n")
    assert main(["apply", str(doc), "--update", str(update), "--in-place"]) == 0
    assert f"`src/app.py`\n{F}python\nx = 1\n{F}\n" in doc.read_text() and doc.read_text().startswith("# Guide\n")
