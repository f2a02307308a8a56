"""A function taken from licensed source code, and the size filter every source applies."""

from __future__ import annotations

from dataclasses import dataclass

MIN_LINES = 4
MAX_LINES = 40
MAX_TOKENS = 350
CHARS_PER_TOKEN = 3.5  # SmolLM2's tokenizer averages about this on code; avoids loading it here
MAX_LINE_CHARS = 160


@dataclass(frozen=True)
class SourceFunction:
    """One function's source (ends with ``"\\n"``), where it came from and under which license.

    ``file`` identifies the source file (the held-out split is drawn by whole files), ``package``
    the distribution it came from (``python-stdlib-3.11.7``, ``lodash-es@4.18.1``).
    """

    code: str
    language: str
    name: str
    file: str
    package: str
    license: str

    @property
    def source(self) -> str:
        return f"{self.file}:{self.name}"


def size_ok(code: str) -> bool:
    """Roughly 4-40 lines and at most ~350 SmolLM2 tokens (approximated as characters / 3.5), no long lines."""
    lines = code.splitlines()
    return (MIN_LINES <= len(lines) <= MAX_LINES and len(code) / CHARS_PER_TOKEN <= MAX_TOKENS
            and max(len(line) for line in lines) <= MAX_LINE_CHARS and "\r" not in code and "\x0c" not in code)
