"""The FastAPI application: OpenAI's chat completions (with Predicted Outputs) and models, the
engine's own edit request, apply (a chat completion holding ``<code>``/``<update>``, and
``/v1/code/apply``: :mod:`.apply`), and a health probe.

Bodies are read here with a size limit (413) and parsed by :mod:`.schemas` (400 in OpenAI's
shape, not FastAPI's 422), so every error a client sees has OpenAI's shape. Streams are
server-sent events ending in ``data: [DONE]``. A client that goes away cancels its decode (which
stops where the engine polls the flag: :mod:`.queue`): a stream's generator is closed by Starlette
on disconnect, and a non-streamed request is watched with ``request.is_disconnected()`` while it
waits or decodes.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from engine.api import EditError, Engine, language_for
from engine.decoding.events import EditResult
from engine.decoding.tables import tables_for
from engine.openai_api.apply import (
    ApplyParts,
    ApplyRefused,
    ApplyRun,
    applied,
    apply_extension,
    apply_parts,
    apply_request,
    apply_usage,
    choice_headers,
    choice_json,
    unplaced_json,
)
from engine.openai_api.completion import ChatDecode, build_job, chat_messages
from engine.openai_api.edits import CandidatesRun, EditRun, body_request
from engine.openai_api.errors import ApiError, error_body
from engine.openai_api.queue import DecodeQueue, Ticket
from engine.openai_api.schemas import (
    ApplyBody,
    ChatCompletionRequest,
    EditBody,
    check_supported,
    chunk_json,
    completion_id,
    completion_json,
    content_text,
    stop_extension,
    usage_json,
)
from engine.settings import DEFAULTS, Settings

M = TypeVar("M", bound=BaseModel)
DISCONNECT_POLL_S = 0.05
DECODE_HEADER = "x-copy-as-decode-decode-seconds"  # prompt rendering excluded; the HTTP overhead is the rest
STOP_HEADER = "x-copy-as-decode-stop-reason"  # only when the engine ended the completion itself ("loop")


@dataclass
class ServerConfig:
    """``model_id``: the name ``/v1/models`` lists and requests must use; ``api_key``: when set,
    requests need ``Authorization: Bearer <key>``; ``settings``: the server's settings, whose
    request-level ones (engine.decoding.request.REQUEST_SETTINGS) an edit body may override,
    whose ``verify`` rule a prediction's drafts follow (unless a request names its own) and whose
    ``chat_max_tokens`` a chat completion without ``max_tokens`` gets."""

    model_id: str
    max_waiting: int = 8
    max_body_bytes: int = 4 * 1024 * 1024
    api_key: str | None = None
    settings: Settings = DEFAULTS


def create_app(engine: Engine, config: ServerConfig) -> FastAPI:
    app = FastAPI(title="copy-as-decode", docs_url=None, redoc_url=None, openapi_url=None)
    loaded = engine.loaded
    tables = tables_for(loaded)
    queue = DecodeQueue(config.max_waiting, concurrent=loaded.runtime.concurrent)
    app.state.queue = queue

    @app.exception_handler(ApiError)
    async def api_error(_request: Request, exc: ApiError) -> JSONResponse:
        return JSONResponse(exc.body(), status_code=exc.status)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return JSONResponse(error_body(exc.status_code, str(exc.detail)), status_code=exc.status_code)

    def authorize(request: Request) -> None:
        if config.api_key is None:
            return
        given = request.headers.get("authorization", "")
        token = given[7:] if given[:7].lower() == "bearer " else ""
        if not hmac.compare_digest(token.encode(), config.api_key.encode()):
            raise ApiError(401, "Incorrect API key provided.", "invalid_api_key")

    def check_model(name: str | None) -> None:
        if name is not None and name != config.model_id:
            raise ApiError(404, f"The model `{name}` does not exist; this server serves `{config.model_id}`.",
                           "model_not_found", "model")

    async def read_body(request: Request, schema: type[M]) -> M:
        declared = request.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > config.max_body_bytes:
            raise ApiError(413, f"The request body is larger than {config.max_body_bytes} bytes.", "body_too_large")
        raw = bytearray()
        async for part in request.stream():
            raw += part
            if len(raw) > config.max_body_bytes:
                raise ApiError(413, f"The request body is larger than {config.max_body_bytes} bytes.",
                               "body_too_large")
        try:
            data = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            raise ApiError(400, f"The request body is not valid JSON: {exc}", "invalid_json") from None
        if not isinstance(data, dict):
            raise ApiError(400, "The request body must be a JSON object.", "invalid_json")
        try:
            return schema.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise ApiError(400, f"Invalid value for '{where}': {first['msg']}", "invalid_value", where) from None

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok", "model": config.model_id, "backend": loaded.runtime.describe(), **queue.stats()}

    @app.get("/v1/models")
    async def models(request: Request) -> dict[str, Any]:
        authorize(request)
        return {"object": "list", "data": [{"id": config.model_id, "object": "model", "created": 0,
                                             "owned_by": "copy-as-decode"}]}

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        authorize(request)
        req = await read_body(request, ChatCompletionRequest)
        check_model(req.model)
        check_supported(req)
        user = [m for m in req.messages if m.role == "user"]
        parts = apply_parts(content_text(user[-1].content)) if user else None
        if parts is not None:
            return await chat_apply(request, req, parts)
        prediction = content_text(req.prediction.content) if req.prediction is not None else None
        job = build_job(loaded, chat_messages(req.messages), req.token_limit(), req.stop_strings(), req.temperature,
                        req.top_p, req.seed, prediction or None, req.verify_rule(config.settings.edit.verify),
                        config.settings.http.chat_max_tokens)
        ticket = queue.admit()

        def work(cancelled: Callable[[], bool]) -> Iterator[str | ChatDecode]:
            decode = ChatDecode(loaded, tables, job, cancelled)
            yield from decode.deltas()
            yield decode

        cid = completion_id()
        if req.stream:
            usage_wanted = bool(req.stream_options and req.stream_options.include_usage)
            return StreamingResponse(_chat_events(queue, ticket, work, cid, config.model_id, len(job.prompt_ids),
                                                  usage_wanted), media_type="text/event-stream")
        items = await _collect(request, queue, ticket, work)
        if items is None:
            return Response(status_code=499)
        decode = items[-1]
        assert isinstance(decode, ChatDecode)
        usage = usage_json(len(job.prompt_ids), decode.completion_tokens, decode.accepted, decode.rejected)
        headers = {DECODE_HEADER: f"{decode.seconds:.6f}"}
        if decode.stop_reason:
            headers[STOP_HEADER] = decode.stop_reason
        return JSONResponse(completion_json(cid, config.model_id, decode.text, decode.finish_reason, usage,
                                            stop_extension(decode.stop_reason, decode.stop_detail)),
                            headers=headers)

    def start_apply(parts: ApplyParts, partial: bool, max_tokens: int | None = None,
                    path: str | None = None, mode: str | None = None) -> tuple[ApplyRun, Ticket]:
        """The apply's run and its place in the queue; an input the engine refuses is a 400."""
        try:
            edit = apply_request(config.settings, parts, partial, max_tokens, language_for(path or ""), mode)
        except EditError as exc:
            raise ApiError(400, str(exc), "invalid_apply") from None
        return ApplyRun(engine, edit), queue.admit()

    async def chat_apply(request: Request, req: ChatCompletionRequest, parts: ApplyParts) -> Response:
        """A chat completion that asks for an apply: the merged file is the assistant's content."""
        run, ticket = start_apply(parts, req.partial, req.token_limit())
        cid = completion_id()
        if req.stream:
            usage_wanted = bool(req.stream_options and req.stream_options.include_usage)
            return StreamingResponse(_apply_chat_events(queue, ticket, run, cid, config.model_id, usage_wanted),
                                     media_type="text/event-stream")
        if await _collect(request, queue, ticket, run.deltas) is None:
            return Response(status_code=499)
        result = applied(run)
        return JSONResponse(completion_json(cid, config.model_id, result.output_text, "stop",
                                            apply_usage(run), apply_extension(result)),
                            headers=choice_headers(result))

    @app.post("/v1/code/apply")
    async def code_apply(request: Request) -> Response:
        authorize(request)
        body = await read_body(request, ApplyBody)
        run, ticket = start_apply(ApplyParts(body.initial_code, body.edit_snippet, body.instruction), body.partial,
                                  path=body.path, mode=body.mode)
        if body.stream:
            return StreamingResponse(_code_apply_events(queue, ticket, run), media_type="text/event-stream")
        if await _collect(request, queue, ticket, run.deltas) is None:
            return Response(status_code=499)
        result = applied(run)
        return JSONResponse({"mergedCode": result.output_text, **code_apply_fields(run, result)},
                            headers=choice_headers(result))

    @app.post("/v1/edits/copy-as-decode")
    async def edits(request: Request) -> Response:
        authorize(request)
        body = await read_body(request, EditBody)
        check_model(body.model)
        try:
            edit = body_request(engine, body, config.settings)
        except EditError as exc:
            raise ApiError(400, str(exc), "invalid_edit") from None
        if body.candidates is not None and body.stream:
            raise ApiError(400, "'candidates' answers once, when every candidate is decoded: it cannot be streamed",
                           "invalid_value", "stream")
        ticket = queue.admit()
        run = EditRun(engine, edit) if body.candidates is None else CandidatesRun(engine, edit, body.candidates)
        if body.stream:
            return StreamingResponse(_edit_events(queue, ticket, run), media_type="text/event-stream")
        items = await _collect(request, queue, ticket, run.events)
        if items is None:
            return Response(status_code=499)
        if run.error is not None:
            raise ApiError(400, run.error, "edit_failed")
        return JSONResponse(run.summary())

    @app.exception_handler(Exception)
    async def internal_error(_request: Request, exc: Exception) -> JSONResponse:
        return JSONResponse(error_body(500, "internal server error"), status_code=500)

    return app


