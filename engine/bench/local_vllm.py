"""A local vLLM server on loopback, started from the vLLM venv (scripts/vllm-venv.sh): the one
launcher of the tests' server (tests/vllm_server.py) and the measurement scripts'.

It serves the embedded default model's de-quantized folder in fp32 (the same weights the
transformers backend runs) with the shipped span selector as a LoRA module named ``selector``
(program mode asks for it by name), so greedy results compare token for token with the in-process
engine. Each server runs in its own process group, its output in one log file.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

# CPU serving on a small shared machine: 1 GiB of KV cache, one thread, not pinned to a core.
SERVER_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "OMP_NUM_THREADS": "1", "VLLM_CPU_OMP_THREADS_BIND": "0"}
TAIL_CHARS = 4000


@dataclass
class LocalServer:
    """One launched server: its process, URL, log file and start time (``ready_s`` once it answers)."""

    name: str
    proc: subprocess.Popen
    url: str
    log: Path
    command: list[str]
    started: float = field(default_factory=time.time)
    ready_s: float | None = None

    @property
    def flags(self) -> list[str]:
        """The server's own flags (the command after ``python -m MODULE``)."""
        return self.command[3:]

    def log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-TAIL_CHARS:]


class ServerFailed(RuntimeError):
    """A server exited (``returncode``), or did not answer within ``timeout_s`` (``returncode`` None);
    ``tail`` is the end of its log."""

    def __init__(self, name: str, returncode: int | None, tail: str, timeout_s: float | None = None):
        what = f"exited with {returncode}" if timeout_s is None else f"did not answer within {timeout_s} s"
        super().__init__(f"the {name} vLLM server {what}:\n{tail}")
        self.name, self.returncode, self.tail = name, returncode, tail


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def server_command(venv_python: Path, port: int, extra: Sequence[str] = ()) -> list[str]:
    """The command line: the default model's folder in fp32, the selector as a LoRA module, ``extra`` last."""
    from engine.runtime.selector.adapter import SHIPPED_ADAPTER_DIR
    from engine.runtime.sources import _default_model_folder

    return [str(venv_python), "-m", "vllm.entrypoints.openai.api_server", "--model",
            str(_default_model_folder(None)), "--dtype", "float32", "--block-size", "32",
            "--max-model-len", "2048", "--host", "127.0.0.1", "--port", str(port),
            "--enable-lora", "--max-lora-rank", "16", "--lora-modules", f"selector={SHIPPED_ADAPTER_DIR}", *extra]


def start(name: str, venv_python: Path, log_dir: Path, extra: Sequence[str] = ()) -> LocalServer:
    """Launch one server on a free port, logging to ``log_dir/vllm-NAME.log``; returns at once."""
    port = free_port()
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"vllm-{name}.log"
    command = server_command(venv_python, port, extra)
    with open(log_path, "w") as log:
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **SERVER_ENV},
                                start_new_session=True)
    return LocalServer(name, proc, f"http://127.0.0.1:{port}", log_path, command)


def wait_ready(servers: list[LocalServer], timeout_s: float) -> None:
    """Block until every server answers /v1/models; raise :class:`ServerFailed` with the log's tail
    if one exits, or has not answered ``timeout_s`` after its start.

    Each server is asked at least once: a caller may wait long after the start (a server started
    with a slow test session), when the deadline has passed but the server is up."""
    pending = list(servers)
    while pending:
        for server in list(pending):
            if server.proc.poll() is not None:
                raise ServerFailed(server.name, server.proc.returncode, server.log_tail())
            try:
                with urllib.request.urlopen(server.url + "/v1/models", timeout=5) as response:
                    if response.status == 200:
                        server.ready_s = round(time.time() - server.started, 1)
                        print(f"{server.name} vLLM server ready after {server.ready_s} s", flush=True)
                        pending.remove(server)
                        continue
            except OSError:
                pass
            if time.time() - server.started >= timeout_s:
                raise ServerFailed(server.name, None, f"(log: {server.log})\n{server.log_tail()}", timeout_s)
        if pending:
            time.sleep(2)


def stop(servers: list[LocalServer]) -> None:
    """Terminate every server's process group that still runs, then reap each (killed after 30 s)."""
    for server in servers:
        if server.proc.poll() is None:
            os.killpg(server.proc.pid, 15)
    for server in servers:
        try:
            server.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.proc.pid, 9)
            server.proc.wait(timeout=10)
