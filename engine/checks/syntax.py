"""Does an edit break the code's syntax? A parser's verdict on the text before and after.

An edit that turns code that parsed into code that does not is treated like a destructive one
(the CLI refuses it without ``--force``, the language server asks first, the benchmarks count it).

Parsers: every language tree-sitter-language-pack has a grammar for (:data:`PARSER_FOR`: Go, Rust,
Java, JavaScript, TypeScript, C/C++, C#, Ruby, PHP and many more) uses that grammar; a file with an
ERROR or MISSING node does not parse. Python uses the interpreter's own
compiler (:func:`compile` to bytecode, never run): tree-sitter-python recovers silently from
indentation errors (``def f():\\nreturn 1`` parses without an error node), and indentation is
exactly what a model's line edit breaks most often; the compiler (not :func:`ast.parse` alone)
also reports what only its later passes find, such as a ``return`` that a lost indent moved out
of its function. The verdict is the running interpreter's: syntax newer than it counts as an
error (before the edit too, so such a file is never called broken by an edit). Languages without
a grammar, and a grammar that fails to load (the verdict's ``note`` says so), have no parser:
:func:`parses` answers ``None`` and nothing is ever called a break.

What to parse: callers pass the WHOLE document before and after the edit, which is what the
user's file is; a region on its own is often a fragment (an indented method body, a branch
that starts with ``else:``) that does not parse even when the edit is fine. Only when there is
no whole document, pass the region: a fragment that does not parse before the edit is never
called broken, so the fallback can miss breaks but never invents one.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from functools import cache

# Fence language (``engine.core.languages.language_for``) -> tree-sitter-language-pack's grammar
# name, where they differ; every other grammar of the pack serves the fence language of its name.
_GRAMMAR_NAMES = {"jsx": "javascript", "js": "javascript", "ts": "typescript", "c#": "csharp", "cs": "csharp",
                  "c++": "cpp", "sh": "bash", "shell": "bash", "zsh": "bash", "golang": "go", "rs": "rust",
                  "py": "python", "rb": "ruby", "kt": "kotlin", "yml": "yaml", "objective-c": "objc"}
# Grammars of the pack that are no programming language (a file of one always "parses").
_NOT_CODE = {"comment", "embeddedtemplate", "markdown_inline", "printf", "query", "test", "luap", "jsdoc",
             "doxygen", "luadoc", "regex"}


def _pack_languages() -> frozenset[str]:
    from typing import get_args

    try:
        from tree_sitter_language_pack import SupportedLanguage
    except ImportError:  # the pack is a dependency; without it only Python is checked
        return frozenset()
    return frozenset(get_args(SupportedLanguage)) - _NOT_CODE


# Fence language -> the parser that serves it ("python": the interpreter's compiler; others: the
# pack's grammar of that name).
PARSER_FOR = {**{name: name for name in _pack_languages()},
              **{alias: grammar for alias, grammar in _GRAMMAR_NAMES.items() if grammar in _pack_languages()},
              "python": "python"}


@dataclass(frozen=True)
class SyntaxProblem:
    """The first syntax error a parser reports: 1-based line and column, and what it is."""

    line: int
    column: int
    message: str

    def describe(self) -> str:
        return f"line {self.line}, column {self.column}: {self.message}"


def supported(language: str) -> bool:
    """True when ``language`` has a parser here."""
    return language.lower() in PARSER_FOR


def grammar_problem(language: str) -> str | None:
    """Why ``language``'s parser cannot run (its grammar failed to load), or None when it can (or
    the language has no parser at all)."""
    parser = PARSER_FOR.get(language.lower())
    if parser is None or parser == "python":
        return None
    try:
        _language(parser)
    except Exception as exc:  # noqa: BLE001 - any failure to load is the same to the caller
        return f"the {parser} grammar did not load ({type(exc).__name__}: {exc}): the syntax was not checked"
    return None


def first_error(text: str, language: str) -> SyntaxProblem | None:
    """The first syntax error in ``text``, or None when it parses (or the language has no parser,
    or its grammar did not load: :func:`grammar_problem`)."""
    parser = PARSER_FOR.get(language.lower())
    if parser is None:
        return None
    if parser == "python":
        return _python_error(text)
    if grammar_problem(language) is not None:
        return None
    return _tree_sitter_error(text, parser)


def parses(text: str, language: str) -> bool | None:
    """Whether ``text`` parses as ``language``; None when the language is not supported (or its
    grammar did not load)."""
    if not supported(language) or grammar_problem(language) is not None:
        return None
    return first_error(text, language) is None


def syntax_break(before: str, after: str, language: str) -> SyntaxProblem | None:
    """The error the edit introduced: ``after``'s first error when ``before`` parsed, else None."""
    if not supported(language) or grammar_problem(language) is not None or first_error(before, language) is not None:
        return None
    return first_error(after, language)


