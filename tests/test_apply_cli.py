"""`copy-as-decode apply`: every bad input gets a clear answer and leaves the file as it was; the
merges the aligner answers (the default mode) are written without loading a model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.cli import main
from engine.verdict import EXIT_UNPLACED

FILE = "def f(x):\n    return x + 1\n\n\ndef g(y):\n    return y\n"
UPDATE = "# ... existing code ...\ndef g(y):\n    return y * 2\n"
MERGED = FILE.replace("return y\n", "return y * 2\n")


def run(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        code = main(["apply", *argv])
    except SystemExit as exc:
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, " ".join(captured.err.split())  # rich wraps at the terminal's width


@pytest.fixture()
def files(tmp_path: Path) -> tuple[Path, Path]:
    target, update = tmp_path / "f.py", tmp_path / "u.py"
    target.write_text(FILE)
    update.write_text(UPDATE)
    return target, update


def test_merge_in_place(capsys, files) -> None:
    target, update = files
    code, _, _ = run(capsys, str(target), "--update", str(update), "--in-place")
    assert code == 0 and target.read_text() == MERGED


def test_json_has_the_edit_shape_and_unplaced(capsys, files, tmp_path: Path) -> None:
    target, update = files
    code, out, _ = run(capsys, str(target), "--update", str(update), "--json", "--output", str(tmp_path / "o.py"))
    summary = json.loads(out)
    assert code == 0 and summary["unplaced"] == [] and summary["stop_reason"] == "done"
    # g is shown without a marker inside: the update's g replaces the file's whole
    assert summary["program"] == '<program><copy lines="1-4"/><copy update="2-3"/></program>'
    assert {"syntax", "damage", "refused", "written", "compare"} <= set(summary)
    assert (tmp_path / "o.py").read_text() == MERGED and target.read_text() == FILE


def test_update_from_standard_input(capsys, files, monkeypatch) -> None:
    import io
    import sys

    target, _ = files
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(UPDATE.encode())))
    code, _, _ = run(capsys, str(target), "--update", "-", "--in-place")
    assert code == 0 and target.read_text() == MERGED


def bad(capsys, target: Path, update_text: str | bytes, *flags: str) -> tuple[int, str]:
    update = target.parent / "bad_update"
    if isinstance(update_text, bytes):
        update.write_bytes(update_text)
    else:
        update.write_text(update_text)
    code, _, err = run(capsys, str(target), "--update", str(update), "--in-place", *flags)
    return code, err


@pytest.mark.parametrize("update,message", [
    ("", "update is empty"),
    ("\n  \n", "update is empty"),
    (b"\x00\x01binary", "binary"),
    ("x = 1\n".encode("utf-16"), "not UTF-8"),
    ("x\n" * 6000, "too large"),
])
def test_bad_updates_leave_the_file(capsys, files, update, message: str) -> None:
    target, _ = files
    code, err = bad(capsys, target, update)
    assert code == 2 and message in err and target.read_text() == FILE


def test_unmatched_update_is_named_and_nothing_written(capsys, files) -> None:
    target, _ = files
    code, err = bad(capsys, target, "# ...\ndef zz():\n    pass\n# ...\n")
    assert code == EXIT_UNPLACED and "update lines 2-3" in err and target.read_text() == FILE


def test_partial_writes_what_was_placed(capsys, files) -> None:
    target, _ = files
    update = "# ...\ndef zz():\n    pass\n# ...\ndef g(y):\n    return y * 2\n"
    code, err = bad(capsys, target, update)
    assert code == EXIT_UNPLACED and target.read_text() == FILE
    code, _ = bad(capsys, target, update, "--partial")
    assert code == 0 and target.read_text() == MERGED


def test_whole_new_file_is_written_as_is(capsys, files) -> None:
    target, _ = files
    new = FILE.replace("x + 1", "x + 2").replace("return y\n", "return -y\n")
    code, _ = bad(capsys, target, new)
    assert code == 0 and target.read_text() == new


def test_file_over_the_apply_limit(capsys, files) -> None:
    target, _ = files
    code, err = bad(capsys, target, UPDATE, "--apply-max-lines", "3")
    assert code == 2 and "applyMaxLines" in err and target.read_text() == FILE


def test_crlf_file_merges_in_crlf(capsys, files) -> None:
    target, _ = files
    target.write_bytes(FILE.replace("\n", "\r\n").encode())
    code, _ = bad(capsys, target, UPDATE)
    assert code == 0 and target.read_bytes() == MERGED.replace("\n", "\r\n").encode()


def test_tabs_are_reindented_to_the_files_spaces(capsys, files) -> None:
    target, _ = files
    code, _ = bad(capsys, target, "def g(y):\n\treturn y * 2\n")
    assert code == 0 and target.read_text() == MERGED


def test_non_utf8_file(capsys, files) -> None:
    target, update = files
    target.write_bytes("x = 'caf\xe9'\n".encode("latin-1"))
    code, _, err = run(capsys, str(target), "--update", str(update), "--in-place")
    assert code == 2 and "not UTF-8" in err


def test_syntax_breaking_merge_is_refused(capsys, files) -> None:
    target, _ = files
    code, err = bad(capsys, target, "# ... existing code ...\ndef g(y):\n    return (y * 2\n")
    assert code == 5 and target.read_text() == FILE


def test_bad_flags(capsys, files) -> None:
    target, update = files
    code, _, err = run(capsys, str(target), "--update", str(update), "--compare", "pld")
    assert code == 2 and "unknown mode" in err
    code, _, err = run(capsys, str(target), "--update", str(target.parent / "nope.py"))
    assert code == 2 and "no such file" in err
