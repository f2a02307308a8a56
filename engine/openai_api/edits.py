"""The engine's own edit request over HTTP (``POST /v1/edits/copy-as-decode``): any mode,
program mode included, answered with the JSON ``copy-as-decode edit --json`` prints (plus
``output_text``, which the CLI writes to a file instead), or streamed as the engine's events.
With ``candidates`` K: up to K distinct candidates (engine.candidates), unchecked: a check
command is never accepted over HTTP (engine.openai_api.schemas.EditBody)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

from engine.api import EditError, EditRequest, Engine, language_for
from engine.candidates import Search, search_fixes
from engine.decoding.events import EditFinished, EditResult, EditStarted, Event, OpResolved
from engine.openai_api.schemas import EditBody
from engine.settings import Settings
from engine.verdict import check_focus, judge, json_summary


def body_request(engine: Engine, body: EditBody, settings: Settings) -> EditRequest:
    """The validated :class:`EditRequest` for ``body`` under the server's ``settings`` (a field the
    body leaves out is the setting's), with ``auto`` made concrete; raises :class:`EditError`."""
    check_focus(body.focus, body.text, body.lines)
    request = EditRequest.from_settings(
        settings, body.text, body.instruction, lines=body.lines, mode=body.mode,
        max_new_tokens=body.max_new_tokens, focus_line=body.focus, verify=body.verify,
        language=body.language if body.language is not None else language_for(body.path or ""))
    return replace(request, mode=engine.resolve_mode(request.mode))


def event_json(event: Event, request: EditRequest) -> dict[str, Any]:
    """One engine event as JSON (``finished`` carries the same summary as the non-streamed answer)."""
    if isinstance(event, EditStarted):
        return {"event": "started", "mode": event.mode, "model": event.model, "input_lines": event.input_lines,
                "prompt_tokens": event.prompt_tokens}
    if isinstance(event, OpResolved):
        return {"event": "op", "index": event.index, "op": event.op.serialize(), "text": event.text,
                "input_lines_consumed": event.input_lines_consumed,
                "tokens": {"generated": event.tokens.generated, "copied": event.tokens.copied,
                           "forced": event.tokens.forced},
                "elapsed_s": round(event.elapsed_s, 6)}
    return {"event": "finished", "result": result_json(event.result, request)}


def result_json(result: EditResult, request: EditRequest) -> dict[str, Any]:
    """``edit --json``'s summary (``refused`` says why the CLI would not write it) plus the text."""
    verdict = judge(result, request.instruction, request.max_new_tokens, request.language, request.focus_line)
    return {**json_summary(result, {}, verdict.damage, verdict.message, [], request.language, verdict.syntax,
                           verdict.far),
            "output_text": result.output_text}


class EditRun:
    """One edit's events as JSON (``events``, for the queue's worker thread); a refused request
    (bad range, a mode the backend cannot run) ends the stream with an ``error`` event and sets
    ``error``."""

    def __init__(self, engine: Engine, request: EditRequest):
        self.engine, self.request = engine, request
        self.result: EditResult | None = None
        self.error: str | None = None

    def events(self, cancelled: Callable[[], bool]) -> Iterator[dict[str, Any]]:
        try:
            for event in self.engine.stream(self.request, cancelled):
                if isinstance(event, EditFinished):
                    self.result = event.result
                yield event_json(event, self.request)
        except EditError as exc:
            self.error = str(exc)
            yield {"event": "error", "error": {"message": self.error, "type": "invalid_request_error",
                                                "code": "edit_failed", "param": None}}

    def summary(self) -> dict[str, Any]:
        assert self.result is not None
        return result_json(self.result, self.request)


class CandidatesRun(EditRun):
    """An edit answered with ``k`` distinct unchecked candidates, or fewer when the model had no
    more (engine.candidates.search_fixes: ``search.shortfall`` says so): the best candidate's
    summary, as an edit's, plus ``candidates`` (each with its output text; a refused one says why)."""

    def __init__(self, engine: Engine, request: EditRequest, k: int):
        super().__init__(engine, request)
        self.k = k
        self.search: Search | None = None

    def events(self, cancelled: Callable[[], bool]) -> Iterator[dict[str, Any]]:
        try:
            self.search = search_fixes(self.engine, self.request, k=self.k, check=None, cancelled=cancelled)
        except EditError as exc:
            self.error = str(exc)
            return
        best = self.search.best
        if best is None:  # cancelled before the first candidate finished
            self.error = "the edit was cancelled"
            return
        self.result = best.result
        yield {"event": "finished"}

    def summary(self) -> dict[str, Any]:
        assert self.search is not None and self.result is not None
        listed = [{**c.json(), "output_text": c.result.output_text} for c in self.search.candidates]
        return {**result_json(self.result, self.request), "candidates": listed,
                "search": {"stop_reason": self.search.stop_reason, "decodes": self.search.decodes,
                           "seconds": round(self.search.seconds, 3), "distinct": self.search.distinct,
                           "shortfall": self.search.shortfall() or None}}
