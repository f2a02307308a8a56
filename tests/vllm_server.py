"""A real vLLM server for the tests, on loopback, in its own venv (scripts/vllm-venv.sh).

``start()`` launches it at most once per test session, as early as possible (conftest calls it
at session start when the venv exists), so its warm-up (about 3.5 minutes on 2 busy cores)
overlaps the other tests; ``wait()`` blocks until it answers. The server is
engine.bench.local_vllm's: the embedded default model's folder in fp32 with the shipped span
selector as a LoRA module, so greedy results can be compared token for token with the in-process
engine. When the venv is missing the vLLM tests skip, unless COPY_AS_DECODE_REQUIRE_VLLM=1 (set by
`make test`) makes that a failure.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENV_PYTHON = Path(os.environ.get("COPY_AS_DECODE_VLLM_VENV", ROOT / ".venv-vllm")) / "bin" / "python"
READY_TIMEOUT_S = 900

_servers: list = []  # the session's one engine.bench.local_vllm.LocalServer, once started


def available() -> bool:
    return VENV_PYTHON.is_file()


def required() -> bool:
    return os.environ.get("COPY_AS_DECODE_REQUIRE_VLLM") == "1"


def start(log_dir: Path) -> None:
    if _servers or not available():
        return
    from engine.bench import local_vllm

    _servers.append(local_vllm.start("test", VENV_PYTHON, log_dir))


def wait() -> str:
    """The server's URL once it answers /v1/models (raises with the log's tail if it died or did
    not answer within READY_TIMEOUT_S of its start)."""
    from engine.bench import local_vllm

    local_vllm.wait_ready(_servers, READY_TIMEOUT_S)
    return _servers[0].url


def stop() -> None:
    if _servers:
        from engine.bench import local_vllm

        local_vllm.stop(_servers)
