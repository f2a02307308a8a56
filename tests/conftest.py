"""Shared fixtures: the embedded default model, loaded once per test session."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def default_engine():
    from engine.api import Engine

    return Engine.load("default")
