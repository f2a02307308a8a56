"""Apply over HTTP, in the two conventions apply clients speak: a chat completion whose last user
message holds ``<code>…</code>`` and ``<update>…</update>`` (optionally ``<instruction>…</instruction>``;
Morph's format, what Continue's ``apply`` role sends with its prompt template), and
``POST /v1/code/apply`` with ``{"initialCode", "editSnippet"}`` (Relace's). Both run the engine's
apply request (:class:`engine.api.EditRequest` with ``update``), the one the CLI's ``apply`` runs,
and the same verdict (engine.verdict), so the merged file, or the refusal, is the CLI's for the
same case. A merge that breaks the syntax of a file that parsed is a 422 whose error names the line
(``line``/``column``); the language is the ``path``'s, or for a request without one (the chat
convention) the language the file parses in (engine.checks.syntax.sniffed_language). Every other
refusal is a 400.

Clients write ``<code>…</code>`` (Continue's and Morph's templates) and ``<code>\\n…\\n</code>``:
a newline right after an opening tag is the template's, and so is then one before the closing tag,
so the file's own final newline survives either way (:func:`apply_parts`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from engine.api import EditError, EditRequest, Engine
from engine.checks.syntax import sniffed_language
from engine.decoding.events import EditFinished, EditResult, OpResolved
from engine.openai_api.errors import ApiError
from engine.core.tokens import encode
from engine.openai_api.schemas import EXTENSION, usage_json
from engine.settings import Settings
from engine.verdict import Verdict, judge


@dataclass(frozen=True)
class ApplyParts:
    """The parts of an apply message: the file, the update, the instruction ("" when none)."""

    code: str
    update: str
    instruction: str = ""


def _tagged(text: str) -> str:
    """A tag's text: a newline right after the opening tag is the template's (``<code>\\n…\\n</code>``),
    and so is then one newline before the closing tag."""
    for newline in ("\r\n", "\n"):
        if text.startswith(newline):
            text = text[len(newline):]
            return text[:-len(newline)] if text.endswith(newline) else text
    return text


def apply_parts(message: str) -> ApplyParts | None:
    """The apply request in a user message, or None when it is not one (both ``<code>`` and a
    later ``<update>`` are needed). The code runs to the last ``</code>`` before the last
    ``<update>``, and the update to the last ``</update>``, so a file that itself holds these tags
    (HTML, a prompt template) is taken whole."""
    start = message.find("<code>")
    update_at = message.rfind("<update>")
    if start < 0 or update_at < start:
        return None
    code_end = message.rfind("</code>", start, update_at)
    update_end = message.rfind("</update>", update_at)
    if code_end < 0 or update_end < 0:
        return None
    code = _tagged(message[start + len("<code>"):code_end])
    update = _tagged(message[update_at + len("<update>"):update_end])
    instruction = ""
    begin = message.find("<instruction>", 0, start)
    if begin >= 0:
        end = message.find("</instruction>", begin, start)
        if end >= 0:
            instruction = message[begin + len("<instruction>"):end].strip()
    return ApplyParts(code, update, instruction)


def apply_request(settings: Settings, parts: ApplyParts, partial: bool = False, max_tokens: int | None = None,
                  language: str = "", mode: str | None = None) -> EditRequest:
    """The validated apply request for ``parts`` under the server's ``settings``, as the CLI's
    ``apply`` builds it (its mode ``auto`` is resolved by the engine: the aligner's program);
    ``max_tokens``: the bound on the merged file's tokens, else the setting's; ``mode``: the one
    the client asked for, else the setting's. Raises :class:`EditError` saying why the engine
    would refuse it."""
    return EditRequest.from_settings(settings, parts.code, parts.instruction, update=parts.update, partial=partial,
                                     max_new_tokens=max_tokens, language=language, mode=mode)


def unplaced_json(result: EditResult) -> list[dict[str, Any]]:
    """The chunks of the update the merge could not place, as JSON (their update lines and text)."""
    return [chunk.summary() for chunk in result.unplaced]


class ApplyRun:
    """One apply's merged text as it resolves (``deltas``, for the queue's worker thread); after
    it ends ``result`` holds the engine's result, or ``error`` why the engine refused the input."""

    def __init__(self, engine: Engine, request: EditRequest):
        self.engine, self.request = engine, request
        self.result: EditResult | None = None
        self.error: str | None = None
        self._verdict: Verdict | None = None

    def deltas(self, cancelled: Callable[[], bool]) -> Iterator[str]:
        """The merged file's text in order; their concatenation is ``result.output_text``."""
        try:
            for event in self.engine.stream(self.request, cancelled):
                if isinstance(event, OpResolved) and event.text:
                    yield event.text
                elif isinstance(event, EditFinished):
                    self.result = event.result
        except EditError as exc:
            self.error = str(exc)

    def verdict(self) -> Verdict | None:
        """The verdict the CLI's ``apply`` gives the finished merge (engine.verdict.judge: chunks
        of the update it could not place, unless ``partial``; a merge that did not finish, would
        delete most of the file or breaks its syntax); None when the engine refused the input."""
        if self.error is not None:
            return None
        result = self.result
        assert result is not None
        if self._verdict is None:
            language = self.request.language or sniffed_language(result.input_text, result.output_text)
            self._verdict = judge(result, self.request.instruction, self.request.max_new_tokens, language)
        return self._verdict

    def refusal(self) -> str | None:
        """Why the merge must not be written, or None: an input the engine refused, or the
        verdict's refusal, in the CLI's words."""
        if self.error is not None:
            return self.error
        verdict = self.verdict()
        assert verdict is not None
        return verdict.message if verdict.refused else None


