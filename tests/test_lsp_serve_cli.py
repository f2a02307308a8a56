"""The ``serve`` entry points: ``copy-as-decode serve`` / ``python -m lsp_server`` (no model)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]


def test_serve_is_a_cli_subcommand():
    args = build_parser().parse_args(["serve", "--tcp", "--port", "9999"])
    assert args.tcp and args.port == 9999 and callable(args.func)
    assert not build_parser().parse_args(["serve"]).tcp  # stdio is the default


def _message(payload: dict) -> bytes:
    body = json.dumps(payload).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def _read_message(stream) -> dict:
    headers = b""
    while not headers.endswith(b"\r\n\r\n"):
        chunk = stream.read(1)
        if not chunk:
            raise EOFError("server closed the stream")
        headers += chunk
    length = int(next(h for h in headers.split(b"\r\n") if h.lower().startswith(b"content-length")).split(b":")[1])
    return json.loads(stream.read(length))


INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"processId": None, "rootUri": None, "capabilities": {}}}


def test_stdio_initialize_and_stdout_stays_clean():
    proc = subprocess.Popen([sys.executable, "-m", "lsp_server"], cwd=ROOT, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        proc.stdin.write(_message(INIT))
        proc.stdin.flush()
        reply = _read_message(proc.stdout)
        caps = reply["result"]["capabilities"]
        assert caps["positionEncoding"] == "utf-16"
        assert "copyAsDecode.server.edit" in caps["executeCommandProvider"]["commands"]
        assert caps["codeActionProvider"]["codeActionKinds"] == ["quickfix", "refactor.rewrite"]
        proc.stdin.write(_message({"jsonrpc": "2.0", "id": 2, "method": "shutdown"}))
        proc.stdin.write(_message({"jsonrpc": "2.0", "method": "exit"}))
        proc.stdin.flush()
        assert _read_message(proc.stdout)["id"] == 2
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_tcp_binds_loopback_only():
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "engine.cli", "serve", "--tcp", "--port", str(port)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                conn = socket.create_connection(("127.0.0.1", port), timeout=2)
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    pytest.fail(f"server did not listen: {proc.stderr.read().decode() if proc.poll() is not None else ''}")
                time.sleep(0.2)
        with conn:
            conn.sendall(_message(INIT))
            reply = _read_message(conn.makefile("rb"))
            assert "capabilities" in reply["result"]
            if not Path("/proc/net/tcp").exists():
                return  # not Linux: the connect above is all we can check
            listening = [line.split() for line in Path("/proc/net/tcp").read_text().splitlines()[1:]]
            ours = [f[1] for f in listening if f[3] == "0A" and f[1].endswith(f":{port:04X}")]
            assert ours == [f"0100007F:{port:04X}"], ours  # 127.0.0.1 only, not 0.0.0.0
    finally:
        proc.kill()
        proc.wait()
