"""The line of each key of a config file's table (engine.settings.toml_lines), which every
``file:line:`` message about a bad key names."""

from __future__ import annotations

import sys

import pytest

from engine.settings.toml_lines import key_lines

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

PYPROJECT = '''\
[project]
name = "x"
mode = 1
description = """
[tool.copy-as-decode]
mode = "not this one"
"""

[tool."copy-as-decode"]   # the table, its name quoted
# mode = "commented out"
mode = "ar"
"context-lines" = 3
'verify' = "exact"
allowed_models = [
    ["nested"],
    "x" ,
]
warm_up = { not = "a table" }
selector = """
not_a_key = 1
[not.a.header]
"""
threads = 2

[tool.copy-as-decode.sub]
mode = "a sub-table's"

[[tool.copy-as-decode.list]]
batch_size = 1

[ tool . other ]
device = "cpu"
'''


def test_the_keys_of_pyprojects_table_and_no_other():
    tomllib.loads(PYPROJECT)  # the scanner reads only texts tomllib accepted
    assert key_lines(PYPROJECT, ("tool", "copy-as-decode")) == {
        "mode": 11, "context-lines": 12, "verify": 13, "allowed_models": 14, "warm_up": 18, "selector": 19,
        "threads": 23}


@pytest.mark.parametrize("table, lines", [
    ((), {}),
    (("project",), {"name": 2, "mode": 3, "description": 4}),
    (("tool", "copy-as-decode", "sub"), {"mode": 26}),
    (("tool", "copy-as-decode", "list"), {}),  # an array of tables' keys belong to no one table
    (("tool", "other"), {"device": 32}),
])
def test_each_table_has_its_own_lines(table, lines):
    assert key_lines(PYPROJECT, table) == lines


def test_a_config_files_top_level():
    text = "# settings\nmode = 'ar'  # inline comment\n\n\"max-new-tokens\" = 64\n[x]\ncontext_lines = 1\n"
    assert key_lines(text) == {"mode": 2, "max-new-tokens": 4}


def test_a_dotted_key_has_no_line():
    """``tool.copy-as-decode.mode = ...`` sets the table's key from the top level; its message then
    names the file without a line."""
    assert key_lines('tool.copy-as-decode.mode = "ar"\n', ("tool", "copy-as-decode")) == {}
