"""Shared fixtures: the embedded default model, loaded once per test session; a real vLLM server
(tests/vllm_server.py) started at session start so its warm-up overlaps the other tests."""

from __future__ import annotations

import pytest
import vllm_server


def pytest_sessionstart(session: pytest.Session) -> None:
    selected = " ".join(session.config.args)
    if "vllm" in selected or selected in ("", "tests", "tests/"):
        vllm_server.start(session.config.rootpath / ".pytest_cache" / "vllm")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    vllm_server.stop()


@pytest.fixture(scope="session")
def default_engine():
    """The embedded model on the transformers backend (the llama.cpp backend has its own module,
    tests/test_llamacpp_backend.py; the LSP, Neovim and VS Code tests run whatever ``auto`` picks)."""
    from engine.api import Engine

    return Engine.load("default", backend="transformers")
