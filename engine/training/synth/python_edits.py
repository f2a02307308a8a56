"""Python edit generators: one injected bug per HumanEvalFix class, and instructed edits.

Every edit rewrites the *source text* of one node span or whole lines (found with ``ast``), so the
formatting outside the changed line(s) is the original's byte for byte; ``ast.unparse`` is never
used on a function. Each built edit is re-parsed and must differ from the original in its AST
(bugs) or equal the program-computed AST (renames). Nodes inside f-strings are never touched:
before Python 3.12 their positions are unreliable.
"""

from __future__ import annotations

import ast
import bisect
import builtins
import io
import keyword
import random
import re
import tokenize
from dataclasses import dataclass, field
from typing import Callable, Iterator

from engine.core.lines import line_offsets, split_lines
from engine.training.synth.edits import Edit, Site

_BINOP_SYMBOL = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
                 ast.Pow: "**", ast.LShift: "<<", ast.RShift: ">>", ast.BitOr: "|", ast.BitAnd: "&",
                 ast.BitXor: "^"}
_BINOP_SWAPS = {"+": ["-"], "-": ["+"], "*": ["/", "+"], "/": ["*", "//"], "//": ["/", "%"], "%": ["//"],
                "**": ["*"], "<<": [">>"], ">>": ["<<"], "|": ["&"], "&": ["|"], "^": ["|"]}
_COMPARE_SYMBOL = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=",
                   ast.In: "in", ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not"}
_COMPARE_SWAPS = {"<": ["<=", ">"], "<=": ["<", ">="], ">": [">=", "<"], ">=": [">", "<="], "==": ["!="],
                  "!=": ["=="], "in": ["not in"], "not in": ["in"], "is": ["is not"], "is not": ["is"]}
_AUG_SWAPS = {"+=": ["-="], "-=": ["+="], "*=": ["/=", "+="], "/=": ["*="], "//=": ["/="], "|=": ["&="],
              "&=": ["|="], "%=": ["//="], "<<=": [">>="], ">>=": ["<<="]}
_FUNCTION_SWAPS = {
    "min": "max", "max": "min", "any": "all", "all": "any", "sorted": "reversed", "reversed": "sorted",
    "int": "float", "float": "int", "str": "repr", "repr": "str", "list": "set", "tuple": "list",
    "isinstance": "issubclass", "getattr": "hasattr", "ord": "len", "chr": "str", "hex": "oct", "oct": "hex",
    "round": "int", "map": "filter", "filter": "map", "abs": "int", "sum": "max", "len": "bool",
}
_METHOD_SWAPS = {
    "startswith": "endswith", "endswith": "startswith", "lower": "upper", "upper": "lower",
    "lstrip": "rstrip", "rstrip": "lstrip", "strip": "rstrip", "find": "rfind", "rfind": "find",
    "index": "rindex", "rindex": "index", "split": "rsplit", "rsplit": "split", "append": "extend",
    "extend": "append", "add": "discard", "discard": "add", "remove": "discard", "keys": "values",
    "values": "keys", "isdigit": "isalpha", "isalpha": "isdigit", "isupper": "islower", "islower": "isupper",
    "floor": "ceil", "ceil": "floor", "get": "pop", "ljust": "rjust", "rjust": "ljust",
    "partition": "rpartition", "rpartition": "partition", "search": "match", "match": "search",
    "isfile": "isdir", "isdir": "isfile", "basename": "dirname", "dirname": "basename", "encode": "decode",
    "decode": "encode", "items": "values", "popleft": "pop", "appendleft": "append",
    "casefold": "upper", "splitlines": "split", "isspace": "isalnum", "isalnum": "isalpha",
}
_DUPLICABLE_METHODS = {"append", "extend", "add", "write", "update", "insert", "pop", "remove", "appendleft",
                       "popleft", "discard", "sort", "reverse", "clear", "flush"}
_RENAMES = {"i": "idx", "j": "k", "k": "key", "n": "count", "x": "item", "s": "text", "c": "ch", "v": "value",
            "result": "res", "res": "result", "data": "payload", "value": "val", "val": "value",
            "path": "filepath", "name": "label", "line": "text_line", "key": "k", "args": "arguments",
            "lines": "rows", "items": "entries", "text": "content", "obj": "target", "buf": "buffer",
            "parts": "pieces", "msg": "message", "start": "begin", "end": "stop", "node": "current",
            "size": "length", "index": "position", "f": "fileobj", "fp": "handle", "m": "match_obj"}
