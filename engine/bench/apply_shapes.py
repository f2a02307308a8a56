"""Held-out apply cases by definition shape, in six languages, from sources no training case is
cut from (never the evaluation corpora): Python's standard library, the JDK's ``src.zip``
(java.base), the JavaScript packages code-server ships, this repository's TypeScript (the
VS Code client, as of the pinned commit engine.bench.pinned reads: a change to the client never
changes the cases), Git's contrib Go sources and Rust's standard library (its rustdoc source pages,
read back to text). A language whose sources this machine lacks has no cases (:func:`sources`
says which it found).

Each case changes one definition of a whole source file and writes the update the way chat
models do (:data:`SHAPES`); the gold is the file with that definition's lines replaced:

* ``whole-function``: the changed function whole, no markers (in half the cases of every shape
  the body is rewritten: every other statement replaced);
* ``rename``: the function renamed (and a line of it changed), between marker comments;
* ``signature``: a parameter added and a line changed, the function whole, no markers;
* ``class-method``: a method changed, shown inside its class's header between markers (and the
  class's closing line in a brace language);
* ``decorator``: a decorator, attribute or annotation added and a line changed, no markers;
* ``nested``: a definition nested in another changed, shown inside its parent between markers.
"""

from __future__ import annotations

import html
import random
import re
import sysconfig
import zipfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Iterator

from engine.apply.definitions import Definition, grammar_of, parse_definitions
from engine.bench.apply_cases import TYPESCRIPT_FOLDERS
from engine.bench.pinned import pinned_files
from engine.training.apply.updates import ApplyCase

ROOT = Path(__file__).resolve().parents[2]
SHAPES = ("whole-function", "rename", "signature", "class-method", "decorator", "nested")
SHAPE_LANGUAGES = ("python", "javascript", "typescript", "java", "go", "rust")
COMMENT = {"python": "#"}
MARKER = "... existing code ..."
EXTRA_PARAMETER = {"python": "extra=None", "javascript": "extra", "typescript": "extra?: number",
                   "java": "int extra", "go": "extra int", "rust": "extra: usize"}
DECORATION = {"python": "@traced", "typescript": "@traced", "java": "@Deprecated", "rust": "#[inline]"}
NEW_STATEMENT = {"python": 'log_event("{name}")', "javascript": 'logEvent("{name}");',
                 "typescript": 'logEvent("{name}");', "java": 'logEvent("{name}");', "go": 'logEvent("{name}")',
                 "rust": 'log_event("{name}");'}
MAX_FILE_LINES = 3000
STATEMENT_LISTS = ("block", "statement_block", "statement_list", "compound_statement", "constructor_body")
MAX_DEFINITION_LINES = 80
JDK_PACKAGES = ("java.base/java/util/", "java.base/java/io/", "java.base/java/time/", "java.base/java/text/")
RUST_DIRS = ("std/collections", "alloc/collections", "std/sync", "core/str", "std/io", "std/fs.rs")


@dataclass(frozen=True)
class Source:
    """A source file's text and where it came from."""

    name: str
    text: str


def _lines_ok(text: str) -> bool:
    return 40 <= text.count("\n") <= MAX_FILE_LINES and "\r" not in text and "\t" not in text.split("\n", 1)[0]


@lru_cache(maxsize=None)
def sources(language: str) -> tuple[Source, ...]:
    """The language's source files on this machine, in a fixed order (empty when none)."""
    found: list[Source] = []
    if language == "python":
        stdlib = Path(sysconfig.get_paths()["stdlib"])
        found = [Source(f"stdlib/{p.name}", p.read_text(encoding="utf-8", errors="replace"))
                 for p in sorted(stdlib.glob("*.py"))]
    elif language == "java":
        for zipped in sorted(Path("/usr/lib/jvm").glob("*/lib/src.zip"))[:1]:
            with zipfile.ZipFile(zipped) as archive:
                names = sorted(n for n in archive.namelist() if n.endswith(".java") and n.startswith(JDK_PACKAGES))
                found = [Source(f"jdk/{n}", archive.read(n).decode("utf-8", "replace")) for n in names]
    elif language == "javascript":
        base = Path.home() / ".cache/copy-as-decode"
        for folder in sorted(base.glob("code-server-*/node_modules")):
            paths = sorted(p for p in folder.rglob("*.js") if not p.name.endswith(".min.js") and "dist" not in p.parts)
            found = [Source(f"code-server/{p.relative_to(folder)}", p.read_text(encoding="utf-8", errors="replace"))
                     for p in paths[:400]]
    elif language == "typescript":
        found = [Source(str(p.path), p.text) for p in sorted(
            (f for folder in TYPESCRIPT_FOLDERS for f in pinned_files(folder, ".ts") if str(f.path.parent) == folder),
            key=lambda f: f.path.parts)]
    elif language == "go":
        found = [Source(f"git-contrib/{p.name}", p.read_text(encoding="utf-8"))
                 for p in sorted(Path("/usr/share/doc/git/contrib").rglob("*.go"))]
    elif language == "rust":
        for html_root in sorted(Path.home().glob(".rustup/toolchains/stable-*/share/doc/rust/html/src"))[:1]:
            pages = sorted(p for d in RUST_DIRS for p in ((html_root / d).rglob("*.rs.html") if (html_root / d).is_dir()
                                                            else [html_root / f"{d}.html"]) if p.is_file())
            found = [Source(f"rust/{p.relative_to(html_root)}", _rustdoc_source(p.read_text(encoding="utf-8")))
                     for p in pages]
    return tuple(s for s in found if _lines_ok(s.text))


