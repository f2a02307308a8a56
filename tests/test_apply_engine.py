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
    loaded = SimpleNamespace(name="stub", runtime=SimpleNamespace(concurrent=False, gives_logits=True))
    return Engine(loaded)  # type: ignore[arg-type]


def aligner_request(text: str, update: str, **given) -> EditRequest:
    return EditRequest(text, "", update=update, mode="aligner", **given)


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
    assert result.mode == "aligner" and result.output_text == FILE.replace("y\n", "y * 2\n")


def test_the_rules_merge_has_its_own_mode_and_forced_keeps_its_meaning() -> None:
    """``aligner`` names the rules merge (in the result, the CLI's and the HTTP answers);
    ``forced`` stays "decode a given program", which an apply has none of."""
    import pytest

    from engine.api import EditError

    with pytest.raises(EditError, match="mode 'forced' decodes a given edit program.*'aligner'"):
        stub_engine().edit(EditRequest(FILE, "", update=UPDATE, mode="forced"))
    with pytest.raises(EditError, match="mode 'aligner' merges an update"):
        stub_engine().edit(EditRequest(FILE, "Fix it.", mode="aligner"))


def test_the_plan_says_who_writes_the_result() -> None:
    """One decision per request: no model for the aligner's merge or an empty region, the
    selector's copy for a program edit, the base model for a text mode's apply."""
    selector = SimpleNamespace(name="stub+selector", runtime=SimpleNamespace(concurrent=False, gives_logits=True))
    engine = Engine(SimpleNamespace(name="stub", runtime=SimpleNamespace(concurrent=False, gives_logits=True)),  # type: ignore[arg-type]
                    selector)  # type: ignore[arg-type]
    aligner = engine.plan(EditRequest(FILE, "", update=UPDATE))
    assert (aligner.request.mode, aligner.model, aligner.name) == ("aligner", None, "stub")
    empty = engine.plan(EditRequest("", "Fix it."))
    assert (empty.request.mode, empty.model) == ("program", None)
    edit = engine.plan(EditRequest(FILE, "Fix it."))
    assert (edit.request.mode, edit.model) == ("program", selector)
    rewrite = engine.plan(EditRequest(FILE, "", update=UPDATE, mode="ar"))
    assert (rewrite.request.mode, rewrite.model) == ("ar", engine.loaded)


def test_model_free_answers_the_aligners_merge_and_refuses_what_needs_a_model() -> None:
    import pytest

    from engine.api import EditError
    from engine.dispatch import ModelFree

    result = ModelFree("default").edit(EditRequest(FILE, "", update=UPDATE))
    assert (result.mode, result.model, result.output_text) == ("aligner", "default", FILE.replace("y\n", "y * 2\n"))
    with pytest.raises(EditError, match="a program apply needs a model"):
        ModelFree().edit(EditRequest(FILE, "", update=UPDATE, mode="program"))


def test_file_over_the_apply_limit_is_refused() -> None:
    import pytest

    from engine.api import EditError

    with pytest.raises(EditError, match="applyMaxLines"):
        stub_engine().edit(aligner_request(FILE, UPDATE, apply_max_lines=3))
