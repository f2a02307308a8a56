"""Request bodies (pydantic) and the OpenAI response shapes the server writes.

Requests are untrusted: every field is typed and bounded here, unknown OpenAI fields that do
not change the output (``user``, ``metadata``, ``logprobs: false``, ...) are accepted and
ignored, and fields this server cannot honour are refused by :func:`check_supported`.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, model_validator

from engine.core.choices import ApplyUserMode, Verify
from engine.openai_api.errors import ApiError

MAX_STOP = 32
MAX_CANDIDATES = 16  # candidates one edit request may ask for
# Fields a check command could come in: a check runs code on the server, so none is ever accepted here.
CHECK_FIELDS = ("check", "check_command", "check_timeout", "checks")
EXTENSION = "copy_as_decode"  # the key of the engine's own fields in a completion (stop_extension)


class TextPart(BaseModel):
    type: Literal["text"]
    text: str


Content = str | list[TextPart]


def content_text(content: Content | None) -> str:
    """A message's or prediction's text (a list of text parts is concatenated, as OpenAI does)."""
    if content is None:
        return ""
    return content if isinstance(content, str) else "".join(part.text for part in content)


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: Content | None = None


class Prediction(BaseModel):
    """OpenAI's Predicted Outputs: the text the client expects the answer to be (mostly)."""

    type: Literal["content"]
    content: Content


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="ignore")

    include_usage: bool = False


class ChatExtension(BaseModel):
    """The engine's own request fields, under ``copy_as_decode`` (OpenAI clients send it with
    ``extra_body``): ``verify`` is how a prediction's drafts are verified for this request (one of
    engine.core.choices.VERIFY_RULES; None: the server's ``--verify``)."""

    model_config = ConfigDict(extra="forbid")

    verify: Verify | None = None


class ChatCompletionRequest(BaseModel):
    """``POST /v1/chat/completions``. ``temperature`` defaults to 0 (greedy; OpenAI's default is 1):
    an edit engine's clients want the model's most likely rewrite, and drafting from the prediction
    is lossless only under greedy decoding."""

    model_config = ConfigDict(extra="allow")

    model: str
    messages: list[ChatMessage] = Field(min_length=1)
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    seed: int | None = None
    stop: str | list[str] | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    prediction: Prediction | None = None
    n: int = Field(default=1, ge=1)
    tools: list[Any] | None = None
    tool_choice: Any = None
    functions: list[Any] | None = None
    partial: bool = False  # an apply (engine.openai_api.apply) that places only some chunks answers them
    copy_as_decode: ChatExtension | None = None

    def verify_rule(self, server: str) -> str:
        """The request's verify rule if it names one, else the server's."""
        named = self.copy_as_decode.verify if self.copy_as_decode is not None else None
        return named or server

    def stop_strings(self) -> tuple[str, ...]:
        stops = [self.stop] if isinstance(self.stop, str) else list(self.stop or [])
        return tuple(s for s in stops if s)

    def token_limit(self) -> int | None:
        return self.max_completion_tokens or self.max_tokens


def check_supported(req: ChatCompletionRequest) -> None:
    """Refuse what this server does not do (400), with OpenAI's wording where OpenAI refuses too."""
    if req.prediction is not None and req.n > 1:
        raise ApiError(400, "Predicted outputs are not supported with n > 1.", "invalid_request_error", "n")
    if req.prediction is not None and (req.tools or req.functions):
        raise ApiError(400, "Predicted outputs are not supported with tools or functions.",
                       "invalid_request_error", "tools")
    if req.n > 1:
        raise ApiError(400, "n > 1 is not supported: this server decodes one choice per request.",
                       "invalid_request_error", "n")
    if req.tools or req.functions:
        raise ApiError(400, "tools and functions are not supported by this server.", "invalid_request_error", "tools")
    if any(m.role == "tool" for m in req.messages):
        raise ApiError(400, "tool messages are not supported by this server.", "invalid_request_error", "messages")
    if len(req.stop_strings()) > MAX_STOP:  # OpenAI takes 4; Continue sends all its stop words to other hosts
        raise ApiError(400, f"stop takes at most {MAX_STOP} sequences.", "invalid_request_error", "stop")


