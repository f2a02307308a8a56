"""A real vLLM server for the tests, on loopback, in its own venv (scripts/vllm-venv.sh).

``start()`` launches it at most once per test session, as early as possible (conftest calls it
at session start when the venv exists), so its warm-up (about 3.5 minutes on 2 busy cores)
overlaps the other tests; ``wait()`` blocks until it answers. It serves the embedded default
model's de-quantized folder in fp32 (the same weights the transformers backend runs) with the
shipped span selector as a LoRA module named ``selector``, so greedy results can be compared token
for token with the in-process engine. When the venv is missing
the vLLM tests skip, unless COPY_AS_DECODE_REQUIRE_VLLM=1 (set by `make test`) makes that a failure.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENV_PYTHON = Path(os.environ.get("COPY_AS_DECODE_VLLM_VENV", ROOT / ".venv-vllm")) / "bin" / "python"
READY_TIMEOUT_S = 900

_server: dict = {}


def available() -> bool:
    return VENV_PYTHON.is_file()


def required() -> bool:
    return os.environ.get("COPY_AS_DECODE_REQUIRE_VLLM") == "1"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(log_dir: Path) -> None:
    if _server or not available():
        return
    from engine.runtime.sources import _default_model_folder
    from engine.runtime.selector.adapter import SHIPPED_ADAPTER_DIR

    folder = _default_model_folder(None)
    port = _free_port()
    log_dir.mkdir(parents=True, exist_ok=True)
    log = open(log_dir / "vllm-server.log", "w")
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "OMP_NUM_THREADS": "1", "VLLM_CPU_OMP_THREADS_BIND": "0"}
    proc = subprocess.Popen(
        [str(VENV_PYTHON), "-m", "vllm.entrypoints.openai.api_server", "--model", str(folder), "--dtype", "float32",
         "--block-size", "32", "--max-model-len", "2048", "--host", "127.0.0.1", "--port", str(port),
         # the shipped span selector, served as a LoRA module: program mode asks for it by name
         "--enable-lora", "--max-lora-rank", "16", "--lora-modules", f"selector={SHIPPED_ADAPTER_DIR}"],
        stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    _server.update(proc=proc, url=f"http://127.0.0.1:{port}", log=log_dir / "vllm-server.log", started=time.time())


def wait() -> str:
    """The server's URL once it answers /v1/models (raises with the log's tail if it died).

    It always asks at least once: the server starts with the session, so when the tests that need
    it run late in a slow suite the deadline may already have passed while the server is up."""
    proc, url = _server["proc"], _server["url"]
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"the vLLM server exited with {proc.returncode}:\n{_log_tail()}")
        try:
            with urllib.request.urlopen(url + "/v1/models", timeout=5) as response:
                if response.status == 200:
                    return url
        except OSError:
            pass
        if time.time() - _server["started"] >= READY_TIMEOUT_S:
            raise RuntimeError(f"the vLLM server did not answer within {READY_TIMEOUT_S} s "
                               f"(log: {_server['log']}):\n{_log_tail()}")
        time.sleep(2)


def _log_tail() -> str:
    return _server["log"].read_text(errors="replace")[-3000:]


def stop() -> None:
    proc = _server.get("proc")
    if proc is not None and proc.poll() is None:
        os.killpg(proc.pid, 15)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
