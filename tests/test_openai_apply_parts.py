"""How an apply client's chat message is read (engine/openai_api/apply.py): the file, the update and
the instruction out of ``<code>``/``<update>``/``<instruction>``, whichever of the templates clients
use wrote them; a message without both tags is an ordinary chat."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.openai_api.apply import ApplyParts, apply_parts
from engine.openai_api.schemas import ApplyBody

CODE = "def add(a, b):\n    return a - b\n"
UPDATE = "def add(a, b):\n    return a + b\n"


@pytest.mark.parametrize("message", [
    f"<code>{CODE}</code>\n<update>{UPDATE}</update>",  # Continue's and Morph's template
    f"<code>\n{CODE}\n</code>\n<update>\n{UPDATE}\n</update>",  # tags on their own lines
    f"<code>\r\n{CODE}\r\n</code><update>\r\n{UPDATE}\r\n</update>",
])
def test_the_templates_clients_use_give_the_same_parts(message: str) -> None:
    assert apply_parts(message) == ApplyParts(CODE, UPDATE, "")


def test_instruction_and_a_file_without_a_final_newline() -> None:
    message = "<instruction>Fix the sum</instruction>\n<code>x = 1</code>\n<update>x = 2</update>"
    assert apply_parts(message) == ApplyParts("x = 1", "x = 2", "Fix the sum")
    assert apply_parts("<code>\nx = 1\n</code><update>\nx = 2\n</update>") == ApplyParts("x = 1", "x = 2")


def test_a_file_that_holds_the_tags_is_taken_whole() -> None:
    html = "<p><code>x</code></p>\n<pre><code>y</code></pre>\n"
    parts = apply_parts(f"<code>{html}</code>\n<update><p><code>z</code></p>\n// ... existing code ...\n</update>")
    assert parts is not None and parts.code == html
    assert parts.update == "<p><code>z</code></p>\n// ... existing code ...\n"


@pytest.mark.parametrize("message", [
    "Write a function that adds two numbers.",
    f"<code>{CODE}</code> what does this do?",
    f"<update>{UPDATE}</update><code>{CODE}</code>",
    f"<code>{CODE}<update>{UPDATE}</update>",
])
def test_other_messages_are_ordinary_chats(message: str) -> None:
    assert apply_parts(message) is None


def test_the_code_apply_body_takes_both_spellings() -> None:
    camel = ApplyBody.model_validate({"initialCode": CODE, "editSnippet": UPDATE, "model": "relace-apply-3"})
    snake = ApplyBody.model_validate({"initial_code": CODE, "edit_snippet": UPDATE, "stream": True})
    assert (camel.initial_code, camel.edit_snippet, camel.stream) == (CODE, UPDATE, False)
    assert (snake.initial_code, snake.edit_snippet, snake.stream) == (CODE, UPDATE, True)


def test_the_apply_docs_show_the_tested_shapes() -> None:
    """docs/apply-clients.md gives Continue the template tests/test_openai_apply.py sends, and the
    code/apply body it posts."""
    docs = (Path(__file__).resolve().parents[1] / "docs" / "apply-clients.md").read_text()
    assert 'apply: "<code>{{{ original_code }}}</code>\\n<update>{{{ new_code }}}</update>"' in docs
    assert "/v1/code/apply" in docs and '"initialCode"' in docs and '"editSnippet"' in docs
