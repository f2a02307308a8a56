"""An edit session on the server's services, with a fake client port and no language server.

The session (lsp_server/session.py) and the command bodies (lsp_server/workspace_commands.py)
run on :class:`lsp_server.services.EditServices`; here its client port is a fake that plays an
editor (it applies every workspace edit to its copy of the document and echoes it back as
didChange), and everything else is real: the settings source, the model pool and its loader,
the edit queue, the warm-ups, the document state, the writer and the engine. An apply the
aligner merges needs no model; the AI fix (``model``) runs the embedded default model and must
write exactly what the engine's own edit gives for the same request.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from fake_client import FakeClient
from lsp_client_positions import client_offset
from lsprotocol import types
from support import ADD as BUGGY

from engine.api import EditRequest
from lsp_server import workspace_commands as commands
from lsp_server.alternatives import Alternatives, Offer
from lsp_server.client import ClientFeatures
from lsp_server.document_state import DocumentState
from lsp_server.documents import DocumentStore
from lsp_server.models import ModelKey, ModelPool
from lsp_server.outcome import PendingEdit
from lsp_server.services import EditServices
from lsp_server.workspace_config import WorkspaceConfig

APPLY_FILE = ('def add(a, b):\n    """Return the sum of a and b."""\n    return a - b\n\n\n'
              'def sub(a, b):\n    return a - b\n')
APPLY_UPDATE = "def add(a, b):\n    # ... existing code ...\n    return a + b\n# ... rest of the code unchanged ...\n"
APPLY_NOWHERE = "# ... existing code ...\ndef zzz():\n    totally_new()\n# ... existing code ...\n"
MERGED = APPLY_FILE.replace("a - b\n\n", "a + b\n\n", 1)


class FakeEditorClient(FakeClient):
    """The fake client port as an editor: each applied edit lands in its copy of the document
    and comes back to the server's mirror as didChange, as VS Code sends it."""

    def __init__(self, store: DocumentStore, features: ClientFeatures | None = None):
        super().__init__(features)
        self.store = store
        self.texts: dict[str, list] = {}  # uri -> [text, version]

    def open(self, uri: str, text: str) -> None:
        self.texts[uri] = [text, 1]
        self.store.open(types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text))

    def text(self, uri: str) -> str:
        return self.texts[uri][0]

    async def apply_workspace_edit(self, params: types.ApplyWorkspaceEditParams) -> types.ApplyWorkspaceEditResult:
        self.sent.append(params)
        edit = params.edit
        if edit.document_changes:
            (change,) = edit.document_changes
            uri, (text_edit,) = change.text_document.uri, change.edits
        else:
            ((uri, (text_edit,)),) = (edit.changes or {}).items()
        text, version = self.texts[uri]
        start, end = (client_offset(text, text_edit.range.start), client_offset(text, text_edit.range.end))
        self.texts[uri] = [text[:start] + text_edit.new_text + text[end:], version + 1]
        self.store.change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version + 1),
            content_changes=[types.TextDocumentContentChangePartial(range=text_edit.range, text=text_edit.new_text)]))
        return types.ApplyWorkspaceEditResult(applied=True)


def services_for(tmp_path: Path, settings: dict, features: ClientFeatures | None = None,
                 pool: ModelPool | None = None) -> tuple[EditServices, FakeEditorClient]:
    """The server's services as ``initialized`` builds them, around the fake editor's port; the
    user's settings are ``settings`` (as initializationOptions)."""
    documents = DocumentStore("utf-16")
    client = FakeEditorClient(documents, features)
    config = WorkspaceConfig([tmp_path])
    assert config.set_user({"copyAsDecode": {"warmUp": "off", **settings}}) == []
    return EditServices.build(client, config, pool or ModelPool(), documents, "utf-16"), client


async def test_an_apply_the_aligner_merges_runs_on_the_services_without_a_model(tmp_path):
    services, client = services_for(tmp_path, {"mode": "auto"})
    uri = (tmp_path / "merge.py").as_uri()
    client.open(uri, APPLY_FILE)
    answer = await commands.run_apply(services, [{"uri": uri, "update": APPLY_UPDATE}])
    assert answer["status"] == "done", answer
    assert client.text(uri) == MERGED == services.documents.get(uri).text
    assert answer["editsApplied"] == len(client.sent) >= 1 and answer["summary"]["unplaced"] == []
    assert services.models.names() == []  # no model was loaded for it
    editing = [message for state, message in client.statuses if state == "editing"]
    assert editing == ["apply: aligner with aligner"] and client.statuses[-1][0] == "ready"
    assert any(m.startswith("copy-as-decode: AI edit done") for m, _ in client.logged)
    begin, *_, end = client.work_done_progress.values
    assert begin.title == "AI edit" and begin.cancellable and isinstance(end, types.WorkDoneProgressEnd)
    assert not services.state.any_running() and not services.queue.busy