def _rustdoc_source(page: str) -> str:
    """The Rust source a rustdoc source page shows (its line numbers and markup removed)."""
    match = re.search(r'<pre class="rust"><code>(.*?)</code></pre>', page, re.S)
    if match is None:
        return ""
    code = re.sub(r"<a href=#\d+ id=\d+ data-nosnippet>\d+</a>", "", match.group(1))
    text = html.unescape(re.sub(r"<[^>]+>", "", code))
    return text if text.endswith("\n") else text + "\n"


def _comment(language: str) -> str:
    return COMMENT.get(language, "//")


def _indent(line: str) -> str:
    return line[:len(line) - len(line.lstrip(" \t"))]


def _unique_functions(defs: list[Definition], lines: list[str]) -> list[Definition]:
    every = [d for top in defs for d in top.walk()]
    names: dict[str, int] = {}
    for d in every:
        names[d.name] = names.get(d.name, 0) + 1
    return [d for d in every if d.kind == "function" and names[d.name] == 1 and 4 <= d.end - d.start
            <= MAX_DEFINITION_LINES and d.header < d.end - 2 and re.fullmatch(r"\w+", d.name)]


def _parse(text: str, language: str):  # type: ignore[no-untyped-def]
    from tree_sitter_language_pack import get_parser

    return get_parser(grammar_of(language)).parse(text.encode("utf-8"))  # type: ignore[arg-type]


def _broken(text: str, language: str) -> bool:
    return bool(_parse(text, language).root_node.has_error)


def _statement_rows(language: str, text: str) -> set[int]:
    """The lines that hold one whole statement of ``text`` (from a tree-sitter parse)."""
    lines = text.splitlines()
    rows: set[int] = set()
    stack = [_parse(text, language).root_node]
    while stack:
        node = stack.pop()
        stack.extend(node.named_children)
        kind = node.type
        row = node.start_point.row
        if row == node.end_point.row and not node.has_error and node.start_point.column == len(_indent(lines[row])) and (
                kind.endswith("_statement") or kind in ("let_declaration", "short_var_declaration",
                                                         "local_variable_declaration", "lexical_declaration",
                                                         "variable_declaration")
                or (node.parent is not None and node.parent.type in STATEMENT_LISTS)) and "function" not in kind \
                and "class" not in kind and "definition" not in kind:
            rows.add(node.start_point.row)
    return rows


def _statement_line(language: str, lines: list[str], d: Definition, rows: set[int]) -> int | None:
    """A body line holding one statement after which a new one may stand (the same indentation
    follows it)."""
    for i in range(d.header + 1, d.end - 1):
        line, after = lines[i], lines[i + 1]
        if i in rows and after.strip() and _indent(after) == _indent(line) and line[len(_indent(line)):][:1].isalpha() \
                and not after.strip().startswith((")", "]", "}", ".", "else", "elif", "except", "finally", "case",
                                                 "default")):
            return i
    return None


def _changed_body(language: str, lines: list[str], d: Definition, rows: set[int],
                  rewrite: bool = False) -> list[str] | None:
    """``d``'s lines with a new statement after one of its body's statements; ``rewrite``: and
    every other one-line statement of its body replaced by a new one too (a body rewritten, the
    shape whose old body the line rules left in place)."""
    at = _statement_line(language, lines, d, rows)
    if at is None:
        return None
    statement = NEW_STATEMENT[language]
    out = []
    for k, i in enumerate(range(d.start, d.end)):
        line = lines[i]
        if rewrite and i in rows and i != at and d.header < i < d.end - 1 and k % 2 == 0 and \
                line[len(_indent(line)):][:1].isalpha():
            line = _indent(line) + statement.format(name=f"{d.name}_{k}") + "\n"
        out.append(line)
        if i == at:
            out.append(_indent(lines[at]) + statement.format(name=d.name) + "\n")
    return out


