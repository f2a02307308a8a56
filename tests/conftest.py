"""Shared fixtures: the embedded default model, loaded once per test session; a real vLLM server
(tests/vllm_server.py) started at session start so its warm-up overlaps the other tests."""

from __future__ import annotations

import pytest
import vllm_server


def pytest_sessionstart(session: pytest.Session) -> None:
    selected = " ".join(session.config.args)
    if "not vllm" in (session.config.option.markexpr or ""):
        return
    if "vllm" in selected or selected in ("", "tests", "tests/"):
        vllm_server.start(session.config.rootpath / ".pytest_cache" / "vllm")


# Fixtures that load the embedded model: a test that uses one (directly or through another
# fixture) is a ``model`` test whether or not its file says so.
MODEL_FIXTURES = {"default_engine", "tiny_random_engine"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if MODEL_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.model)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    vllm_server.stop()


@pytest.fixture(scope="session")
def tokenizer():
    """The embedded model's tokenizer alone (no weights): for tests of what goes over the wire."""
    from engine.runtime.sources import load_tokenizer

    return load_tokenizer("default")


@pytest.fixture(scope="session")
def default_engine():
    """The embedded model on the transformers backend (the llama.cpp backend has its own module,
    tests/test_llamacpp_backend.py; the LSP, Neovim and VS Code tests run whatever ``auto`` picks)."""
    from engine.api import Engine

    return Engine.load("default", backend="transformers")


@pytest.fixture(scope="session")
def vllm_server_url(pytestconfig: pytest.Config) -> str:
    """The real vLLM server of tests/vllm_server.py, once it answers (a test is skipped where its
    venv is missing, and fails there when the run requires vLLM)."""
    if not vllm_server.available():
        if vllm_server.required():
            pytest.fail("the vLLM venv is missing: run scripts/vllm-venv.sh (make test does)")
        pytest.skip("no vLLM venv (.venv-vllm); scripts/vllm-venv.sh installs it (about 5 minutes)")
    vllm_server.start(pytestconfig.rootpath / ".pytest_cache" / "vllm")
    return vllm_server.wait()
