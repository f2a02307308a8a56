"""The apply prompt: the file's lines numbered from 1 and the update's numbered on, one input,
so that an apply's program is an edit program over it (``<copy lines>`` of either part) and the
decoder's splice, drafting and grammar work unchanged (engine.apply.model). Laid out as the span
selector's prompt (engine.decoding.prompt.selector_messages) that the shipped adapter was trained on."""

from __future__ import annotations

from engine.decoding.prompt import numbered

APPLY_RULES = ("Merge an update into a file by writing an edit program: <copy lines=\"I-J\"/> copies input lines "
               "I to J (the file's lines come first, the update's after them), <gen>...</gen> writes new lines. "
               "Copy the file's lines that stay and the update's lines that change them; a line such as "
               "\"... existing code ...\" stands for the file's code, never copy it.")
APPLY_INSTRUCTION = "Apply the update to the file."


def with_newline(line: str) -> str:
    return line if line.endswith("\n") else line + "\n"


def virtual_input(file_lines: list[str], update_lines: list[str]) -> str:
    """The one input an apply's program reads: the file's lines, then the update's (each line
    ends in a newline, so no line runs into the next)."""
    return "".join(with_newline(line) for line in file_lines + update_lines)


def apply_messages(instruction: str, n_file: int, n_update: int, virtual: str) -> list[dict[str, str]]:
    """Chat messages of one window's apply (``virtual``: :func:`virtual_input`)."""
    asked = APPLY_INSTRUCTION + (f" {instruction.strip()}" if instruction.strip() else "")
    where = (f"the file is lines 1-{n_file}, the update lines {n_file + 1}-{n_file + n_update}" if n_file
             else f"the file is empty, the update is lines 1-{n_update}")
    content = f"Instruction: {asked}\n\nInput ({n_file + n_update} lines; {where}):\n{numbered(virtual)}"
    return [{"role": "system", "content": APPLY_RULES}, {"role": "user", "content": content}]