def _with_parameter(language: str, header: str, name: str) -> str | None:
    at = header.find(name + "(")
    if at < 0:
        return None
    open_at = at + len(name)
    depth, close_at = 0, -1
    for k in range(open_at, len(header)):
        depth += {"(": 1, ")": -1}.get(header[k], 0)
        if depth == 0:
            close_at = k
            break
    if close_at < 0:
        return None
    inside = header[open_at + 1:close_at].strip()
    extra = EXTRA_PARAMETER[language]
    if inside.endswith(","):
        return None
    return header[:close_at] + (f", {extra}" if inside else extra) + header[close_at:]


def make_shape_case(source: Source, language: str, shape: str, rng: random.Random) -> ApplyCase | None:
    """One case of ``shape`` from ``source`` (None when the file has no definition it fits)."""
    lines = source.text.splitlines(keepends=True)
    if _broken(source.text, language):
        return None  # a file that does not parse is no case of a shape
    defs = parse_definitions(lines, language)
    if not defs:
        return None
    parents = {id(c): d for top in defs for d in top.walk() for c in d.children}
    candidates = _unique_functions(defs, lines)
    if shape == "class-method":
        candidates = [d for d in candidates if id(d) in parents and parents[id(d)].kind == "container"]
    elif shape == "nested":
        candidates = [d for d in candidates if len(d.path) >= 3 or (id(d) in parents and
                                                                    parents[id(d)].kind == "function")]
    elif shape in ("whole-function", "rename", "signature", "decorator"):
        candidates = [d for d in candidates if len(d.path) <= 2]
    rng.shuffle(candidates)
    rows = _statement_rows(language, source.text)
    for d in candidates[:8]:
        case = _case(source, language, shape, lines, d, parents, rows, rewrite=rng.random() < 0.5)
        if case is not None:
            return case
    return None


def _case(source: Source, language: str, shape: str, lines: list[str], d: Definition,
          parents: dict[int, Definition], rows: set[int], rewrite: bool) -> ApplyCase | None:
    changed = _changed_body(language, lines, d, rows, rewrite)
    if changed is None:
        return None
    h = d.header - d.start
    mark = _comment(language)
    if shape == "rename":
        new_name = d.name + "_renamed" if "_" in d.name or language in ("python", "rust") else d.name + "Renamed"
        if new_name in "".join(lines) or d.name not in changed[h]:
            return None
        changed[h] = re.sub(rf"\b{re.escape(d.name)}\b", new_name, changed[h], count=1)
    elif shape == "signature":
        header = _with_parameter(language, changed[h], d.name)
        if header is None:
            return None
        changed[h] = header
    elif shape == "decorator":
        if language not in DECORATION or (language == "typescript" and len(d.path) < 2):
            return None
        changed.insert(0, _indent(lines[d.start]) + DECORATION[language] + "\n")
    gold = "".join([*lines[:d.start], *changed, *lines[d.end:]])
    if _broken(gold, language):
        return None  # the change itself broke the file (a statement that was part of another)
    indent = _indent(lines[d.start])
    if shape in ("whole-function", "signature", "decorator"):
        update = "".join(changed)
    elif shape == "rename":
        update = f"{indent}{mark} {MARKER}\n" + "".join(changed) + f"{indent}{mark} {MARKER}\n"
    else:
        parent = parents.get(id(d))
        if parent is None:
            return None
        head_end = parent.header
        while head_end < d.start and not lines[head_end].rstrip().endswith(("{", ":")):
            head_end += 1
        if head_end >= d.start:
            return None
        closing = lines[parent.end - 1] if language != "python" and lines[parent.end - 1].strip().startswith("}") \
            else ""
        update = ("".join(lines[parent.start:head_end + 1]) + f"{indent}{mark} {MARKER}\n" + "".join(changed)
                  + f"{indent}{mark} {MARKER}\n" + closing)
    name = f"{language}-{shape}-{source.name}:{d.dotted}"
    return ApplyCase(name, language, shape, source.text.count("\n"), source.text, update, gold)


def shape_cases(per_shape: int = 10, seed: int = 0) -> Iterator[ApplyCase]:
    """``per_shape`` cases of every shape in every language whose sources are here (seeded; a
    source a shape does not fit is passed for the next)."""
    for language in SHAPE_LANGUAGES:
        files = sources(language)
        for shape in SHAPES:
            rng = random.Random(f"{seed}-{language}-{shape}")
            order = list(range(len(files)))
            rng.shuffle(order)
            made = 0
            for k in order:
                if made >= per_shape:
                    break
                case = make_shape_case(files[k], language, shape, rng)
                if case is not None:
                    made += 1
                    yield case
