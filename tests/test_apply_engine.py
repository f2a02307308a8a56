"""An apply through the Python API: the same request type and events as an edit; CRLF files merge
in CRLF; an empty file takes the update."""

from __future__ import annotations

from types import SimpleNamespace

from engine.api import EditRequest, Engine
from engine.decoding.events import EditFinished, EditStarted, OpResolved

FILE = "def f(x):\n    return x + 1\n\n\ndef g(y):\n    return y\n"
UPDATE = "# ... existing code ...\ndef g(y):\n    return y * 2\n"


def stub_engine() -> Engine:
    """An engine whose model is never run: the aligner alone answers these applies."""
    loaded = SimpleNamespace(name="stub", runtime=SimpleNamespace(concurrent=False))
    return Engine(loaded)  # type: ignore[arg-type]


def aligner_request(text: str, update: str, **given) -> EditRequest:
    return EditRequest(text, "", update=update, mode="forced", **given)


def test_events_and_result() -> None:
    events = list(stub_engine().stream(aligner_request(FILE, UPDATE)))
    assert isinstance(events[0], EditStarted) and isinstance(events[-1], EditFinished)
    assert all(isinstance(e, OpResolved) for e in events[1:-1])
    result = events[-1].result
    assert result.output_text == FILE.replace("y\n", "y * 2\n") and result.summary()["unplaced"] == []


def test_crlf_file_merges_in_crlf() -> None:
    crlf = FILE.replace("\n", "\r\n")
    for update in (UPDATE, UPDATE.replace("\n", "\r\n")):
        result = stub_engine().edit(aligner_request(crlf, update))
        assert result.output_text == FILE.replace("y\n", "y * 2\n").replace("\n", "\r\n")


def test_empty_file_takes_the_update() -> None:
    assert stub_engine().edit(aligner_request("", "x = 1\n")).output_text == "x = 1\n"


def test_auto_runs_the_aligner() -> None:
    result = stub_engine().edit(EditRequest(FILE, "", update=UPDATE, mode="auto"))
    assert result.mode == "forced" and result.output_text == FILE.replace("y\n", "y * 2\n")


def test_file_over_the_apply_limit_is_refused() -> None:
    import pytest

    from engine.api import EditError

    with pytest.raises(EditError, match="applyMaxLines"):
        stub_engine().edit(aligner_request(FILE, UPDATE, apply_max_lines=3))