_SELF_NAMES = {"self", "cls"}
_BUILTIN_NAMES = set(dir(builtins)) | set(keyword.kwlist) | set(keyword.softkwlist)


@dataclass
class _Func:
    """One parsed function: text, tree, the editable nodes and the locals with the line each is defined."""

    text: str
    tree: ast.Module
    func: ast.FunctionDef | ast.AsyncFunctionDef
    nodes: list[ast.AST]
    parents: dict[int, ast.AST]
    docstring: ast.AST | None
    params: list[str]
    defined_at: dict[str, int]  # local name -> first line it is bound (params: 1)
    lines: list[str] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)

    def offset(self, lineno: int, col: int) -> int:
        """Character offset of an ``ast`` position (``col`` counts UTF-8 bytes)."""
        line = self.lines[lineno - 1]
        return self.starts[lineno - 1] + len(line.encode("utf-8")[:col].decode("utf-8", errors="ignore"))

    def span(self, node: ast.AST) -> tuple[int, int]:
        return self.offset(node.lineno, node.col_offset), self.offset(node.end_lineno, node.end_col_offset)

    def source(self, node: ast.AST) -> str:
        start, end = self.span(node)
        return self.text[start:end]

    def line_of(self, offset: int) -> int:
        return bisect.bisect_right(self.starts, offset) - 1 + 1

    def replaced(self, start: int, end: int, new: str) -> str:
        return self.text[:start] + new + self.text[end:]

    def whole_lines(self, node: ast.AST) -> bool:
        """True when ``node`` alone fills its lines (nothing but indentation before, a comment after)."""
        first = self.lines[node.lineno - 1]
        last = self.lines[node.end_lineno - 1]
        before = first.encode("utf-8")[: node.col_offset].decode("utf-8", errors="ignore")
        after = last.encode("utf-8")[node.end_col_offset:].decode("utf-8", errors="ignore").strip()
        return not before.strip() and (not after or after.startswith("#"))