def breaks_syntax(before: str, after: str, language: str) -> bool:
    """True when ``before`` parses and ``after`` does not (unsupported languages: False)."""
    return syntax_break(before, after, language) is not None


@dataclass(frozen=True)
class SyntaxVerdict:
    """A parser's verdict on one edit (whole documents before and after), for the JSON outputs
    and the refusal messages. ``parsed_before``/``parses_after`` are None without a parser;
    ``note`` says why a language that has one was not checked (its grammar did not load)."""

    language: str
    parsed_before: bool | None
    parses_after: bool | None
    error: SyntaxProblem | None  # the first error after the edit, when there is one
    note: str = ""

    @property
    def breaks(self) -> bool:
        return self.parsed_before is True and self.parses_after is False

    def reason(self) -> str | None:
        """Why the edit must be confirmed ("would break the syntax ..."), None when it need not."""
        if not self.breaks or self.error is None:
            return None
        return f"would break the {self.language} syntax ({self.error.describe()}; it parsed before the edit)"

    def json(self) -> dict:
        error = None if self.error is None else {"line": self.error.line, "column": self.error.column,
                                                 "message": self.error.message}
        return {"language": self.language or None, "parsed_before": self.parsed_before,
                "parses_after": self.parses_after, "breaks": self.breaks, "error": error, "note": self.note or None}


def check_edit(before: str, after: str, language: str) -> SyntaxVerdict:
    """Parse both texts (pass whole documents: see the module docstring)."""
    if not supported(language):
        return SyntaxVerdict(language, None, None, None)
    problem = grammar_problem(language)
    if problem is not None:
        return SyntaxVerdict(language, None, None, None, note=problem)
    error = first_error(after, language)
    return SyntaxVerdict(language, first_error(before, language) is None, error is None, error)


# The languages an edit of a nameless file (an HTTP apply without a path) is judged in, most
# common first (:func:`sniffed_language`). Not PHP: text outside ``<?php`` is HTML, so any text
# parses as PHP, and nothing would ever be called broken.
SNIFFED = ("python", "javascript", "typescript", "tsx", "go", "rust", "java", "c", "cpp", "csharp", "ruby")


def sniffed_language(before: str, after: str) -> str:
    """The language to judge an edit of a file whose name is unknown: among :data:`SNIFFED`, those
    whose parser accepts ``before``; the first of them that accepts ``after`` too (the edit breaks
    nothing), else the first of them (it breaks the file in every language it was valid in, so it
    breaks the file's own). "" when no parser accepts ``before``. Never a false break: a break is
    called only when ``after`` parses in none of the languages ``before`` parsed in."""
    candidates = [language for language in SNIFFED if supported(language) and parses(before, language)]
    if not candidates:
        return ""
    return next((language for language in candidates if first_error(after, language) is None), candidates[0])


def _python_error(text: str) -> SyntaxProblem | None:
    """CPython's compiler (to bytecode that is thrown away: nothing runs); warnings are not errors."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(text, "<edit>", "exec", dont_inherit=True)
    except SyntaxError as error:  # IndentationError and TabError are SyntaxErrors
        return SyntaxProblem(error.lineno or 1, error.offset or 1, error.msg)
    except (ValueError, RecursionError, MemoryError) as error:  # null bytes, absurd nesting
        return SyntaxProblem(1, 1, f"{type(error).__name__}: {error}")
    return None


@cache
def _language(name: str):
    """The pack's grammar ``name`` (loaded once; a failure is raised again on each call)."""
    from tree_sitter_language_pack import get_language

    return get_language(name)  # type: ignore[arg-type]


def _tree_sitter_error(text: str, name: str) -> SyntaxProblem | None:
    """The first ERROR or MISSING node in document order (a fresh parser per call: thread-safe)."""
    import tree_sitter

    tree = tree_sitter.Parser(_language(name)).parse(text.encode("utf-8"))
    node = tree.root_node
    if not node.has_error:
        return None
    while True:
        if node.is_missing:
            return _problem(text, node.start_point, f"missing {node.type!r}")
        if node.is_error:
            found = node.text.decode("utf-8", "replace").strip().splitlines()
            return _problem(text, node.start_point, f"unexpected {found[0][:40]!r}" if found else "unexpected input")
        node = next((child for child in node.children if child.has_error or child.is_missing), None)
        if node is None:  # has_error without a marked child: report the start
            return SyntaxProblem(1, 1, "syntax error")


def _problem(text: str, point, message: str) -> SyntaxProblem:
    """Convert tree-sitter's 0-based (row, byte column) to a 1-based (line, character column)."""
    row, byte_column = point
    lines = text.encode("utf-8").split(b"\n")
    line = lines[row] if row < len(lines) else b""
    return SyntaxProblem(row + 1, len(line[:byte_column].decode("utf-8", "replace")) + 1, message)
