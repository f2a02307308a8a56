"""A small client for an OpenAI-compatible completions server (vLLM), on the standard library.

Everything the server sends is untrusted: JSON that does not parse, fields of the wrong type, a
truncated stream and HTTP errors all become one :class:`RemoteError` whose message says what
happened, never the API key. Requests have a timeout; a stream is closed as soon as the caller
stops reading it (the server aborts the request when the connection drops).
"""

from __future__ import annotations

import http.client
import json
import socket
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator
from urllib.parse import urlsplit

from engine.core.choices import never_cancelled
from engine.runtime.backends import BackendError

MAX_BODY_BYTES = 64 * 1024 * 1024


class RemoteError(BackendError):
    """The server could not be reached or answered something unusable; the message says which."""


@dataclass
class HttpTiming:
    """Time spent waiting on the server, by request kind."""

    seconds: float = 0.0
    requests: int = 0


class CompletionsClient:
    """``base_url`` like ``http://127.0.0.1:8000`` (the ``/v1`` suffix is optional)."""

    def __init__(self, base_url: str, api_key: str | None = None, timeout_s: float = 60.0):
        parts = urlsplit(base_url.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise RemoteError(f"server URL {base_url!r} is not an http(s) URL like http://127.0.0.1:8000")
        self.scheme, self.host = parts.scheme, parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.prefix = parts.path.rstrip("/").removesuffix("/v1")
        self.display = f"{parts.scheme}://{parts.hostname}:{self.port}{self.prefix}"
        self._key = api_key
        self.timeout_s = timeout_s
        self.timing = HttpTiming()
        # The server refused a ``logit_bias`` once (vLLM does where it runs speculative decoding):
        # later requests to it leave it out.
        self.refuses_logit_bias = False

    def __repr__(self) -> str:  # never shows the key
        return f"CompletionsClient({self.display!r})"

    # -- requests ---------------------------------------------------------------------------------

    def get_json(self, path: str) -> Any:
        return self._json(self._request("GET", path, None))

    def post_json(self, path: str, body: dict) -> Any:
        return self._json(self._request("POST", path, body))

    def get_text(self, path: str) -> str:
        return self._request("GET", path, None).decode("utf-8", errors="replace")

    def stream(self, path: str, body: dict, cancelled: Callable[[], bool] = never_cancelled) -> Iterator[dict]:
        """Server-sent events of a ``"stream": true`` request, parsed; stops at ``[DONE]``. A stream
        that ends without ``[DONE]`` is truncated: a RemoteError."""
        conn, response = self._open("POST", path, {**body, "stream": True})
        try:
            self._check_status(response)
            while True:
                if cancelled():
                    return
                line = response.readline(MAX_BODY_BYTES)
                if not line:
                    raise RemoteError(f"{self.display}: the response stream ended before [DONE] (truncated)")
                line = line.strip()
                if not line.startswith(b"data:"):
                    continue
                data = line[5:].strip()
                if data == b"[DONE]":
                    return
                event = self._json(data)
                if not isinstance(event, dict):
                    raise RemoteError(f"{self.display}: a stream event is not a JSON object")
                if "error" in event:
                    raise RemoteError(f"{self.display}: the server reported an error: {_error_text(event)}")
                yield event
        except (OSError, http.client.HTTPException) as exc:
            raise RemoteError(f"{self.display}: connection failed while streaming: {exc}") from None
        finally:
            conn.close()

    # -- plumbing ---------------------------------------------------------------------------------

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._key:
            headers["Authorization"] = f"Bearer {self._key}"
        return headers

    def _open(self, method: str, path: str, body: dict | None) -> tuple[http.client.HTTPConnection, Any]:
        cls = http.client.HTTPSConnection if self.scheme == "https" else http.client.HTTPConnection
        conn = cls(self.host, self.port, timeout=self.timeout_s)
        payload = json.dumps(body).encode("utf-8") if body is not None else None
        try:
            conn.request(method, self.prefix + path, body=payload, headers=self._headers())
            return conn, conn.getresponse()
        except socket.timeout:
            conn.close()
            raise RemoteError(f"{self.display}: no answer within {self.timeout_s:g} s ({method} {path})") from None
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            raise RemoteError(f"{self.display}: cannot reach the server ({exc}); is it running?") from None

    def _request(self, method: str, path: str, body: dict | None) -> bytes:
        start = time.perf_counter()
        conn, response = self._open(method, path, body)
        try:
            self._check_status(response)
            data = response.read(MAX_BODY_BYTES + 1)
            if len(data) > MAX_BODY_BYTES:
                raise RemoteError(f"{self.display}: response to {path} is larger than {MAX_BODY_BYTES} bytes")
            length = response.getheader("Content-Length")
            if length is not None and length.isdigit() and len(data) < int(length):
                raise RemoteError(f"{self.display}: response to {path} was truncated")
            return data
        except socket.timeout:
            raise RemoteError(f"{self.display}: no answer within {self.timeout_s:g} s ({method} {path})") from None
        except http.client.IncompleteRead:
            raise RemoteError(f"{self.display}: response to {path} was truncated") from None
        except (OSError, http.client.HTTPException) as exc:
            raise RemoteError(f"{self.display}: connection failed ({exc})") from None
        finally:
            conn.close()
            self.timing.seconds += time.perf_counter() - start
            self.timing.requests += 1

    def _check_status(self, response: Any) -> None:
        if 200 <= response.status < 300:
            return
        text = response.read(65536).decode("utf-8", errors="replace")
        try:
            detail = _error_text(json.loads(text))
        except ValueError:
            detail = text.strip()[:300]
        who = "rejected the request" if response.status < 500 else "failed"
        raise RemoteError(f"{self.display}: the server {who} (HTTP {response.status}): {detail}")

    def _json(self, data: bytes) -> Any:
        try:
            return json.loads(data)
        except ValueError:
            raise RemoteError(f"{self.display}: the server sent malformed JSON ({data[:80]!r})") from None


def _error_text(body: Any) -> str:
    """The message of an OpenAI-style error body, whatever its shape."""
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict):
            return str(err.get("message") or err)[:300]
        if isinstance(err, str):
            return err[:300]
        if "detail" in body:
            return str(body["detail"])[:300]
    return str(body)[:300]
