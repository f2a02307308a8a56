"""Prompts: the instruction, the input (numbered for programs) and the format rules, rendered
through the model's chat template.

Two styles share one layout: ``program`` (the model writes an edit program; the input is shown
with line numbers) and ``text`` (the model rewrites the region in a code fence; used by ``ar``,
``speculative`` and ``pld``). Text outside the edited region is shown as read-only context.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from typing import Any

from engine.core.lines import split_lines
from engine.runtime.prefix_cache import common_prefix
from engine.runtime.selector.adapter import HINT_AFTER, HINT_BEFORE, SELECTOR_LAYOUTS

TEXT_FENCE_CLOSE = "\n```"

PROGRAM_RULES = """You edit code by writing an edit program instead of rewriting the code.
The program is <program> followed by ops and then </program>. There are two ops:
- <copy lines="I-J"/> copies input lines I to J (inclusive, numbers as shown in the input) unchanged. After the tag, the copied lines appear automatically.
- <gen>TEXT</gen> writes new text (complete lines, each ending with a newline).
Copy every line that stays the same; write only the changed lines with <gen>. Never renumber: numbers always refer to the input as shown."""

PROGRAM_EXAMPLE_INPUT = "def area(w, h):\n    \"\"\"Area of a rectangle.\"\"\"\n    return w + h\n\n\nprint(area(2, 3))\n"
PROGRAM_EXAMPLE_INSTRUCTION = "Fix the bug in area."
PROGRAM_EXAMPLE_OUTPUT = (
    '<program><copy lines="1-2"/>def area(w, h):\n    """Area of a rectangle."""\n'
    "<gen>    return w * h\n</gen>"
    '<copy lines="4-6"/>\n\nprint(area(2, 3))\n</program>'
)

TEXT_RULES = """You are a careful code editor. Rewrite the whole code with the requested change. Output every line of the code, changed or not, in one code block, and nothing else."""


@dataclass(frozen=True)
class PromptParts:
    """What the model is shown, before rendering through a chat template."""

    instruction: str
    region: str
    before: str = ""
    after: str = ""
    first_line: int = 1
    language: str = ""  # fence tag ("python", "javascript", ...); models write code better when told
    focus_line: int | None = None  # 1-based line of the region the user pointed at (cursor, diagnostic)

    def fence(self) -> str:
        return f"```{self.language}\n"


def numbered(text: str) -> str:
    """The input with 1-based line numbers, ``"12| code"``; the terminator of each line is kept."""
    lines = split_lines(text)
    out = [f"{i}| {line}" for i, line in enumerate(lines, start=1)]
    if out and not out[-1].endswith("\n"):
        out[-1] += "\n"
    return "".join(out)


def _context_block(parts: PromptParts) -> str:
    chunks = []
    if parts.before:
        chunks.append("Context before the code to edit (read-only):\n" + parts.fence() + parts.before.rstrip("\n") + TEXT_FENCE_CLOSE + "\n\n")
    if parts.after:
        chunks.append("Context after the code to edit (read-only):\n" + parts.fence() + parts.after.rstrip("\n") + TEXT_FENCE_CLOSE + "\n\n")
    return "".join(chunks)


def program_messages(parts: PromptParts) -> list[dict[str, str]]:
    """Chat messages for program mode (one worked example, then the request)."""
    def user(instruction: str, region: str, context: str = "", focus: str = "") -> str:
        return (f"{context}Instruction: {instruction}\n{focus}\nInput ({len(split_lines(region))} lines):\n"
                f"{numbered(region)}\nWrite the edit program.")

    return [
        {"role": "system", "content": PROGRAM_RULES},
        {"role": "user", "content": user(PROGRAM_EXAMPLE_INSTRUCTION, PROGRAM_EXAMPLE_INPUT)},
        {"role": "assistant", "content": PROGRAM_EXAMPLE_OUTPUT},
        {"role": "user", "content": user(parts.instruction, parts.region, _context_block(parts), focus_sentence(parts))},
    ]


SELECTOR_RULES = ("Edit the code by writing an edit program: <copy lines=\"I-J\"/> keeps input lines I to J, "
                  "<gen>...</gen> writes new lines. Copy every unchanged line.")


def focus_in_region(parts: PromptParts) -> int | None:
    """The line the user pointed at, when it lies in the region (else no hint is shown)."""
    if parts.focus_line is None or not 1 <= parts.focus_line <= len(split_lines(parts.region)):
        return None
    return parts.focus_line


def focus_sentence(parts: PromptParts) -> str:
    """The hint shown when the user pointed at a line (empty when not, or outside the region)."""
    focus = focus_in_region(parts)
    return "" if focus is None else f"The problem is at or near line {focus}.\n"




def selector_messages(parts: PromptParts, layout: str = HINT_AFTER) -> list[dict[str, str]]:
    """Chat messages for a model with a trained span-selector adapter: no worked example (the
    adapter learned the format), so the prompt is about a third of the few-shot one. ``layout``
    must be the one the adapter was trained on (see HINT_AFTER)."""
    if layout not in SELECTOR_LAYOUTS:
        raise ValueError(f"unknown selector prompt layout {layout!r}; choose from {', '.join(SELECTOR_LAYOUTS)}")
    head = f"{_context_block(parts)}Instruction: {parts.instruction}\n"
    body = f"Input ({len(split_lines(parts.region))} lines):\n{numbered(parts.region)}"
    if layout == HINT_BEFORE:
        content = f"{head}{focus_sentence(parts)}\n{body}"
    else:
        hint = focus_sentence(parts)
        content = f"{head}\n{body}" + (f"\n{hint}" if hint else "")
    return [{"role": "system", "content": SELECTOR_RULES}, {"role": "user", "content": content}]


def focus_free_prefix(tokenizer: Any, parts: PromptParts, layout: str = HINT_AFTER) -> int:
    """How many leading tokens the selector prompt for ``parts`` (in ``layout``) has whatever its
    focus hint says, or with none: the whole numbered input in ``hint-after``. The localizer's
    hintless prompt and the program prompt both cut their prefill chunks there (the ``marks`` of
    engine.runtime.session.Session.append), so the program's prefill reuses the localizer's forward up to
    that token instead of the aligned chunk boundary before it (up to 63 tokens on llama.cpp).
    Remembered for the last few prompts: an edit asks twice (localizer, then program prompt)."""
    return _focus_free_prefix(tokenizer, replace(parts, focus_line=None), layout)


@functools.lru_cache(maxsize=8)
def _focus_free_prefix(tokenizer: Any, parts: PromptParts, layout: str) -> int:
    hintless = render(tokenizer, selector_messages(parts, layout))
    hinted = render(tokenizer, selector_messages(replace(parts, focus_line=1), layout))
    return common_prefix(hintless, hinted)


def text_messages(parts: PromptParts) -> list[dict[str, str]]:
    """Chat messages for whole-text regeneration (ar, speculative, pld)."""
    body = parts.region if parts.region.endswith("\n") or not parts.region else parts.region + "\n"
    return [
        {"role": "system", "content": TEXT_RULES},
        {"role": "user", "content": f"{_context_block(parts)}Instruction: {parts.instruction}\n{focus_sentence(parts)}\nCode:\n"
                                     f"{parts.fence()}{body}```"},
    ]


def render(tokenizer: Any, messages: list[dict[str, str]], assistant_prefix: str = "") -> list[int]:
    """Token ids of the chat, ending inside the assistant turn after ``assistant_prefix``."""
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return list(tokenizer.encode(text + assistant_prefix, add_special_tokens=False))
