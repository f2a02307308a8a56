"""engine.checks.syntax: real parsers (CPython's for Python, tree-sitter-language-pack's grammars for
the rest) judge an edit."""

import pytest

from engine.checks import syntax
from engine.checks.syntax import breaks_syntax, check_edit, first_error, parses, syntax_break
from engine.core.languages import language_for

FLATTEN = '''def flatten(arr):
    for x in arr:
        if isinstance(x, list):
            for y in flatten(x):
                yield y
        else:
            yield flatten(x)
'''


def test_python_indentation_break_is_caught():
    """tree-sitter-python accepts this; the interpreter's parser does not, and neither do we."""
    after = FLATTEN.replace("        else:\n", "        elif isinstance(x, list):\n", 1).replace(
        "            yield flatten(x)\n", "yield x\n")
    assert parses(FLATTEN, "python") is True
    assert breaks_syntax(FLATTEN, after, "python")
    problem = syntax_break(FLATTEN, after, "python")
    assert problem is not None and problem.line == 7


def test_a_return_moved_out_of_its_function_is_caught():
    """Parses as a module (ast.parse accepts it); the compiler does not, nor does Python on import."""
    before = "def f(x):\n    y = x\n    return y\n"
    problem = syntax_break(before, "def f(x):\n    y = x\nreturn y\n", "python")
    assert problem is not None and problem.line == 3 and "outside function" in problem.message


def test_python_rewrite_of_else_into_elif_without_body_change_parses():
    after = FLATTEN.replace("        else:\n", "        elif not isinstance(x, list):\n", 1)
    assert not breaks_syntax(FLATTEN, after, "python")


def test_docstring_opening_replaced_breaks():
    before = 'def f(x):\n    """Doc.\n\n    More.\n    """\n    return x\n'
    after = before.replace('    """Doc.\n', "        if isinstance(x, list):\n", 1)
    assert breaks_syntax(before, after, "python")


def test_fragment_that_did_not_parse_is_never_called_broken():
    fragment = "    else:\n        return 1\n"
    assert parses(fragment, "python") is False
    assert not breaks_syntax(fragment, "    else:\n    return 1 +\n", "python")


def test_javascript_missing_brace_and_stray_token():
    before = "function add(a, b) {\n  return a - b;\n}\n"
    assert parses(before, "javascript") is True
    missing = first_error("function add(a, b) {\n  return a + b;\n", "javascript")
    assert missing is not None and "missing" in missing.message and missing.line == 2
    stray = syntax_break(before, "function add(a, b) {\n  return a + ;\n}\n", "javascript")
    assert stray is not None and stray.line == 2
    assert not breaks_syntax(before, before.replace("-", "+"), "javascript")


def test_jsx_uses_the_javascript_grammar():
    assert parses("const x = <div>{a}</div>;\n", "jsx") is True


def test_unsupported_language_has_no_verdict():
    assert parses("fn main( {", "klingon") is None and parses("fn main( {", "") is None
    assert not breaks_syntax("fn main() {}", "fn main( {", "klingon")
    assert check_edit("a", "b (", "klingon").json()["parsed_before"] is None


# (file name, a file that parses, the same file with a break, the break's line)
BREAKS = [
    ("main.go", "package main\n\nfunc add(a, b int) int {\n\treturn a + b\n}\n",
     "package main\n\nfunc add(a, b int) int {\n\treturn a + \n}\n", 5),
    ("lib.rs", "fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n",
     "fn add(a: i32, b: i32) -> i32 {\n    let x = ;\n    a + b\n}\n", 2),
    ("Add.java", "class Add {\n  int add(int a, int b) {\n    return a + b;\n  }\n}\n",
     "class Add {\n  int add(int a, int b) {\n    return a + b\n  }\n}\n", 3),
    ("add.ts", "export function add(a: number, b: number): number {\n  return a + b;\n}\n",
     "export function add(a: number, b: number: number {\n  return a + b;\n}\n", 1),
    ("App.tsx", "export const App = () => <div>{1}</div>;\n", "export const App = () => <div>{1}</div;\n", 1),
    ("add.c", "int add(int a, int b) {\n  return a + b;\n}\n", "int add(int a, int b) {\n  return a + b;\n", 3),
    ("add.rb", "def add(a, b)\n  a + b\nend\n", "def add(a, b)\n  a + (b\nend\n", 2),
    ("Add.cs", "class A {\n  int Add(int a, int b) { return a + b; }\n}\n",
     "class A {\n  int Add(int a, int b) { return a + ; }\n}\n", 2),
]


@pytest.mark.parametrize("name, good, broken, line", BREAKS, ids=[case[0] for case in BREAKS])
def test_every_language_of_the_pack_is_checked(name: str, good: str, broken: str, line: int) -> None:
    """The file's suffix picks the grammar; a break is found at its line, a clean edit passes."""
    language = language_for(name)
    assert syntax.supported(language) and parses(good, language) is True
    verdict = check_edit(good, broken, language)
    assert verdict.breaks and verdict.error is not None and verdict.error.line >= line - 1, verdict
    assert verdict.reason() is not None and f"line {verdict.error.line}" in verdict.reason()
    assert not check_edit(good, good.replace("a + b", "b + a"), language).breaks
    assert not check_edit(broken, broken + "\n", language).breaks  # it did not parse before: never refused


def test_a_grammar_that_fails_to_load_checks_nothing_and_says_so(monkeypatch) -> None:
    """A fake loader (a real grammar cannot be made to fail to load here) raises as a broken
    install would: no verdict, and the note names the grammar."""

    def fake_grammar_that_fails(name: str):
        raise OSError(f"cannot open shared object for {name}")

    monkeypatch.setattr(syntax, "_language", fake_grammar_that_fails)
    go_good, go_broken = BREAKS[0][1], BREAKS[0][2]
    verdict = check_edit(go_good, go_broken, "go")
    assert not verdict.breaks and verdict.parsed_before is None and parses(go_good, "go") is None
    assert "the go grammar did not load" in verdict.note and verdict.json()["note"] == verdict.note
    assert check_edit("x = 1\n", "x = (\n", "python").breaks  # Python's compiler needs no grammar


def test_column_counts_characters_not_bytes():
    text = "const s = 'é'; const b = ;\n"
    problem = first_error(text, "javascript")
    assert problem is not None and problem.column == text.index("= ;") + 1  # 'é' is 2 bytes, 1 column
