"""The editor's side of LSP position conversion, written independently of lsp_server.positions so
the tests check the server against a second implementation (shared by the LSP test modules)."""

from __future__ import annotations

import re

from lsprotocol import types

_CODECS = {"utf-16": ("utf-16-le", 2), "utf-8": ("utf-8", 1), "utf-32": ("utf-32-le", 4)}


def client_offset(text: str, pos: types.Position, encoding: str = "utf-16") -> int:
    """LSP position -> str offset, as an editor computes it."""
    codec, width = _CODECS[encoding]
    lines = re.split(r"(?<=\r\n)|(?<=\n)|(?<=\r)(?!\n)", text)
    if pos.line >= len(lines):
        return len(text)
    start = sum(len(line) for line in lines[:pos.line])
    content = lines[pos.line].rstrip("\r\n")
    units = content.encode(codec)[: width * pos.character]
    return start + len(units.decode(codec, "ignore"))


def client_position(text: str, offset: int, encoding: str = "utf-16") -> types.Position:
    """str offset -> LSP position, as an editor computes it."""
    codec, width = _CODECS[encoding]
    head = text[:offset]
    line = len(re.findall(r"\r\n|\n|\r", head))
    start = max(head.rfind("\n"), head.rfind("\r")) + 1
    return types.Position(line=line, character=len(head[start:].encode(codec)) // width)
