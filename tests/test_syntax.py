"""engine.checks.syntax: real parsers (CPython's for Python, tree-sitter for JavaScript) judge an edit."""

from engine.checks.syntax import breaks_syntax, first_error, parses, syntax_break

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
    assert parses("fn main( {", "rust") is None
    assert not breaks_syntax("fn main() {}", "fn main( {", "rust")


def test_column_counts_characters_not_bytes():
    text = "const s = 'é'; const b = ;\n"
    problem = first_error(text, "javascript")
    assert problem is not None and problem.column == text.index("= ;") + 1  # 'é' is 2 bytes, 1 column