class ApplyRefused(ApiError):
    """An apply whose merge must not be written (:meth:`ApplyRun.refusal`): a 400, whose body lists
    the update's chunks that could not be placed; a merge that breaks the file's syntax is a 422
    whose body names the line and column of the first error."""

    def __init__(self, message: str, unplaced: list[dict[str, Any]], syntax_error: dict[str, Any] | None = None):
        if syntax_error is not None:
            super().__init__(422, message, "syntax_error")
        else:
            super().__init__(400, message, "unplaced" if unplaced else "apply_failed")
        self.unplaced = unplaced
        self.syntax_error = syntax_error

    def body(self) -> dict[str, Any]:
        body = super().body()
        if self.syntax_error is not None:
            body["error"].update(self.syntax_error)
        return {**body, **({"unplaced": self.unplaced} if self.unplaced else {})}


def applied(run: ApplyRun) -> EditResult:
    """The finished apply's result, or :class:`ApplyRefused`."""
    refusal = run.refusal()
    if refusal is not None:
        unplaced = run.result is not None and run.result.stop_reason == "unplaced"
        verdict = run.verdict() if run.error is None else None
        syntax_error = None
        if verdict is not None and verdict.kind == "syntax" and verdict.syntax and verdict.syntax.error:
            error = verdict.syntax.error
            syntax_error = {"line": error.line, "column": error.column, "language": verdict.syntax.language}
        raise ApplyRefused(refusal, unplaced_json(run.result) if unplaced else [], syntax_error)
    assert run.result is not None
    return run.result


def apply_usage(run: ApplyRun, openai: bool = True) -> dict[str, Any]:
    """The finished apply's usage: the prompts the model read, and the merged file's tokens as its
    completion, counted by the model's tokenizer whoever wrote them (the aligner, the model's
    program, the lines outside its windows); ``openai``: in OpenAI's shape, else Relace's three counts."""
    result = run.result
    assert result is not None
    usage = usage_json(result.prompt_tokens, len(encode(run.engine.loaded.tokenizer, result.region_output)), 0, 0)
    return usage if openai else {k: usage[k] for k in ("prompt_tokens", "completion_tokens", "total_tokens")}


def apply_extension(result: EditResult) -> dict[str, Any]:
    """The engine's own field of a written merge (:func:`applied`: it finished) that placed only
    some chunks (``unplaced``, under ``partial``) or met a choice (``choice``: :func:`choice_json`);
    empty otherwise."""
    unplaced, choice = unplaced_json(result), choice_json(result)
    if not unplaced and choice is None:
        return {}
    return {EXTENSION: {"stop_reason": result.stop_reason, "detail": "", "unplaced": unplaced,
                        **({"choice": choice} if choice is not None else {})}}


def choice_json(result: EditResult) -> dict[str, Any] | None:
    """Where the merge's rules left a choice: who decided (``by``: the server's model when it is a
    user's own and the apply runs in ``auto``, else the rule), the reading ``chosen``, the ``alternatives``, the model's
    ``scores`` and the ``note`` in words (engine.apply.choice.Decision.json, the CLI's
    ``breakdown.choice``); None when there was none."""
    return result.breakdown.get("choice")


CHOICE_HEADER = "x-copy-as-decode-choice"  # choice_json's by, chosen and alternatives, as ASCII JSON


def choice_headers(result: EditResult) -> dict[str, str]:
    """:data:`CHOICE_HEADER` for a merge that met a choice (none otherwise)."""
    choice = choice_json(result)
    if choice is None:
        return {}
    brief = {k: choice[k] for k in ("by", "chosen", "alternatives")}
    return {CHOICE_HEADER: json.dumps(brief, ensure_ascii=True, separators=(",", ":"))}
