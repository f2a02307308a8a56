"""FAKE OpenAI-compatible server, for the vLLM backend's FAULT tests only.

A real vLLM server cannot be made to send malformed JSON, truncate a stream, answer 500, hang, or
return tokens outside the vocabulary on demand, so these failure paths are driven by this fake.
Everything else about the vLLM backend is tested against a real vLLM server
(tests/test_vllm_backend.py). It answers ``/v1/models`` and ``/tokenize`` (with the real local
tokenizer, so the backend's tokenizer check passes) and serves ``/v1/completions`` according to
``fault``.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

FAULTS = ("ok", "http500", "http400", "malformed", "truncated", "slow", "bad_tokens", "off_grammar", "special_token",
          "speculative")


class FakeCompletionsServer:
    def __init__(self, tokenizer: Any, model: str = "fake-model", loras: dict[str, str] | None = None):
        """``loras``: LoRA modules it lists besides the model (name -> the folder it loaded)."""
        self.tokenizer, self.model = tokenizer, model
        self.loras = loras or {}
        self.fault = "ok"
        self.requests: list[dict] = []
        self.headers: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, code: int, body: bytes, content_type: str = "application/json") -> None:
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:  # noqa: N802
                if self.path == "/v1/models":
                    loras = [{"id": name, "parent": outer.model, "root": root} for name, root in outer.loras.items()]
                    self._send(200, json.dumps({"data": [{"id": outer.model, "max_model_len": 2048}, *loras]}).encode())
                else:
                    self._send(404, b'{"error": {"message": "not found"}}')

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                outer.headers.append(dict(self.headers))
                if self.path == "/tokenize":
                    ids = outer.tokenizer.encode(body["prompt"], add_special_tokens=False)
                    self._send(200, json.dumps({"tokens": ids}).encode())
                    return
                outer.requests.append(body)
                outer.complete(self, body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> "FakeCompletionsServer":
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def complete(self, handler: Any, body: dict) -> None:
        fault = self.fault
        if fault == "http500":
            handler._send(500, b'{"error": {"message": "CUDA out of memory (fake)"}}')
            return
        if fault == "http400":
            handler._send(400, json.dumps({"error": {"message": f"The model `{body.get('model')}` does not exist."}}).encode())
            return
        if fault == "speculative" and "logit_bias" in body:  # vLLM 0.32 started with --speculative-config
            message = "The min_p and logit_bias sampling parameters are not yet supported with speculative decoding."
            handler._send(400, json.dumps({"error": {"message": message}}).encode())
            return
        if fault == "malformed":
            handler._send(200, b"data: {not json\n\n", "text/event-stream")
            return
        if fault == "slow":
            time.sleep(5)
        # A word in text mode; in program mode (the client fed "<program><") the end of the program,
        # which the client refuses for a non-empty region (a program may not end before its last
        # line): the ``early_end`` fault. No program-mode test expects this fake to succeed.
        valid = self.tokenizer.encode("/program>" if "structured_outputs" in body else "x", add_special_tokens=False)
        # ``special_token``: a chat marker where text may go (in a gen body, or the text modes' output)
        marker = self.tokenizer.encode("gen>" if "structured_outputs" in body else "x", add_special_tokens=False)
        marker += [self.tokenizer.convert_tokens_to_ids("<|im_start|>")]
        ids = {"bad_tokens": [10 ** 7], "off_grammar": self.tokenizer.encode("hello", add_special_tokens=False),
               "special_token": marker}.get(fault, valid)
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.end_headers()
        event = {"choices": [{"index": 0, "text": "", "token_ids": ids, "finish_reason": None}]}
        handler.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
        if fault == "truncated":
            return  # the connection closes without [DONE]
        final = {"choices": [{"index": 0, "text": "", "token_ids": [], "finish_reason": "length"}]}
        handler.wfile.write(f"data: {json.dumps(final)}\n\ndata: [DONE]\n\n".encode())