async def test_an_apply_that_cannot_be_placed_writes_nothing_and_says_so(tmp_path):
    services, client = services_for(tmp_path, {"mode": "auto"})
    uri = (tmp_path / "nowhere.py").as_uri()
    client.open(uri, APPLY_FILE)
    answer = await commands.run_apply(services, [{"uri": uri, "update": APPLY_NOWHERE}])
    assert answer["status"] == "unplaced" and "2-3" in answer["message"], answer
    assert client.text(uri) == APPLY_FILE and not client.sent
    assert client.shown == [(answer["message"], types.MessageType.Warning)]


async def test_an_edit_for_review_is_held_until_apply_pending(tmp_path):
    """A client without change annotations (Neovim): ``applyMode = "preview"`` holds the merge in
    the document state, logs its diff, and ``applyPending`` writes it; a second one finds none."""
    services, client = services_for(tmp_path, {"mode": "auto", "applyMode": "preview"},
                                    ClientFeatures(work_done_progress=True))
    uri = (tmp_path / "review.py").as_uri()
    client.open(uri, APPLY_FILE)
    held = await commands.run_apply(services, [{"uri": uri, "update": APPLY_UPDATE}])
    assert held["status"] == "pending" and client.text(uri) == APPLY_FILE, held
    assert any("pending AI edit for review.py" in m for m, _ in client.logged)
    applied = await commands.apply_pending(services, [])  # the only edit held: no uri needed
    assert applied["status"] == "done" and applied["editsApplied"] == 1, applied
    assert client.text(uri) == MERGED
    again = await commands.apply_pending(services, [{"uri": uri}])
    assert again["status"] == "error" and again["message"] == f"{commands.NOTHING_PENDING} for {uri}"


async def test_requests_the_session_refuses_are_told_through_the_port(tmp_path):
    services, client = services_for(tmp_path, {})
    uri = (tmp_path / "closed.py").as_uri()
    answer = await commands.run_edit(services, [{"uri": uri, "instruction": "Fix it", "kind": "fix"}])
    assert answer["status"] == "error" and answer["message"] == commands.NOT_OPEN.format(uri=uri)
    assert client.shown[-1] == (answer["message"], types.MessageType.Error) and client.statuses[-1][0] == "error"
    assert commands.cancel(services, ()) == {"cancelled": 0}
    settings = await commands.settings(services, ({"uri": uri},))
    assert settings["settings"]["warmUp"] == "off" and settings["loadedModels"] == [] and settings["warmUps"] == []


@pytest.mark.model
@pytest.mark.timeout(300)
async def test_an_ai_fix_loads_its_model_and_writes_the_engines_edit(tmp_path):
    """The real engine through the real pool: the load shows its progress and status, and the
    document ends as the engine's own edit of the same request."""
    import torch

    services, client = services_for(tmp_path, {"mode": "ar", "maxNewTokens": 48, "contextLines": 3})
    uri = (tmp_path / "add.py").as_uri()
    client.open(uri, BUGGY)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        answer = await asyncio.wait_for(commands.run_edit(services, [{
            "uri": uri, "range": None, "instruction": "Fix: add must return the sum of a and b", "kind": "fix"}]),
            240)
        engine = await services.models.pool.get(ModelKey.of(services.settings.current(uri)[0]))
        result = engine.edit(EditRequest(text=BUGGY, instruction="Fix: add must return the sum of a and b",
                                         mode="ar", max_new_tokens=48, context_lines=3, language="python"))
    finally:
        torch.set_num_threads(threads)
    assert result.stop_reason == "done" and result.changed
    assert answer["status"] == "done", answer
    assert client.text(uri) == result.output_text
    assert [s for s, _ in client.statuses][:2] == ["loading", "ready"] and client.statuses[-1][0] == "ready"
    titles = [v.title for v in client.work_done_progress.values if isinstance(v, types.WorkDoneProgressBegin)]
    assert titles == ["Loading model", "AI edit"]
    assert len(services.models.names()) == 1


