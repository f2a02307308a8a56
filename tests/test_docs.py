"""The docs a newcomer reads stay usable: the README short, every link in them resolving inside the
repository, and no development-history wording anywhere in the tracked tree (git log carries the
history; CHANGELOG.md carries it as versions)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HISTORY_EXEMPT = {"CHANGELOG.md"}
# Wording that dates a text by the project's own development steps instead of saying what is true
# now. Written so that this file's own text does not match them: it is checked like any other.
HISTORY = [re.compile(p, re.IGNORECASE) for p in (
    r"\bstops? #?\d+",
    r"\bstop-\d+",
    r"\bissues? #?\d+",
    r"\bsince\s+stop\b",
    r"\bat\s+the\s+time\s+of\b",
    r"\brounds?\s+of\s+work\b",
)]
README_MAX_LINES = 250
LINKED_DOCS = ["README.md", "lsp_server/README.md", "vscode-client/README.md", *(
    p.relative_to(ROOT).as_posix() for p in sorted((ROOT / "docs").glob("*.md")))]
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def tracked_files() -> list[str]:
    """Every file git tracks (the tree a fresh clone gets)."""
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: no tracked tree to check")
    return [name for name in out.decode("utf-8").split("\0") if name]


def text_of(path: Path) -> str | None:
    """The file's text, or None for a binary (a NUL byte, or not UTF-8) or a file missing from the work tree."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if b"\0" in data[:8192]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def history_lines(name: str, text: str) -> list[str]:
    """``file:line: text`` for every line of ``text`` with development-history wording."""
    return [f"{name}:{number}: {line.strip()[:160]}" for number, line in enumerate(text.splitlines(), 1)
            if any(pattern.search(line) for pattern in HISTORY)]


def test_the_history_patterns_catch_what_they_are_for() -> None:
    """The patterns find the wording they name and leave ordinary prose alone, so the tree test can fail."""
    # each sample cut in two and joined here, so that the file itself holds none of them
    samples = (("measured at st", "op 27"), ("St", "op 22's runs"), ("the st", "op-20 policy"), ("(iss", "ue 15 part 5)"),
               ("Iss", "ue #8"), ("since st", "op 26"), ("at the ti", "me of that table"), ("one round of wo", "rk"))
    for dated in ("".join(halves) for halves in samples):
        assert history_lines("x", dated), dated
    for present in ("a loop stops the decode", "exit status 3", "the issue tracker", "stop at 3 tokens"):
        assert not history_lines("x", present), present


def test_no_development_history_wording_in_the_tracked_tree() -> None:
    found: list[str] = []
    for name in tracked_files():
        if name in HISTORY_EXEMPT or name.startswith(".git/"):
            continue
        text = text_of(ROOT / name)
        if text is not None:
            found.extend(history_lines(name, text))
    assert not found, "development-history wording (say the present fact; git log keeps history):\n" + "\n".join(found)


def test_the_readme_is_short() -> None:
    lines = len((ROOT / "README.md").read_text(encoding="utf-8").splitlines())
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; at most {README_MAX_LINES} (the depth goes in docs/)"


def slug(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def prose_lines(text: str) -> list[str]:
    """The lines of a Markdown text outside fenced code blocks."""
    out, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            out.append(line)
    return out


def anchors(path: Path) -> set[str]:
    return {slug(line.lstrip("#")) for line in prose_lines(path.read_text(encoding="utf-8")) if line.startswith("#")}


def broken_links(name: str) -> list[str]:
    """Every relative link of a Markdown file that does not reach an existing file (or heading)
    inside the repository."""
    source = ROOT / name
    problems = []
    for line in prose_lines(source.read_text(encoding="utf-8")):
        for target in LINK.findall(line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
                continue
            path_part, _, anchor = target.partition("#")
            path = (source.parent / path_part).resolve() if path_part else source
            if not path.is_relative_to(ROOT):
                problems.append(f"{name}: {target} points outside the repository")
            elif not path.exists():
                problems.append(f"{name}: {target} does not exist")
            elif anchor and path.suffix == ".md" and anchor not in anchors(path):
                problems.append(f"{name}: {target} names no heading of {path.relative_to(ROOT)}")
    return problems


@pytest.mark.parametrize("name", LINKED_DOCS)
def test_every_link_resolves_inside_the_repository(name: str) -> None:
    assert not broken_links(name), "\n".join(broken_links(name))
    text = (ROOT / name).read_text(encoding="utf-8")
    assert "../shared" not in text, (
        f"{name} points at ../shared: the data folder is the setting COPY_AS_DECODE_SHARED (docs/configuration.md)")


def test_the_link_check_catches_a_broken_link(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A missing file, a path outside the repository and an unknown heading are each reported."""
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A title\n")
    (tmp_path / "README.md").write_text(
        "[ok](docs/a.md#a-title) [web](https://example.org)\n```\n[in code](nowhere.md)\n```\n"
        "[gone](docs/b.md) [out](../shared/DESIGN.md) [anchor](docs/a.md#nope)\n")
    problems = broken_links("README.md")
    assert [p.split(": ", 1)[1].split(" ")[0] for p in problems] == [
        "docs/b.md", "../shared/DESIGN.md", "docs/a.md#nope"], problems
