"""Definitions of a text: its functions, methods, classes (and their kin: structs, impls, traits,
interfaces, enums), with their names, nesting and line ranges, read from a tree-sitter parse
(``tree_sitter_language_pack``). The structure-aware merge (:mod:`engine.apply.structure`) matches
an update's definitions with its file's by kind, name and nesting.

A definition's lines run from its first line (a decorator, an attribute, an ``export``) to its
last; the comments before it are not part of it. Code that does not parse (a fragment, a file
already broken) yields no definitions where the parse failed: the line rules merge it. A language
the pack does not parse yields None.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Sequence

from engine.apply.markers import is_marker

# The pack's grammar for a fence language (engine.core.languages), where the names differ.
GRAMMARS = {"python": "python", "javascript": "javascript", "jsx": "javascript", "typescript": "typescript",
            "tsx": "tsx", "java": "java", "go": "go", "rust": "rust", "c": "c", "cpp": "cpp", "csharp": "csharp",
            "ruby": "ruby", "php": "php", "kotlin": "kotlin", "scala": "scala", "swift": "swift"}

# Node types that define something, by the kind they define. A "container" holds definitions of
# its own (its members are matched one by one); a "function" is replaced whole unless a marker
# stands inside it.
FUNCTIONS = {"function_definition", "function_declaration", "generator_function_declaration", "method_definition",
             "method_declaration", "constructor_declaration", "function_item", "method", "singleton_method",
             "function_signature_item", "arrow_function_declaration", "local_function_statement"}
CONTAINERS = {"class_definition", "class_declaration", "abstract_class_declaration", "interface_declaration",
              "enum_declaration", "record_declaration", "struct_item", "enum_item", "impl_item", "trait_item",
              "mod_item", "class", "module", "struct_specifier", "namespace_definition", "type_declaration",
              "object_declaration", "struct_declaration", "trait_declaration", "protocol_declaration"}
# Wrappers whose range is the definition's (decorators, ``export``) and the lines that attach to
# the definition after them (Rust's attributes, Java's annotations are inside the node already).
WRAPPERS = {"decorated_definition", "export_statement"}
ATTRIBUTES = {"attribute_item", "decorator"}
# A placeholder statement for a marker line, so that a body the update elides still parses.
PLACEHOLDER = {"python": "...", "ruby": "nil"}
# Where members shown without their class (a method alone) parse only inside one: the wrapper
# an update is parsed in when it does not parse alone.
PARSES_KEPT = 8  # the trees of the latest texts parsed (a file and its update, a few times over)
MEMBER_WRAPPER = {"javascript": "class __Shown {", "typescript": "class __Shown {", "tsx": "class __Shown {",
                  "java": "class __Shown {", "csharp": "class __Shown {", "php": "<?php class __Shown {"}


@dataclass
class Definition:
    """One definition: ``kind`` ("function" or "container"), ``name``, ``path`` (its enclosing
    definitions' names and its own, ``("A", "f")``), its lines ``start``..``end`` (0-based,
    ``end`` exclusive), the line its header (name) stands on, and the definitions it holds."""

    kind: str
    name: str
    path: tuple[str, ...]
    start: int
    end: int
    header: int
    node_type: str
    children: list[Definition] = field(default_factory=list)

    @property
    def dotted(self) -> str:
        return ".".join(self.path)

    def walk(self) -> list[Definition]:
        """This definition and every one inside it, in order."""
        return [self, *(d for child in self.children for d in child.walk())]


@lru_cache(maxsize=None)
def _parser(grammar: str) -> Any:
    from tree_sitter_language_pack import get_parser

    return get_parser(grammar)  # type: ignore[arg-type]


def _parsed(grammar: str, source: str) -> Any:
    """The tree of ``source``: a copy of the one kept (a merge with a choice reads the same file
    and update once per reading; a tree is used by one thread at a time, a copy costs nothing)."""
    return _kept_tree(grammar, source).copy()


@lru_cache(maxsize=PARSES_KEPT)
def _kept_tree(grammar: str, source: str) -> Any:
    return _parser(grammar).parse(source.encode("utf-8"))


def grammar_of(language: str) -> str | None:
    """The pack's grammar name for a fence language; None when the pack has none."""
    return GRAMMARS.get(language.lower()) if language else None


class GrammarUnavailable(Exception):
    """The language has a grammar in principle, but it failed to load."""


def parse_definitions(lines: Sequence[str], language: str, whole: bool = False,
                      update: bool = False) -> list[Definition] | None:
    """The top-level definitions of ``lines`` (their children nested); None when ``language`` has
    no grammar, or (``whole``) when any of the text fails to parse (error recovery can end a
    definition early, so a broken text's extents are not trusted). In an ``update``, marker lines
    are read as a placeholder statement so that an elided body parses. Raises :class:`GrammarUnavailable`
    when the grammar exists but fails to load."""
    grammar = grammar_of(language)
    if grammar is None:
        return None
    try:
        _parser(grammar)
    except Exception as exc:  # a missing or broken grammar: the line rules apply
        raise GrammarUnavailable(f"the {grammar} grammar failed to load ({exc})") from exc
    placeholder = PLACEHOLDER.get(grammar) if update else None
    source = "".join(_placeholder(line, placeholder) if placeholder and is_marker(line) else line for line in lines)
    tree = _parsed(grammar, source)
    if tree.root_node.has_error and update and grammar in MEMBER_WRAPPER:
        wrapped = f"{MEMBER_WRAPPER[grammar]}\n{source}\n}}\n"
        members = _parsed(grammar, wrapped)
        if not members.root_node.has_error:
            found = _collect(members.root_node, (), wrapped.encode("utf-8"))
            return [_unwrapped(d) for d in found[0].children] if len(found) == 1 else None
    if whole and tree.root_node.has_error:
        return None
    return _collect(tree.root_node, (), source.encode("utf-8"))


