"""The vLLM backend: a shared server, over its OpenAI-compatible HTTP API.

The user runs the server (for example ``python -m vllm.entrypoints.openai.api_server --model M``)
and names it in a user-level setting (``serverUrl``; a workspace cannot set it). The API key, if
the server wants one, is read from an environment variable (``COPY_AS_DECODE_API_KEY`` unless
``apiKeyEnv`` names another) when the backend connects, and is never logged or shown.

A server returns tokens, not logits, so this runtime has no ``session``: program mode is a
client loop of grammar-constrained segments and the text modes one streamed completion each
(:mod:`engine.decoding.remote_decode`). The tokenizer is local (the model name, e.g. ``default``, names
the local copy of what the server serves); at connect time it is checked against the server's
``/tokenize`` so prompts sent as token ids mean the same thing on both sides.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Callable, Iterator

from engine.core.errors import ModelLoadError
from engine.core.tokens import encode
from engine.runtime.backends import BackendError
from engine.runtime.backends.http_client import CompletionsClient, RemoteError
from engine.runtime.kinds import ServerRuntime
from engine.runtime.loaded import LoadedModel, LoadRequest
from engine.runtime.protocol import JsonValue
from engine.runtime.sources import Progress, load_tokenizer

_PROBE = "def probe(x):\n    return x + 1  # <copy lines=\"1-2\"/> é\n"
# What vLLM answers a ``logit_bias`` with on a server started with speculative decoding (its
# n-gram drafting, --speculative-config): "The min_p and logit_bias sampling parameters are not yet
# supported with speculative decoding."
SPECULATIVE_REFUSAL = "not yet supported with speculative decoding"


class VllmRuntime(ServerRuntime):
    """One served model on one server. Requests are independent, so edits may run concurrently."""

    backend = "vllm"

    def __init__(self, client: CompletionsClient, served_model: str, tokenizer: Any, max_model_len: int | None,
                 lora: str | None = None):
        self.client, self.served_model, self.tokenizer = client, served_model, tokenizer
        self.max_model_len = max_model_len
        self.lora = lora  # the served LoRA module program mode asks for (the span selector), if any
        # with_selector's answer per adapter folder, None included: the server is asked once
        self._selectors: dict[Path, LoadedModel | None] = {}

    @property
    def request_model(self) -> str:
        return self.lora or self.served_model

    @property
    def address(self) -> str:
        return self.client.display

    @property
    def vocab_size(self) -> int:
        return len(self.tokenizer)

    def describe(self) -> str:
        return f"vLLM at {self.client.display} ({self.request_model})"

    def facts(self) -> dict[str, str]:
        return {"weights": f"served as {self.request_model} by {self.client.display}", "threads": "the server's"}

    def eos_ids(self) -> set[int]:
        return set()  # the tokenizer's own end tokens (engine.decoding.tables) are the stop ids

    def context_limit(self) -> int | None:
        return self.max_model_len if self.max_model_len and self.max_model_len > 0 else None

    def with_selector(self, loaded: LoadedModel, folder: Path, progress: Progress | None) -> LoadedModel | None:
        """The program-mode model: the server's LoRA module of ``folder`` (serve it with
        ``--enable-lora --lora-modules NAME=FOLDER``; :func:`lora_module_for`), else None (the base
        model). The server is asked once per folder: the answer, None too, is kept."""
        key = folder.resolve()
        if key not in self._selectors:
            module = lora_module_for(served_models(self.client), self.served_model, folder)
            self._selectors[key] = None if module is None else LoadedModel(
                name=loaded.name, model=None, tokenizer=loaded.tokenizer, device="remote", dtype="remote",
                selector=str(folder),
                runtime=VllmRuntime(self.client, self.served_model, self.tokenizer, self.max_model_len, lora=module))
        return self._selectors[key]

    # -- requests -------------------------------------------------------------------------------

    def stream_completion(self, prompt_ids: list[int], max_tokens: int, cancelled: Callable[[], bool],
                          **extra: JsonValue) -> Iterator[tuple[list[int], str | None]]:
        """Greedy completion of a token-id prompt, streamed: (new token ids, finish reason or None)
        per event. The prompt is never logged (it is the user's code)."""
        body = {"model": self.request_model, "prompt": prompt_ids, "max_tokens": max_tokens, "temperature": 0.0,
                "return_token_ids": True, "skip_special_tokens": False, **extra}
        if self.client.refuses_logit_bias:
            body.pop("logit_bias", None)
        streamed = False
        try:
            for item in self._events(body, cancelled):
                streamed = True
                yield item
        except RemoteError as exc:
            # A server running speculative decoding refuses the bias that keeps special tokens out
            # before it streams anything: without it the output is the same greedy text, and a
            # special token the server might write is still refused (remote_decode.reject_special).
            if streamed or "logit_bias" not in body or SPECULATIVE_REFUSAL not in str(exc):
                raise
            self.client.refuses_logit_bias = True
            body.pop("logit_bias")
            yield from self._events(body, cancelled)

    def _events(self, body: dict[str, JsonValue], cancelled: Callable[[], bool]) -> Iterator[tuple[list[int], str | None]]:
        for event in self.client.stream("/v1/completions", body, cancelled):
            choices = event.get("choices")
            if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
                raise RemoteError(f"{self.client.display}: a completion event has no choices")
            choice = choices[0]
            ids = choice.get("token_ids") or []
            if not isinstance(ids, list) or not all(isinstance(t, int) and 0 <= t < self.vocab_size for t in ids):
                raise RemoteError(f"{self.client.display}: the server returned token ids outside the vocabulary "
                                  "(is it serving another model? check servedModel)")
            finish = choice.get("finish_reason")
            yield ids, finish if isinstance(finish, str) else None

    def prompt_logprobs(self, prompt_ids: list[int]) -> list[float | None]:
        """The log-probability of each prompt token given the ones before it (None for the first):
        what the localizer's per-line surprise needs (engine/decoding/localize.py). One request that decodes
        one token; the server computes every prompt row's logits for it, as the in-process
        localizer's forward does (vLLM reads no prefix cache for such a request)."""
        body = {"model": self.request_model, "prompt": prompt_ids, "max_tokens": 1, "temperature": 0.0,
                "prompt_logprobs": 0}
        reply = self.client.post_json("/v1/completions", body)
        choices = reply.get("choices") if isinstance(reply, dict) else None
        rows = choices[0].get("prompt_logprobs") if isinstance(choices, list) and choices and isinstance(
            choices[0], dict) else None
        if not isinstance(rows, list) or len(rows) != len(prompt_ids):
            raise RemoteError(f"{self.client.display}: the server returned no prompt log-probabilities "
                              "for the prompt (prompt_logprobs)")
        out: list[float | None] = []
        for token, row in zip(prompt_ids, rows):
            entry = row.get(str(token)) if isinstance(row, dict) else None
            value = entry.get("logprob") if isinstance(entry, dict) else None
            out.append(float(value) if isinstance(value, (int, float)) else None)
        if any(v is None for v in out[1:]):
            raise RemoteError(f"{self.client.display}: the server's prompt log-probabilities miss prompt tokens")
        return out

    def prefix_cache(self) -> dict[str, float]:
        """The server's prefix-cache counters (``/metrics``): queries and hits, in tokens."""
        text = self.client.get_text("/metrics")
        out: dict[str, float] = {}
        for name in ("prefix_cache_queries_total", "prefix_cache_hits_total", "prompt_tokens_total",
                     "generation_tokens_total"):
            values = re.findall(rf"^vllm:{name}{{[^}}]*}} ([0-9.eE+-]+)$", text, flags=re.M)
            out[name] = sum(float(v) for v in values)
        return out


def served_models(client: CompletionsClient) -> list[dict[str, Any]]:
    """The server's model cards (``/v1/models``), each with a string ``id``: a base model's, or a
    LoRA module's, which names its base (``parent``) and the folder it was loaded from (``root``)."""
    body = client.get_json("/v1/models")
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        raise RemoteError(f"{client.display}: /v1/models did not return a model list")
    return [m for m in data if isinstance(m, dict) and isinstance(m.get("id"), str)]


def lora_module_for(cards: list[dict[str, Any]], base: str, folder: Path) -> str | None:
    """The LoRA module of ``base`` that the server loaded from ``folder``: the one whose folder
    is the same, else the only one whose folder has ``folder``'s name (the server may see it under
    another path), else None."""
    modules = [(str(c["id"]), str(c.get("root") or "")) for c in cards if c.get("parent") == base]
    wanted = folder.resolve()
    same = [name for name, root in modules if root and Path(root).expanduser().resolve() == wanted]
    if same:
        return same[0]
    named = [name for name, root in modules if root and Path(root).name == folder.name]
    return named[0] if len(named) == 1 else None


def _max_model_len(client: CompletionsClient, served: str) -> int | None:
    body = client.get_json("/v1/models")
    for item in body.get("data", []) if isinstance(body, dict) else []:
        if isinstance(item, dict) and item.get("id") == served and isinstance(item.get("max_model_len"), int):
            return int(item["max_model_len"])
    return None


def load(request: LoadRequest) -> LoadedModel:
    """The vLLM backend's loader (engine.runtime.load): connect to the server, pick the served
    model, load the local tokenizer and check that it matches the server's. Raises
    :class:`engine.core.errors.ModelLoadError` with one clear message."""
    name, options, progress = request.name, request.options, request.progress
    if not options.server_url:
        raise ModelLoadError("backend 'vllm' needs the server's URL: set copyAsDecode.serverUrl in your user "
                             "settings (or --server-url), e.g. http://127.0.0.1:8000")
    try:
        client = CompletionsClient(options.server_url, os.environ.get(options.api_key_env) or None, options.timeout_s)
        if progress is not None:
            progress(f"connecting to the vLLM server at {client.display}...")
        names = [str(c["id"]) for c in served_models(client) if not c.get("parent")]  # LoRA modules name theirs
        if options.served_model:
            if options.served_model not in names:
                raise ModelLoadError(f"the server at {client.display} does not serve {options.served_model!r}; "
                                     f"it serves {', '.join(names) or 'nothing'}")
            served = options.served_model
        elif len(names) == 1:
            served = names[0]
        else:
            raise ModelLoadError(f"the server at {client.display} serves {len(names)} models "
                                 f"({', '.join(names) or 'none'}); set servedModel to one of them")
        tokenizer = load_tokenizer(name, progress, request.trust_remote_code)
        theirs = client.post_json("/tokenize", {"model": served, "prompt": _PROBE, "add_special_tokens": False})
        if not isinstance(theirs, dict) or theirs.get("tokens") != encode(tokenizer, _PROBE):
            raise ModelLoadError(f"the server's tokenizer for {served!r} differs from the local model {name!r}'s: "
                                 "set the model setting to the local copy of what the server serves")
        runtime = VllmRuntime(client, served, tokenizer, _max_model_len(client, served))
    except BackendError as exc:
        raise ModelLoadError(str(exc)) from None
    return LoadedModel(name=name, model=None, tokenizer=tokenizer, device="remote", dtype="remote", runtime=runtime)
