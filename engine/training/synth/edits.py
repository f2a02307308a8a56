"""What every edit generator returns, and the kinds of edit this package makes.

A generator looks at one function and returns *sites*: places it could edit, each with the
1-based line it touches and a thunk that builds the edit. The dataset builder picks a site by
line position (so the changed line is spread over the whole function) and only then pays for
building and re-parsing it.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Callable

from engine.core.lines import split_lines

# The six HumanEvalFix bug classes; "value misuse" is split into off-by-one and the rest.
BUG_KINDS = (
    "bug/missing_logic",
    "bug/excess_logic",
    "bug/value_misuse",
    "bug/off_by_one",
    "bug/operator_misuse",
    "bug/variable_misuse",
    "bug/function_misuse",
)
# Instructed edits whose gold a program computes (input = original, gold = edited).
EDIT_KINDS = (
    "edit/rename_identifier",
    "edit/add_guard_clause",
    "edit/change_constant",
    "edit/swap_arguments",
)
ALL_KINDS = BUG_KINDS + EDIT_KINDS


@dataclass(frozen=True)
class Edit:
    """One edit case before its metadata: turn ``input`` into ``gold``.

    For bugs ``input`` is the mutated function, ``gold`` the original and ``instruction`` empty
    (the builder draws a "Fix the bug" variant); for instructed edits ``input`` is the original.
    """

    input: str
    gold: str
    instruction: str = ""


@dataclass(frozen=True)
class Site:
    """A place a generator can edit: ``line`` (1-based, in the original function) and the builder.

    ``build`` returns ``None`` when the edit turns out impossible once built (e.g. it no longer parses).
    """

    line: int
    build: Callable[[], Edit | None]


def first_changed_line(input_text: str, gold: str) -> int:
    """1-based first line of ``input_text`` the gold changes (an insertion counts at the line it precedes).

    This is the line a user pointing at the bug would give as the focus; clamped to the last input line
    when the gold only appends. Raises ``ValueError`` when the texts are equal.
    """
    a, b = split_lines(input_text), split_lines(gold)
    for tag, i1, _i2, _j1, _j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if tag != "equal":
            return min(i1 + 1, max(len(a), 1))
    raise ValueError("input and gold are equal: an edit case must change something")