def _unwrapped(d: Definition) -> Definition:
    """A member parsed inside :data:`MEMBER_WRAPPER`, where it stands in the update itself."""
    d.start, d.end, d.header, d.path = d.start - 1, d.end - 1, d.header - 1, d.path[1:]
    for child in d.children:
        _unwrapped(child)
    return d


def _placeholder(line: str, statement: str) -> str:
    indent = line[:len(line) - len(line.lstrip(" \t"))]
    return f"{indent}{statement}\n"


def _collect(node: Any, path: tuple[str, ...], source: bytes) -> list[Definition]:
    out: list[Definition] = []
    pending_attribute: int | None = None
    for child in node.named_children:
        if child.type in ATTRIBUTES and not child.has_error:
            pending_attribute = child.start_point.row if pending_attribute is None else pending_attribute
            continue
        found = _definition(child, path, source)
        if found is None:
            if child.type not in ("comment", "line_comment", "block_comment"):
                pending_attribute = None
            if not child.has_error and _transparent(child):
                out.extend(_collect(child, path, source))
            continue
        if pending_attribute is not None:
            found.start = min(found.start, pending_attribute)
        pending_attribute = None
        out.append(found)
    return out


def _transparent(node: Any) -> bool:
    """A node whose children are definitions at the same level (a class body, a block)."""
    return node.type in ("block", "class_body", "declaration_list", "statement_block", "body_statement",
                         "interface_body", "enum_body", "field_declaration_list", "translation_unit",
                         "namespace_body", "program", "source_file", "module")


def _definition(node: Any, path: tuple[str, ...], source: bytes) -> Definition | None:
    """The definition ``node`` is (through its wrappers), or None."""
    if node.has_error or node.type == "ERROR":
        return None
    inner = node
    while inner.type in WRAPPERS:
        nested = [c for c in inner.named_children if c.type not in ATTRIBUTES and c.type not in ("comment", "decorator")]
        if not nested:
            return None
        inner = nested[-1] if inner.type == "decorated_definition" else nested[0]
    kind = _kind(inner)
    if kind is None:
        return None
    name = _name(inner, source)
    if not name:
        return None
    here = (*path, name)
    header_node = inner.child_by_field_name("name") or inner
    found = Definition(kind, name, here, node.start_point.row, node.end_point.row + 1, header_node.start_point.row,
                       inner.type)
    body = inner.child_by_field_name("body")
    found.children = _collect(body if body is not None else inner, here, source) if body is not None or \
        kind == "container" else []
    if node.end_point.column == 0 and node.end_point.row > node.start_point.row:
        found.end = node.end_point.row  # the node ends at the start of the next line
    return found


def _kind(node: Any) -> str | None:
    if node.type in FUNCTIONS:
        return "function"
    if node.type in CONTAINERS:
        return "container"
    if node.type in ("lexical_declaration", "variable_declaration"):
        declarators = [c for c in node.named_children if c.type == "variable_declarator"]
        if len(declarators) == 1 and (value := declarators[0].child_by_field_name("value")) is not None and \
                value.type in ("arrow_function", "function", "function_expression", "class"):
            return "function"
    return None


def _text(node: Any, source: bytes) -> str:
    return source[node.start_byte:node.end_byte].decode("utf-8", "replace")


def _name(node: Any, source: bytes) -> str:
    """The name a definition node defines: its ``name`` field; a Rust impl's type (and trait); a
    Go method's receiver type and name; a C function's declarator's identifier."""
    if node.type in ("lexical_declaration", "variable_declaration"):
        declarator = next(c for c in node.named_children if c.type == "variable_declarator")
        name = declarator.child_by_field_name("name")
        return _text(name, source) if name is not None else ""
    if node.type == "impl_item":
        kind = node.child_by_field_name("type")
        trait = node.child_by_field_name("trait")
        if kind is None:
            return ""
        return f"{_text(trait, source)} for {_text(kind, source)}" if trait is not None else _text(kind, source)
    if node.type == "type_declaration":
        spec = next((c for c in node.named_children if c.type in ("type_spec", "type_alias")), None)
        name = spec.child_by_field_name("name") if spec is not None else None
        return _text(name, source) if name is not None else ""
    name = node.child_by_field_name("name")
    if name is not None:
        text = _text(name, source)
        if node.type == "method_declaration" and (receiver := node.child_by_field_name("receiver")) is not None:
            types = [c for c in _descendants(receiver) if c.type == "type_identifier"]
            return f"{_text(types[0], source)}.{text}" if types else text
        return text
    declarator = node.child_by_field_name("declarator")
    while declarator is not None:
        if declarator.type in ("identifier", "field_identifier", "qualified_identifier", "destructor_name",
                               "operator_name"):
            return _text(declarator, source)
        declarator = declarator.child_by_field_name("declarator")
    return ""


def _descendants(node: Any) -> list[Any]:
    out = []
    for child in node.named_children:
        out.append(child)
        out.extend(_descendants(child))
    return out