def parse_function(text: str) -> _Func | None:
    """The editable view of a one-function source, or ``None`` when it is not exactly one function."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    if len(tree.body) != 1 or not isinstance(tree.body[0], (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    func = tree.body[0]
    body = func.body
    docstring = body[0] if (body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                            and isinstance(body[0].value.value, str)) else None
    nodes: list[ast.AST] = []
    parents: dict[int, ast.AST] = {}
    stack: list[ast.AST] = [func]
    while stack:
        node = stack.pop()
        nodes.append(node)
        children = []
        for name, value in ast.iter_fields(node):
            if name in ("decorator_list", "returns", "annotation", "type_comment"):
                continue
            for child in (value if isinstance(value, list) else [value]):
                if isinstance(child, ast.AST) and child is not docstring and not isinstance(child, ast.JoinedStr):
                    parents[id(child)] = node
                    children.append(child)
        stack.extend(reversed(children))
    all_args = func.args.posonlyargs + func.args.args + func.args.kwonlyargs
    params = [a.arg for a in all_args] + [a.arg for a in (func.args.vararg, func.args.kwarg) if a]
    defined_at = {p: 1 for p in params}
    for node in nodes:
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            defined_at.setdefault(node.id, node.lineno)
    lines = split_lines(text)
    return _Func(text=text, tree=tree, func=func, nodes=nodes, parents=parents, docstring=docstring,
                 params=params, defined_at=defined_at, lines=lines, starts=line_offsets(text))


def _bug(f: _Func, new_text: str) -> Edit | None:
    """The bug edit (input = mutated, gold = original) if the mutation parses and changes the AST."""
    if new_text == f.text:
        return None
    try:
        tree = ast.parse(new_text)
    except SyntaxError:
        return None
    if ast.dump(tree) == ast.dump(f.tree):
        return None
    return Edit(input=new_text, gold=f.text)


def _instructed(f: _Func, new_text: str, instruction: str) -> Edit | None:
    if new_text == f.text:
        return None
    try:
        ast.parse(new_text)
    except SyntaxError:
        return None
    return Edit(input=f.text, gold=new_text, instruction=instruction)


def _between(f: _Func, left: ast.AST, right: ast.AST) -> tuple[int, int]:
    return f.span(left)[1], f.span(right)[0]


def _operator_in(f: _Func, start: int, end: int, symbol: str) -> tuple[int, int] | None:
    """Offsets of ``symbol`` in ``text[start:end]`` when that gap holds only it, parens and whitespace."""
    gap = f.text[start:end]
    if re.sub(r"[\s()\\]", "", gap) != symbol.replace(" ", ""):
        return None
    pattern = r"\s+".join(re.escape(part) for part in symbol.split())
    if symbol[0].isalpha():
        pattern = rf"\b{pattern}\b"
    match = re.search(pattern, gap)
    return (start + match.start(), start + match.end()) if match else None


def _swap_site(f: _Func, where: tuple[int, int] | None, choices: list[str], rng: random.Random) -> Site | None:
    if where is None:
        return None
    start, end = where

    def build() -> Edit | None:
        return _bug(f, f.replaced(start, end, rng.choice(choices)))
    return Site(f.line_of(start), build)


def operator_misuse(f: _Func, rng: random.Random) -> list[Site]:
    sites = []
    for node in f.nodes:
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOP_SYMBOL:
            symbol = _BINOP_SYMBOL[type(node.op)]
            sites.append(_swap_site(f, _operator_in(f, *_between(f, node.left, node.right), symbol),
                                    _BINOP_SWAPS[symbol], rng))
        elif isinstance(node, ast.Compare):
            previous = node.left
            for op, right in zip(node.ops, node.comparators):
                symbol = _COMPARE_SYMBOL[type(op)]
                sites.append(_swap_site(f, _operator_in(f, *_between(f, previous, right), symbol),
                                        _COMPARE_SWAPS[symbol], rng))
                previous = right
        elif isinstance(node, ast.BoolOp):
            symbol = "and" if isinstance(node.op, ast.And) else "or"
            other = "or" if symbol == "and" else "and"
            for left, right in zip(node.values, node.values[1:]):
                sites.append(_swap_site(f, _operator_in(f, *_between(f, left, right), symbol), [other], rng))
        elif isinstance(node, ast.AugAssign) and type(node.op) in _BINOP_SYMBOL:
            symbol = _BINOP_SYMBOL[type(node.op)] + "="
            if symbol in _AUG_SWAPS:
                sites.append(_swap_site(f, _operator_in(f, *_between(f, node.target, node.value), symbol),
                                        _AUG_SWAPS[symbol], rng))
    return [s for s in sites if s is not None]


def _int_constants(f: _Func) -> Iterator[ast.Constant]:
    for node in f.nodes:
        if (isinstance(node, ast.Constant) and type(node.value) is int
                and f.source(node) == str(node.value)):
            yield node


def _replace_node_site(f: _Func, node: ast.AST, make: Callable[[], str], instructed: str | None = None) -> Site:
    start, end = f.span(node)

    def build() -> Edit | None:
        new_text = f.replaced(start, end, make())
        return _bug(f, new_text) if instructed is None else _instructed(f, new_text, instructed)
    return Site(node.lineno, build)


def off_by_one(f: _Func, rng: random.Random) -> list[Site]:
    sites = []
    for node in _int_constants(f):
        value = node.value
        sites.append(_replace_node_site(
            f, node, lambda v=value: str(v - 1 if v > 0 and rng.random() < 0.5 else v + 1)))
    for node in f.nodes:
        targets: list[ast.AST] = []
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range" and node.args:
            targets.append(node.args[1] if len(node.args) >= 2 else node.args[0])
        elif isinstance(node, ast.Slice):
            targets.extend(part for part in (node.lower, node.upper) if part is not None)
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Name):
            targets.append(node.slice)
        for target in targets:
            if isinstance(target, (ast.Name, ast.Call, ast.Attribute, ast.Subscript)) and target.lineno == target.end_lineno:
                src = f.source(target)
                sites.append(_replace_node_site(f, target, lambda s=src: s + rng.choice([" + 1", " - 1"])))
    return sites


def _string_literal_ok(f: _Func, node: ast.Constant) -> bool:
    src = f.source(node)
    return (isinstance(node.value, str) and node.lineno == node.end_lineno and len(src) >= 2
            and src[0] in "'\"" and src[-1] == src[0] and "\\" not in src and not src.startswith(src[0] * 3))


_STRING_SWAPS = {"": " ", " ": "", ",": ";", ";": ",", ".": ",", ":": ";", "-": "_", "_": "-", "/": "\\\\",
                 "=": ":", "(": "[", ")": "]", "[": "(", "]": ")"}


def value_misuse(f: _Func, rng: random.Random) -> list[Site]:
    sites = []
    strings = [n for n in f.nodes if isinstance(n, ast.Constant) and _string_literal_ok(f, n)]
    for node in f.nodes:
        if not isinstance(node, ast.Constant):
            continue
        src = f.source(node)
        if node.value is True or node.value is False:
            if src in ("True", "False"):
                sites.append(_replace_node_site(f, node, lambda s=src: "False" if s == "True" else "True"))
        elif type(node.value) is int and src == str(node.value):
            v = node.value
            options = [str(1 - v)] if v in (0, 1) else [str(v * 2), str(v * 10)]
            sites.append(_replace_node_site(f, node, lambda o=options: rng.choice(o)))
        elif type(node.value) is float and src == repr(node.value):
            sites.append(_replace_node_site(f, node, lambda v=node.value: repr(v * 2 if v else 1.0)))
        elif node in strings:
            others = sorted({f.source(n) for n in strings if n.value != node.value})
            quote = src[0]
            options = list(others)
            if node.value in _STRING_SWAPS:
                options.append(quote + _STRING_SWAPS[node.value] + quote)
            if options:
                sites.append(_replace_node_site(f, node, lambda o=options: rng.choice(o)))
    return sites


def variable_misuse(f: _Func, rng: random.Random) -> list[Site]:
    sites = []
    names = sorted(n for n in f.defined_at if n not in _SELF_NAMES)
    for node in f.nodes:
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in f.defined_at \
                and node.id not in _SELF_NAMES:
            others = [n for n in names if n != node.id and f.defined_at[n] <= node.lineno]
            if others:
                sites.append(_replace_node_site(f, node, lambda o=others: rng.choice(o)))
    return sites


def function_misuse(f: _Func, rng: random.Random) -> list[Site]:
    sites = []
    for node in f.nodes:
        if not isinstance(node, ast.Call):
            continue
        target = node.func
        if isinstance(target, ast.Name) and target.id in _FUNCTION_SWAPS and target.id not in f.defined_at:
            sites.append(_replace_node_site(f, target, lambda t=target.id: _FUNCTION_SWAPS[t]))
        elif isinstance(target, ast.Attribute) and target.attr in _METHOD_SWAPS:
            end = f.offset(target.end_lineno, target.end_col_offset)
            start = end - len(target.attr)
            if f.text[start:end] == target.attr:
                def build(start=start, end=end, attr=target.attr) -> Edit | None:
                    return _bug(f, f.replaced(start, end, _METHOD_SWAPS[attr]))
                sites.append(Site(target.end_lineno, build))
    return sites


def _statement_bodies(f: _Func) -> Iterator[list[ast.stmt]]:
    for node in f.nodes:
        for name in ("body", "orelse", "finalbody"):
            body = getattr(node, name, None)
            if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
                yield [s for s in body if s is not f.docstring]
        if isinstance(node, ast.Try):
            for handler in node.handlers:
                yield handler.body


def _line_span(f: _Func, node: ast.AST) -> tuple[int, int]:
    return f.starts[node.lineno - 1], f.starts[node.end_lineno]


def _is_simple(stmt: ast.stmt) -> bool:
    return isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Return, ast.Break, ast.Continue,
                             ast.Raise)) or (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call))


def missing_logic(f: _Func, rng: random.Random) -> list[Site]:
    sites = []
    for body in _statement_bodies(f):
        if len(body) < 2:
            continue
        for stmt in body:
            deletable = _is_simple(stmt) or (isinstance(stmt, ast.If) and not stmt.orelse and len(stmt.body) == 1
                                             and _is_simple(stmt.body[0]))
            if deletable and f.whole_lines(stmt) and stmt.lineno > f.func.lineno:
                start, end = _line_span(f, stmt)
                sites.append(Site(stmt.lineno, lambda s=start, e=end: _bug(f, f.replaced(s, e, ""))))
    for node in f.nodes:
        if isinstance(node, (ast.If, ast.While)) and isinstance(node.test, ast.BoolOp):
            values = node.test.values
            for left, right in zip(values, values[1:]):
                start, end = f.span(left)[1], f.span(right)[1]
                sites.append(Site(f.line_of(start), lambda s=start, e=end: _bug(f, f.replaced(s, e, ""))))
    return sites


def excess_logic(f: _Func, rng: random.Random) -> list[Site]:
    sites = []
    params = [p for p in f.params if p not in _SELF_NAMES]
    for node in f.nodes:
        if isinstance(node, (ast.If, ast.While)) and node.test.lineno == node.test.end_lineno and isinstance(
                node.test, (ast.Compare, ast.Name, ast.Call, ast.Attribute, ast.UnaryOp, ast.BoolOp)):
            used = {n.id for n in ast.walk(node.test) if isinstance(n, ast.Name)}
            extras = [p for p in params if p not in used]
            if extras:
                end = f.span(node.test)[1]

                def build(end=end, extras=extras) -> Edit | None:
                    name = rng.choice(extras)
                    clause = rng.choice([f" and {name}", f" and not {name}", f" or {name} is None",
                                         f" and {name} is not None"])
                    return _bug(f, f.replaced(end, end, clause))
                sites.append(Site(node.test.lineno, build))
    for body in _statement_bodies(f):
        for stmt in body:
            duplicable = isinstance(stmt, ast.AugAssign) or (
                isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
                and isinstance(stmt.value.func, ast.Attribute) and stmt.value.func.attr in _DUPLICABLE_METHODS)
            if duplicable and f.whole_lines(stmt):
                start, end = _line_span(f, stmt)
                chunk = f.text[start:end]
                if chunk.endswith("\n"):
                    sites.append(Site(stmt.lineno, lambda e=end, c=chunk: _bug(f, f.replaced(e, e, c))))
    return sites


# -- instructed edits ------------------------------------------------------------------------

_CODE_TOKENS = {tokenize.NAME, tokenize.OP, tokenize.NUMBER, tokenize.NEWLINE, tokenize.NL, tokenize.INDENT,
                tokenize.DEDENT, tokenize.ENDMARKER}


def _string_and_comment_words(text: str) -> set[str]:
    """Words inside strings and comments (f-string parts too): a rename there would need judgement."""
    words: set[str] = set()
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type not in _CODE_TOKENS:
                words.update(re.findall(r"[A-Za-z_]\w*", tok.string))
    except (tokenize.TokenError, SyntaxError):
        return {"*"}
    return words


def _all_names(text: str) -> set[str]:
    return set(re.findall(r"[A-Za-z_]\w*", text))


class _Renamer(ast.NodeTransformer):
    def __init__(self, old: str, new: str) -> None:
        self.old, self.new = old, new

    def visit_Name(self, node: ast.Name) -> ast.Name:
        if node.id == self.old:
            node.id = self.new
        return node

    def visit_arg(self, node: ast.arg) -> ast.arg:
        if node.arg == self.old:
            node.arg = self.new
        self.generic_visit(node)
        return node


def _new_name(old: str, taken: set[str], rng: random.Random) -> str | None:
    options = [_RENAMES.get(old, ""), f"{old}_value", f"new_{old}", f"the_{old}", f"{old}2"]
    options = [o for o in options if o and o not in taken and o not in _BUILTIN_NAMES]
    return options[0] if options and rng.random() < 0.7 else (rng.choice(options) if options else None)


def rename_identifier(f: _Func, rng: random.Random) -> list[Site]:
    protected = _string_and_comment_words(f.text)
    taken = _all_names(f.text)
    in_fstrings = {n.id for node in ast.walk(f.func) if isinstance(node, ast.JoinedStr)
                   for n in ast.walk(node) if isinstance(n, ast.Name)}
    scoped = {name for node in ast.walk(f.func) if isinstance(node, (ast.Global, ast.Nonlocal)) for name in node.names}
    sites = []
    for old in sorted(f.defined_at):
        if old in _SELF_NAMES or old in protected or old in in_fstrings or old in scoped or old == f.func.name:
            continue
        positions = []
        for node in ast.walk(f.func):
            if isinstance(node, ast.Name) and node.id == old:
                positions.append(f.offset(node.lineno, node.col_offset))
            elif isinstance(node, ast.arg) and node.arg == old:
                positions.append(f.offset(node.lineno, node.col_offset))
        if not positions:
            continue
        first_line = f.line_of(min(positions))

        def build(old=old, positions=sorted(positions)) -> Edit | None:  # noqa: B008 - binds this iteration's values
            new = _new_name(old, taken, rng)
            if new is None or any(f.text[p:p + len(old)] != old for p in positions):
                return None
            text = f.text
            for p in reversed(positions):
                text = text[:p] + new + text[p + len(old):]
            try:
                expected = ast.dump(_Renamer(old, new).visit(ast.parse(f.text)))
                if ast.dump(ast.parse(text)) != expected:
                    return None
            except SyntaxError:
                return None
            what = "parameter" if old in f.params else "variable"
            instruction = rng.choice([f"Rename the {what} `{old}` to `{new}`.",
                                      f"Rename `{old}` to `{new}` everywhere in this function.",
                                      f"Use the name `{new}` instead of `{old}`."])
            return _instructed(f, text, instruction)
        sites.append(Site(first_line, build))
    return sites


def _indentation(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def add_guard_clause(f: _Func, rng: random.Random) -> list[Site]:
    body = [s for s in f.func.body if s is not f.docstring]
    if not body or body[0].lineno == f.func.lineno or not f.whole_lines(body[0]):
        return []
    first = body[0]
    indent = _indentation(f.lines[first.lineno - 1])
    step = indent[len(_indentation(f.lines[f.func.lineno - 1])):]
    if not step:
        return []
    inner = indent + step
    func_args = f.func.args
    candidates = [a for a in func_args.posonlyargs + func_args.args + func_args.kwonlyargs if a.arg not in _SELF_NAMES]
    defaults = dict(zip([a.arg for a in (func_args.posonlyargs + func_args.args)][::-1], func_args.defaults[::-1]))
    defaults.update({a.arg: d for a, d in zip(func_args.kwonlyargs, func_args.kw_defaults) if d is not None})
    insert_at = f.starts[first.lineno - 1]
    sites = []
    for arg in candidates:
        p = arg.arg
        templates = [
            (f"Return None early if `{p}` is None.", f"if {p} is None:", "return None"),
            (f"Add a guard clause: raise a ValueError if `{p}` is None.", f"if {p} is None:",
             f"raise ValueError(\"{p} must not be None\")"),
            (f"Return None at the start of the function when `{p}` is empty.", f"if not {p}:", "return None"),
        ]
        default = defaults.get(p)
        is_int = (isinstance(arg.annotation, ast.Name) and arg.annotation.id == "int") or (
            isinstance(default, ast.Constant) and type(default.value) is int)
        if is_int:
            templates.append((f"Raise a ValueError if `{p}` is negative.", f"if {p} < 0:",
                              f"raise ValueError(\"{p} must be non-negative\")"))
        for instruction, test, action in templates:
            if test.rstrip(":") in f.text:
                continue
            guard = f"{indent}{test}\n{inner}{action}\n"
            sites.append(Site(first.lineno, lambda g=guard, i=instruction: _instructed(
                f, f.replaced(insert_at, insert_at, g), i)))
    return sites


def change_constant(f: _Func, rng: random.Random) -> list[Site]:
    number_tokens: dict[str, int] = {}
    try:
        for tok in tokenize.generate_tokens(io.StringIO(f.text).readline):
            if tok.type == tokenize.NUMBER:
                number_tokens[tok.string] = number_tokens.get(tok.string, 0) + 1
    except (tokenize.TokenError, SyntaxError):
        return []
    func_args = f.func.args
    default_of = {id(d): a.arg for a, d in zip((func_args.posonlyargs + func_args.args)[::-1], func_args.defaults[::-1])}
    default_of.update({id(d): a.arg for a, d in zip(func_args.kwonlyargs, func_args.kw_defaults) if d is not None})
    sites = []
    for node in f.nodes:
        if not (isinstance(node, ast.Constant) and type(node.value) in (int, float)):
            continue
        src = f.source(node)
        if src != (str(node.value) if type(node.value) is int else repr(node.value)) or number_tokens.get(src) != 1:
            continue

        def make(v=node.value) -> str:
            if type(v) is float:
                return repr(v * 2 if v else 0.5)
            return str(rng.choice([v * 2, v * 10, v + 5]) if v else rng.choice([1, 2, 10]))
        new = make()
        if id(node) in default_of:
            instruction = f"Change the default value of `{default_of[id(node)]}` from {src} to {new}."
        else:
            instruction = rng.choice([f"Change the constant {src} to {new}.", f"Replace {src} with {new}.",
                                      f"Use {new} instead of {src}."])
        sites.append(_replace_node_site(f, node, lambda n=new: n, instructed=instruction))
    return sites


def swap_arguments(f: _Func, rng: random.Random) -> list[Site]:
    sites = []
    for node in f.nodes:
        if (isinstance(node, ast.Call) and len(node.args) == 2 and not node.keywords
                and not any(isinstance(a, ast.Starred) for a in node.args) and node.lineno == node.end_lineno):
            call = f.source(node)
            a, b = (f.source(x) for x in node.args)
            if a == b or len(call) > 70 or f.text.count(call) != 1:
                continue
            (s0, e0), (s1, e1) = f.span(node.args[0]), f.span(node.args[1])
            gold = f.text[:s0] + b + f.text[e0:s1] + a + f.text[e1:]
            instruction = rng.choice([f"Swap the two arguments of `{call}`.", f"In `{call}`, swap the arguments.",
                                      f"Swap the arguments `{a}` and `{b}` in the call `{call}`."])
            sites.append(Site(node.lineno, lambda g=gold, i=instruction: _instructed(f, g, i)))
    args = f.func.args.args
    n_defaults = len(f.func.args.defaults)
    first_default = len(args) - n_defaults
    signature_one_line = all(a.lineno == f.func.lineno for a in args)
    for i in range(len(args) - 1):
        left, right = args[i], args[i + 1]
        if (left.arg in _SELF_NAMES or not signature_one_line or (i < first_default) != (i + 1 < first_default)):
            continue
        def param_span(k: int) -> tuple[int, int]:
            end_node = f.func.args.defaults[k - first_default] if k >= first_default else args[k]
            return f.offset(args[k].lineno, args[k].col_offset), f.span(end_node)[1]
        (s0, e0), (s1, e1) = param_span(i), param_span(i + 1)
        p0, p1 = f.text[s0:e0], f.text[s1:e1]
        gold = f.text[:s0] + p1 + f.text[e0:s1] + p0 + f.text[e1:]
        instruction = rng.choice([f"Swap the order of the parameters `{left.arg}` and `{right.arg}`.",
                                  f"Swap the parameters `{left.arg}` and `{right.arg}` in the signature."])
        sites.append(Site(f.func.lineno, lambda g=gold, i=instruction: _instructed(f, g, i)))
    return sites


GENERATORS: dict[str, Callable[[_Func, random.Random], list[Site]]] = {
    "bug/missing_logic": missing_logic,
    "bug/excess_logic": excess_logic,
    "bug/value_misuse": value_misuse,
    "bug/off_by_one": off_by_one,
    "bug/operator_misuse": operator_misuse,
    "bug/variable_misuse": variable_misuse,
    "bug/function_misuse": function_misuse,
    "edit/rename_identifier": rename_identifier,
    "edit/add_guard_clause": add_guard_clause,
    "edit/change_constant": change_constant,
    "edit/swap_arguments": swap_arguments,
}


def python_sites(code: str, kind: str, rng: random.Random) -> list[Site]:
    """Every site where edit ``kind`` can apply to the one-function ``code`` (empty if none or unparsable)."""
    f = parse_function(code)
    return GENERATORS[kind](f, rng) if f is not None else []