class _Job:
    def __init__(self, uri: str, token: str):
        self.uri, self.token, self.reasons = uri, token, []
        self.cancel = self

    def set(self, reason: str = "cancelled") -> None:
        self.reasons.append(reason)


def test_document_state_keeps_one_running_edit_per_document_and_cancels_by_document_or_token():
    state = DocumentState()
    a, b = _Job("file:///a.py", "t-a"), _Job("file:///b.py", "t-b")
    with state.running(a.uri, a), state.running(b.uri, b):
        assert state.is_running(a.uri) and state.any_running()
        assert state.cancel(a.uri) == 1 and a.reasons == ["cancelled"] and b.reasons == []
        state.cancel_progress("t-b")
        assert b.reasons == ["cancelled"]
        assert state.cancel() == 2
    assert not state.any_running()
    newer = _Job(a.uri, "t-new")
    with state.running(a.uri, a):
        with state.running(a.uri, newer):
            pass
        assert not state.is_running(a.uri)  # the newer one's end leaves no running edit behind


def test_document_state_drops_candidates_on_any_change_but_their_own_echo():
    from engine.candidates import CheckSpec

    state = DocumentState()
    uri = "file:///a.py"
    alternatives = Alternatives(uri, [Offer("x = 1\n", None), Offer("x = 2\n", None)], "x = 1\n", CheckSpec("true"),
                                Path("/tmp/a.py"))
    state.offer(alternatives)
    state.changed(uri, "x = 1\n")  # the echo of the candidate written
    assert state.on_offer(uri) is alternatives and state.offer_for(uri, "x = 1\n") is alternatives
    state.changed(uri, "x = 10\n")  # the user typed
    assert state.on_offer(uri) is None
    state.offer(alternatives)
    assert state.offer_for(uri, None) is None and state.on_offer(uri) is None  # closed
    state.hold(PendingEdit(uri, "a", "b", "why"))
    state.hold(PendingEdit("file:///b.py", "a", "b", "why"))
    assert state.take_pending(None) is None  # two held: the command must name the document
    state.closed(uri)
    assert state.take_pending(None).uri == "file:///b.py" and state.take_pending("file:///b.py") is None


class _FailingPulls(FakeClient):
    async def configuration(self, scope):
        raise TimeoutError("no answer")


async def test_the_settings_source_pulls_through_the_port_and_shows_each_file_problem_once(tmp_path):
    from lsp_server.settings_source import SettingsSource

    uri = (tmp_path / "a.py").as_uri()
    client = FakeClient(ClientFeatures(configuration=True), configured={"maxNewTokens": 77})
    source = SettingsSource(WorkspaceConfig([tmp_path]), client)
    settings, warnings = await source.pulled(uri)
    assert client.pulls == [uri] and settings.edit.max_new_tokens == 77 and warnings == []
    failing = _FailingPulls(ClientFeatures(configuration=True))
    assert await SettingsSource(WorkspaceConfig([tmp_path]), failing).pull(None) == []
    assert failing.logged == [("workspace/configuration failed: no answer", types.MessageType.Warning)]
    assert await SettingsSource(WorkspaceConfig(), FakeClient()).pull(None) == []  # a client that cannot be asked

    config_file = tmp_path / ".copy-as-decode.toml"
    config_file.write_text('max_new_tokens = 12\ncolour = "red"\n')
    source.opened(uri)
    source.opened(uri)  # the same problem is not shown twice
    assert [m for m, _ in client.shown if "colour" in m] and len(client.shown) == 1
    assert source.shared(uri)[0].edit.max_new_tokens == 12
    config_file.write_text("max_new_tokens = [")  # not TOML: the last good one stays in force
    assert source.file_changed(config_file) is False
    assert client.statuses[-1] == ("error", f"invalid config file {config_file.name}")
    assert source.shared(uri)[0].edit.max_new_tokens == 12
    config_file.write_text('max_new_tokens = 13\ncolour = "red"\n')
    assert source.file_changed(config_file) is True  # fixed: its remaining problem is shown once more
    assert source.shared(uri)[0].edit.max_new_tokens == 13 and sum("colour" in m for m, _ in client.shown) == 2