async def _collect(request: Request, queue: DecodeQueue, ticket: Ticket,
                   work: Callable[[Callable[[], bool]], Iterator[Any]]) -> list[Any] | None:
    """Every item of a non-streamed request, or None when the client went away (its decode is
    cancelled)."""

    async def gather() -> list[Any]:
        return [item async for item in queue.run(ticket, work)]

    task = asyncio.ensure_future(gather())
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=DISCONNECT_POLL_S)
            if done:
                try:
                    return task.result()
                except EditError as exc:  # a backend failure (server down, context full): the message says which
                    raise ApiError(503, str(exc), "backend_error") from None
            if await request.is_disconnected():
                ticket.cancel.set()
                task.cancel()
                return None
    finally:
        if not task.done():
            ticket.cancel.set()
            task.cancel()


def sse(data: Any) -> str:
    return f"data: {json.dumps(data, separators=(',', ':'))}\n\n"


async def _chat_events(queue: DecodeQueue, ticket: Ticket, work: Callable[[Callable[[], bool]], Iterator[Any]],
                       cid: str, model: str, prompt_tokens: int, usage_wanted: bool) -> AsyncIterator[str]:
    created = int(time.time())
    yield sse(chunk_json(cid, model, created, {"role": "assistant", "content": ""}, None))
    decode = None
    try:
        async for item in queue.run(ticket, work):
            if isinstance(item, str):
                yield sse(chunk_json(cid, model, created, {"content": item}, None))
            else:
                decode = item
    except EditError as exc:  # a backend failure (context full, server down): the message says which
        yield sse(error_body(503, str(exc), "backend_error"))
        return
    assert decode is not None
    yield sse(chunk_json(cid, model, created, {}, decode.finish_reason,
                         extension=stop_extension(decode.stop_reason, decode.stop_detail)))
    if usage_wanted:
        yield sse(chunk_json(cid, model, created, {}, None,
                             usage_json(prompt_tokens, decode.completion_tokens, decode.accepted, decode.rejected)))
    yield "data: [DONE]\n\n"