class EditBody(BaseModel):
    """``POST /v1/edits/copy-as-decode``: the engine's own edit request (see
    :class:`engine.api.EditRequest`). ``lines`` is ``[first, last]`` (1-based, inclusive); ``focus``
    the line the problem is at or near; ``path`` only names the language of the code fences;
    ``candidates``: answer up to K distinct candidates, best score first, none of them checked
    (engine.candidates; not streamed)."""

    model_config = ConfigDict(extra="forbid")

    model: str | None = None
    text: str
    instruction: str = Field(min_length=1)
    lines: tuple[int, int] | None = None
    focus: int | None = None
    mode: Literal["auto", "program", "speculative", "ar", "pld"] | None = None  # None: the server's mode
    max_new_tokens: int | None = Field(default=None, ge=1)
    language: str | None = None
    path: str | None = None
    verify: Verify | None = None  # None: the server's --verify
    stream: bool = False
    candidates: int | None = Field(default=None, ge=1, le=MAX_CANDIDATES)  # up to K unchecked candidates

    @model_validator(mode="before")
    @classmethod
    def refuse_check(cls, data: Any) -> Any:
        """A check command runs code: only a person at their own machine gives one (the CLI, an
        editor's user setting), never a request over HTTP."""
        named = [name for name in CHECK_FIELDS if isinstance(data, dict) and name in data]
        if named:
            raise ApiError(400, f"'{named[0]}': this server never runs a check command (it would run code sent over "
                           "HTTP); ask for unchecked 'candidates' and check them where you run your tests",
                           "check_not_allowed", named[0])
        return data


class ApplyBody(BaseModel):
    """``POST /v1/code/apply`` (Relace's shape): merge ``editSnippet`` into ``initialCode``
    (snake_case names are taken too, as Relace's newer clients send them). Fields a client adds
    for its own service (``model``, metadata) are ignored: one engine serves every apply.
    ``partial``: write what could be placed and list the rest; ``path`` only names the language;
    ``mode``: the mode asked for this apply (``aligner``: the rules alone, the rule deciding any
    choice they leave); None: the server's ``mode`` setting."""

    model_config = ConfigDict(extra="ignore")

    initial_code: str = Field(validation_alias=AliasChoices("initialCode", "initial_code"))
    edit_snippet: str = Field(validation_alias=AliasChoices("editSnippet", "edit_snippet"))
    instruction: str = ""
    stream: bool = False
    partial: bool = False
    path: str | None = None
    mode: ApplyUserMode | None = None


def completion_id() -> str:
    return f"chatcmpl-{uuid.uuid4().hex[:24]}"


def usage_json(prompt_tokens: int, completion_tokens: int, accepted: int, rejected: int) -> dict[str, Any]:
    """OpenAI's usage object; ``accepted``/``rejected``: prediction tokens the decode kept / verified
    and discarded (both are part of ``completion_tokens``' cost, as with OpenAI)."""
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "completion_tokens_details": {"accepted_prediction_tokens": accepted,
                                          "rejected_prediction_tokens": rejected, "reasoning_tokens": 0}}


def stop_extension(stop_reason: str | None, detail: str) -> dict[str, Any]:
    """The extension field of a completion (and a stream's final chunk) the engine ended itself:
    ``{"copy_as_decode": {"stop_reason": "loop", "detail": ...}}``; empty otherwise, so other
    completions keep OpenAI's exact shape."""
    return {EXTENSION: {"stop_reason": stop_reason, "detail": detail}} if stop_reason else {}


def completion_json(cid: str, model: str, text: str, finish_reason: str, usage: dict[str, Any],
                    extension: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"id": cid, "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": None,
                         "finish_reason": finish_reason}],
            "usage": usage, **(extension or {})}


def chunk_json(cid: str, model: str, created: int, delta: dict[str, Any], finish_reason: str | None,
               usage: dict[str, Any] | None = None, extension: dict[str, Any] | None = None) -> dict[str, Any]:
    """One ``chat.completion.chunk``; the usage chunk (``stream_options.include_usage``) has no choices."""
    choices = [] if usage is not None else [{"index": 0, "delta": delta, "logprobs": None,
                                             "finish_reason": finish_reason}]
    out: dict[str, Any] = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                           "choices": choices}
    if usage is not None:
        out["usage"] = usage
    return {**out, **(extension or {})}
