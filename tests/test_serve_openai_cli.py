"""``copy-as-decode serve-openai`` start-up errors that need no model: a busy port is one clear
error (exit 2) before the model loads, and the server never says it is serving."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_a_busy_port_is_one_clear_error_before_the_model_loads():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        run = subprocess.run([sys.executable, "-m", "engine.cli", "serve-openai", "--port", str(port),
                              "--workspace", str(ROOT)], capture_output=True, text=True, timeout=300, cwd=ROOT,
                             env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert run.returncode == 2, run.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in run.stderr and "--port" in run.stderr
    assert "serving" not in run.stderr and "loading model" not in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1, run.stderr