async def _apply_chat_events(queue: DecodeQueue, ticket: Ticket, run: ApplyRun, cid: str, model: str,
                             usage_wanted: bool) -> AsyncIterator[str]:
    """A streamed chat apply: the merged file in content deltas as it resolves; a merge that must
    not be written ends with an error event instead of a finish (the client keeps nothing)."""
    created = int(time.time())
    yield sse(chunk_json(cid, model, created, {"role": "assistant", "content": ""}, None))
    async for delta in queue.run(ticket, run.deltas):
        yield sse(chunk_json(cid, model, created, {"content": delta}, None))
    try:
        result = applied(run)
    except ApplyRefused as refused:
        yield sse(refused.body())
        return
    yield sse(chunk_json(cid, model, created, {}, "stop", extension=apply_extension(result)))
    if usage_wanted:
        yield sse(chunk_json(cid, model, created, {}, None, apply_usage(run)))
    yield "data: [DONE]\n\n"


def code_apply_fields(run: ApplyRun, result: EditResult) -> dict[str, Any]:
    """What a ``/v1/code/apply`` answer carries besides ``mergedCode`` (the stream's last event):
    ``usage``, and ``unplaced`` (partial) and ``choice`` (engine.openai_api.apply.choice_json) when
    there are any."""
    unplaced, choice = unplaced_json(result), choice_json(result)
    return {"usage": apply_usage(run, openai=False), **({"unplaced": unplaced} if unplaced else {}),
            **({"choice": choice} if choice is not None else {})}


async def _code_apply_events(queue: DecodeQueue, ticket: Ticket, run: ApplyRun) -> AsyncIterator[str]:
    """A streamed ``/v1/code/apply``: ``{"mergedCode": delta}`` events, then ``{"usage"}`` (and
    ``unplaced``), or an error event for a merge that must not be written."""
    async for delta in queue.run(ticket, run.deltas):
        yield sse({"mergedCode": delta})
    try:
        result = applied(run)
    except ApplyRefused as refused:
        yield sse(refused.body())
        return
    yield sse(code_apply_fields(run, result))
    yield "data: [DONE]\n\n"


async def _edit_events(queue: DecodeQueue, ticket: Ticket, run: EditRun) -> AsyncIterator[str]:
    async for item in queue.run(ticket, run.events):
        yield sse(item)
    yield "data: [DONE]\n\n"
