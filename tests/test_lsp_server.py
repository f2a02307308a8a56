"""End-to-end tests of the language server with pytest-lsp: a real server process, the embedded
default model, and a test client that behaves like an editor (it applies workspace edits to its
own copy of each document and reports them back with didChange, as VS Code and Neovim do).

Every test runs under recorded client capabilities. The core tests run under both profiles
(``visual-studio-code``: pulls configuration, versioned ``documentChanges``, didChange before the
applyEdit answer; ``neovim@v0.7``: no configuration pull (settings pushed), plain ``changes``,
didChange debounced after the answer); the reliability cases run once, under VS Code's.

One server per profile serves the whole module (the model loads once per server); each test uses
its own document, and the workspace's config files pick its settings (root: ``ar``; folders
``program/``, ``final/``, ``spec/``, ``specapply/``, ``badmodel/``, ``reload/`` override).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Union

import pytest
import pytest_lsp
from lsp_client_positions import client_offset, client_position
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities
from support import ADD as BUGGY
from support import wait_until

from engine.api import EditRequest
from engine.apply.job import merge_draft
from lsp_server.edits import match_eol, uses_crlf

pytestmark = [pytest.mark.model, pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[1]
PROFILES = ["visual-studio-code", "neovim@v0.7"]
CMD = "copyAsDecode.server.edit"
ROOT_SETTINGS = 'mode = "ar"\nmax_new_tokens = 48\ncontext_lines = 3\n'
FOLDER_SETTINGS = {
    "program": 'mode = "program"\nmax_new_tokens = 48\n',
    "final": 'apply_mode = "final"\n',
    "spec": 'mode = "speculative"\n',
    "reload": 'mode = "ar"\n',
    "long": 'max_new_tokens = 300\n',
    "preview": 'apply_mode = "preview"\n',
    "cold": 'mode = "program"\nmax_new_tokens = 48\nwarm_up = "off"\n',
    "apply": 'mode = "auto"\nmax_new_tokens = 1024\n',
    # transformers: on llama.cpp an exact verify carries no draft (Session.draft_room: its batched
    # forward's choices may differ from a step's), so the rewrite there would run undrafted
    "specapply": 'mode = "speculative"\nmax_new_tokens = 400\nbackend = "transformers"\n',
}
# The model rewrites the first line at once ("def f0(x) -> int:") and goes on for ~50 lines.
LONG = "".join(f"def f{i}(x)\n    return x * {i}\n\n" for i in range(8))
LONG_INSTRUCTION = "Fix the syntax errors"
LSP_SETTINGS = {"contextLines": 3}

# The model's fix replaces "r = '😀'; return a -" : the edit ends after the emoji on its line, so
# its end position differs between UTF-8, UTF-16 and UTF-32.
EMOJI_BUG = "def add(a, b):\n    r = '\U0001F600'; return a - b\n"
EMOJI_BUG_INSTRUCTION = "Fix: add must return the sum of a and b"
BUG_MESSAGE = "add must return the sum of a and b"


# --- the editor the test client plays ---------------------------------------------------------

class Editor:
    """Documents as the editor holds them; applies the server's workspace edits."""

    def __init__(self, client: LanguageClient, profile: str, encoding: str = "utf-16"):
        self.client = client
        self.encoding = encoding
        self.vscode = profile.startswith("visual")
        self.docs: dict[str, list] = {}
        self.history: dict[str, list[str]] = defaultdict(list)   # text after each applied edit
        self.edits: dict[str, list[types.TextEdit]] = defaultdict(list)
        self.sent: dict[str, list[types.WorkspaceEdit]] = defaultdict(list)  # every applyEdit, as sent
        self.hooks: dict[str, Callable[["Editor", str, int], None]] = {}
        self.status: list[dict] = []
        self._pending: dict[str, list] = defaultdict(list)

    def text(self, uri: str) -> str:
        return self.docs[uri][0]

    def open(self, uri: str, text: str) -> None:
        self.docs[uri] = [text, 1]
        self.client.text_document_did_open(types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)))

    def close(self, uri: str) -> None:
        self.client.text_document_did_close(types.DidCloseTextDocumentParams(
            text_document=types.TextDocumentIdentifier(uri=uri)))

    def _change(self, uri: str, start: int, end: int, new_text: str) -> None:
        text, version = self.docs[uri]
        rng = types.Range(start=client_position(text, start, self.encoding),
                          end=client_position(text, end, self.encoding))
        self.docs[uri] = [text[:start] + new_text + text[end:], version + 1]
        change = types.TextDocumentContentChangePartial(range=rng, text=new_text)
        if self.vscode:
            self._send(uri, [change])
        else:  # Neovim 0.7 debounces didChange (150 ms) and sends the pending changes together
            self._pending[uri].append(change)
            if len(self._pending[uri]) == 1:
                asyncio.get_running_loop().call_later(0.15, self._flush, uri)

    def _flush(self, uri: str) -> None:
        changes, self._pending[uri] = self._pending[uri], []
        if changes:
            self._send(uri, changes)

    def _send(self, uri: str, changes: list) -> None:
        self.client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=self.docs[uri][1]),
            content_changes=changes))

    def type(self, uri: str, offset: int, new_text: str) -> None:
        """The user types ``new_text`` at ``offset``."""
        self._change(uri, offset, offset, new_text)

    def apply(self, params: types.ApplyWorkspaceEditParams) -> types.ApplyWorkspaceEditResult:
        edit = params.edit
        items: list[tuple[str, int | None, list]] = []
        for change in edit.document_changes or []:
            items.append((change.text_document.uri, change.text_document.version, list(change.edits)))
        for uri, text_edits in (edit.changes or {}).items():
            items.append((uri, None, list(text_edits)))
        assert len(items) == 1 and len(items[0][2]) == 1, "one TextEdit per applyEdit"
        uri, version, (text_edit,) = items[0]
        self.sent[uri].append(edit)
        if version is not None and version != self.docs[uri][1]:
            return types.ApplyWorkspaceEditResult(applied=False, failure_reason=(
                f"version mismatch: edit for {version}, document at {self.docs[uri][1]}"))
        text = self.docs[uri][0]
        start = client_offset(text, text_edit.range.start, self.encoding)
        end = client_offset(text, text_edit.range.end, self.encoding)
        new_text = text_edit.new_text
        if self.vscode and uses_crlf(text):  # VS Code normalizes inserted line endings
            new_text = match_eol(new_text, True)
        self._change(uri, start, end, new_text)
        self.history[uri].append(self.text(uri))
        self.edits[uri].append(text_edit)
        hook = self.hooks.get(uri)
        if hook is not None:
            hook(self, uri, len(self.history[uri]))
        return types.ApplyWorkspaceEditResult(applied=True)


# --- fixtures ---------------------------------------------------------------------------------

def _make_client() -> LanguageClient:
    client = pytest_lsp.make_test_lsp_client()
    converter = client.protocol._converter

    # lsprotocol structures a CodeAction that carries a ``command`` as a Command: pick by shape.
    def command_or_action(obj: Any, _type: Any) -> Any:
        if isinstance(obj.get("command"), str):
            return converter.structure(obj, types.Command)
        return converter.structure(obj, types.CodeAction)

    converter.register_structure_hook(Union[types.Command, types.CodeAction], command_or_action)
    return client


SERVER = ClientServerConfig(
    server_command=[sys.executable, "-m", "lsp_server"],
    client_factory=_make_client,
    # One intra-op thread: on a shared 2-core CI box torch's thread team spins against other
    # processes (measured here: 13 tokens in 17 s with 2 threads, 1.8 s with 1). The in-process
    # reference run uses the same count, so both sides compute identical greedy outputs.
    server_env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONUNBUFFERED": "1",
                "OMP_NUM_THREADS": "1"},
)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("ws")
    (root / ".copy-as-decode.toml").write_text(ROOT_SETTINGS)
    for folder, text in FOLDER_SETTINGS.items():
        (root / folder).mkdir()
        (root / folder / ".copy-as-decode.toml").write_text(text)
    (root / "badmodel").mkdir()
    (root / "badmodel" / ".copy-as-decode.toml").write_text(f'model = "{root}/missing/model.gguf"\n')
    return root


def _attach_editor(lsp_client: LanguageClient, profile: str, encoding: str = "utf-16") -> Editor:
    """The client-side handlers a real editor has (pytest-lsp has no default for these)."""
    editor = Editor(lsp_client, profile, encoding)
    lsp_client.editor = editor  # type: ignore[attr-defined]
    lsp_client.profile = profile  # type: ignore[attr-defined]

    @lsp_client.feature(types.WORKSPACE_APPLY_EDIT)
    def apply_edit(params: types.ApplyWorkspaceEditParams):
        return editor.apply(params)

    @lsp_client.feature(types.CLIENT_REGISTER_CAPABILITY)
    def register_capability(params: types.RegistrationParams):
        lsp_client.registrations = [r.method for r in params.registrations]  # type: ignore[attr-defined]

    @lsp_client.feature("copyAsDecode/status")
    def status(params: Any):
        editor.status.append({"state": params.state, "message": params.message})

    return editor


@pytest_lsp.fixture(config=SERVER, scope="module", params=PROFILES)
async def client(lsp_client: LanguageClient, request, workspace: Path):
    profile = request.param
    _attach_editor(lsp_client, profile)
    capabilities = client_capabilities(profile)
    lsp_client.set_configuration({"copyAsDecode": dict(LSP_SETTINGS)})
    await lsp_client.initialize_session(types.InitializeParams(
        capabilities=capabilities,
        root_uri=workspace.as_uri(),
        workspace_folders=[types.WorkspaceFolder(uri=workspace.as_uri(), name="ws")],
        initialization_options={"copyAsDecode": {"allowedModels": ["default", "hub:*", f"{workspace}/*"]}},
    ))
    if not (capabilities.workspace and capabilities.workspace.configuration):
        # Neovim 0.7 cannot be asked for settings: its users push them from on_init.
        lsp_client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(settings={"copyAsDecode": dict(LSP_SETTINGS)}))
    yield
    await lsp_client.shutdown_session()


@pytest.fixture(scope="module")
def engine():
    """The in-process reference engine (same model, same thread count as the server)."""
    import torch

    from engine.api import Engine

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield Engine.load("default")
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def transformers_engine():
    """The reference engine on transformers (the ``specapply/`` folder's backend), one thread."""
    import torch

    from engine.api import Engine

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield Engine.load("default", backend="transformers")
    torch.set_num_threads(threads)


# --- helpers ----------------------------------------------------------------------------------

def uri_of(workspace: Path, name: str, text: str | None = None) -> str:
    path = workspace / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if text is not None:
        path.write_text(text, newline="")
    return path.as_uri()


def whole_range(text: str) -> types.Range:
    return types.Range(start=types.Position(line=0, character=0), end=client_position(text, len(text)))


async def execute(client: LanguageClient, argument: dict, timeout: float = 240) -> dict:
    outcome = await asyncio.wait_for(client.workspace_execute_command_async(
        types.ExecuteCommandParams(command=CMD, arguments=[argument])), timeout)
    summary = outcome.get("summary") or {}
    print(f"[{client.profile}] {argument['uri'].rsplit('/', 2)[-2:]}: {outcome['status']}, "
          f"{outcome['editsApplied']} edits, first edit {outcome['firstEditS']} s, total {outcome['totalS']} s, "
          f"changed={summary.get('changed')}, tokens={summary.get('tokens')}")
    return outcome


def expected(engine, text: str, instruction: str, lines=None, mode="ar", max_new_tokens=48, context_lines=3,
             language="python"):
    """(text the editor must end with, the engine's result and events) for the same request
    (``language``: the documents are .py files the editor opens as languageId "python")."""
    events = list(engine.stream(EditRequest(text=text, instruction=instruction, lines=lines, mode=mode,
                                            max_new_tokens=max_new_tokens, context_lines=context_lines,
                                            language=language)))
    result = events[-1].result
    final = result.output_text if result.stop_reason == "done" else text
    return match_eol(final, uses_crlf(text)), result, events[1:-1]


def live_states(text: str, events, lines=None) -> set[str]:
    """Every document state the live-document rule allows while streaming ``events``."""
    from lsp_server.edits import LiveRegion

    live = LiveRegion(text, lines)
    return {live.document(live.live_text(e.resolved, e.input_lines_consumed)) for e in events}


def progress_of(client: LanguageClient, title: str = "AI edit") -> list[list]:
    """The progress streams (begin..end values) whose begin has ``title``, oldest first."""
    out = []
    for values in client.progress_reports.values():
        if values and isinstance(values[0], types.WorkDoneProgressBegin) and values[0].title == title:
            out.append(values)
    return out


def messages(client: LanguageClient) -> str:
    return "\n".join(m.message for m in client.messages)


APPLY_CMD = "copyAsDecode.server.applyUpdate"
APPLY_FILE = ('def add(a, b):\n    """Return the sum of a and b."""\n    return a - b\n\n\n'
              'def sub(a, b):\n    return a - b\n')
APPLY_UPDATE = "def add(a, b):\n    # ... existing code ...\n    return a + b\n# ... rest of the code unchanged ...\n"
APPLY_NOWHERE = "# ... existing code ...\ndef zzz():\n    totally_new()\n# ... existing code ...\n"
# sub's change is placed; zzz, between two elisions, anchors on nothing (update lines 2-3)
APPLY_HALF = APPLY_NOWHERE + "def sub(a, b):\n    return b - a\n"


async def apply_update(client: LanguageClient, argument: dict, timeout: float = 240) -> dict:
    return await asyncio.wait_for(client.workspace_execute_command_async(
        types.ExecuteCommandParams(command=APPLY_CMD, arguments=[argument])), timeout)


def applied(engine, text: str, update: str, partial: bool = False) -> Any:
    """The engine's result for the server's apply request (the ``apply/`` folder's settings)."""
    return engine.edit(EditRequest(text=text, instruction="", update=update, partial=partial, max_new_tokens=1024,
                                   mode="auto", context_lines=3, language="python"))


# --- core: both client profiles ---------------------------------------------------------------

async def test_initialize_and_code_actions(client: LanguageClient, workspace: Path):
    uri = uri_of(workspace, f"actions_{client.profile[:6]}.py")
    client.editor.open(uri, BUGGY)
    diagnostic = types.Diagnostic(range=types.Range(start=types.Position(line=1, character=11),
                                                    end=types.Position(line=1, character=16)),
                                  message=BUG_MESSAGE, severity=types.DiagnosticSeverity.Error)
    cursor = types.Range(start=types.Position(line=1, character=12), end=types.Position(line=1, character=12))
    result = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), range=cursor,
        context=types.CodeActionContext(diagnostics=[diagnostic])))
    assert [a.title for a in result] == ["AI fix", "AI edit\u2026"]
    fix, edit = result
    assert isinstance(fix, types.CodeAction) and fix.kind == types.CodeActionKind.QuickFix
    assert fix.diagnostics and fix.diagnostics[0].message == BUG_MESSAGE
    assert fix.command.command == CMD
    assert fix.command.arguments[0] == {"uri": uri, "range": {"start": {"line": 1, "character": 12},
                                                             "end": {"line": 1, "character": 12}},
                                        "instruction": f"Fix: {BUG_MESSAGE}", "kind": "fix",
                                        "focus": {"line": 1, "character": 11, "source": "diagnostic"}}  # its start
    assert edit.kind == types.CodeActionKind.RefactorRewrite
    assert edit.command.arguments[0]["instruction"] is None and edit.command.arguments[0]["kind"] == "edit"
    only = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), range=cursor,
        context=types.CodeActionContext(diagnostics=[], only=[types.CodeActionKind.QuickFix])))
    assert [a.title for a in only] == ["AI fix"]
    assert only[0].command.arguments[0]["instruction"] == "Fix the bug"
    assert only[0].command.arguments[0]["focus"] == {"line": 1, "character": 12, "source": "cursor"}


async def test_ai_fix_streams_the_engine_output(client: LanguageClient, workspace: Path, engine):
    editor: Editor = client.editor
    # (the model's fix rewrites two lines and drops a blank one: streamed, not held for review)
    text = 'def add(a, b):\n    """Return the sum of a and b."""\n    return a - b\n\n\nprint(add(1, 2))\n'
    uri = uri_of(workspace, f"fix_{client.profile[:6]}.py")
    editor.open(uri, text)
    instruction = f"Fix: {BUG_MESSAGE}"
    started = time.monotonic()
    outcome = await execute(client, {"uri": uri, "range": None, "instruction": instruction, "kind": "fix"})
    elapsed = time.monotonic() - started
    want, result, events = expected(engine, text, instruction)
    assert outcome["status"] in ("done", "unchanged", "max_tokens"), outcome
    assert editor.text(uri) == want
    if result.stop_reason == "done" and result.changed:
        # the streamed states follow the live-document rule, in order, and end at the output
        allowed = live_states(text, events) | {want}
        assert editor.history[uri], "no edit was streamed"
        assert all(state in allowed for state in editor.history[uri]), editor.history[uri]
        assert editor.history[uri][-1] == want
        order = [sorted(allowed).index(s) for s in editor.history[uri]]
        assert len(order) == len(set(order)), "a state was shown twice"
        assert outcome["editsApplied"] == len(editor.history[uri])
        assert outcome["firstEditS"] is not None and outcome["firstEditS"] <= elapsed
    # progress: begin (cancellable, model + mode), reports, end with a summary
    stream = progress_of(client)[-1]
    begin, *reports, end = stream
    assert begin.cancellable and "ar" in begin.message and "default" in begin.message
    assert isinstance(end, types.WorkDoneProgressEnd) and end.message
    assert all(isinstance(r, types.WorkDoneProgressReport) for r in reports) and reports
    assert any("copied" in (r.message or "") for r in reports)
    assert [s["state"] for s in editor.status][-2:] == ["editing", "ready"]


async def test_apply_update_streams_the_merge_into_the_buffer(client: LanguageClient, workspace: Path, engine):
    editor: Editor = client.editor
    uri = uri_of(workspace, f"apply/merge_{client.profile[:6]}.py")
    editor.open(uri, APPLY_FILE)
    outcome = await apply_update(client, {"uri": uri, "update": APPLY_UPDATE})
    result = applied(engine, APPLY_FILE, APPLY_UPDATE)
    assert result.stop_reason == "done" and result.output_text == APPLY_FILE.replace("a - b\n\n", "a + b\n\n", 1)
    assert outcome["status"] == "done", outcome
    assert editor.text(uri) == result.output_text and editor.history[uri][-1] == result.output_text
    assert outcome["editsApplied"] == len(editor.history[uri]) and outcome["summary"]["unplaced"] == []
    begin, *_, end = progress_of(client)[-1]
    assert begin.cancellable and isinstance(end, types.WorkDoneProgressEnd)
    editing = [s["message"] for s in editor.status if s["state"] == "editing"]
    assert editing[-1] == "apply: aligner with aligner", editing  # auto: the aligner merges it, no model runs
    assert editor.status[-1]["state"] == "ready"


async def test_apply_update_that_cannot_be_placed_writes_nothing(client: LanguageClient, workspace: Path, engine):
    editor: Editor = client.editor
    uri = uri_of(workspace, f"apply/nowhere_{client.profile[:6]}.py")
    editor.open(uri, APPLY_FILE)
    outcome = await apply_update(client, {"uri": uri, "update": APPLY_NOWHERE})
    assert outcome["status"] == "unplaced" and "2-3" in outcome["message"], outcome
    assert editor.text(uri) == APPLY_FILE and not editor.history[uri]
    assert "2-3" in messages(client)
    half = await apply_update(client, {"uri": uri, "update": APPLY_HALF})
    assert half["status"] == "unplaced" and editor.text(uri) == APPLY_FILE and not editor.history[uri]
    partial = await apply_update(client, {"uri": uri, "update": APPLY_HALF, "partial": True})
    want = applied(engine, APPLY_FILE, APPLY_HALF, partial=True).output_text
    assert want == APPLY_FILE[:APPLY_FILE.index("def sub")] + "def sub(a, b):\n    return b - a\n"
    assert partial["status"] == "done" and editor.text(uri) == want, partial
    assert "2-3" in partial["message"] and [c["lines"] for c in partial["summary"]["unplaced"]] == [[2, 3]]


# A docstring added to one function between elisions: the embedded model rewrites the whole file.
REWRITE_FILE = ("def area(w, h):\n    return w * h\n\n\ndef perimeter(w, h):\n    return 2 * (w + h)\n\n\n"
                "def describe(w, h):\n    return f\"{w}x{h}\"\n")
REWRITE_UPDATE = ("# ... existing code ...\n\ndef perimeter(w, h):\n    \"\"\"The rectangle's perimeter.\"\"\"\n"
                  "    return 2 * w + 2 * h\n\n# ... existing code ...\n")
REWROTE = "the model rewrote the file, drafted from the rules' merge"


async def test_speculative_apply_streams_the_models_rewrite(client: LanguageClient, workspace: Path,
                                                             transformers_engine):
    """``mode = "speculative"``: the model rewrites the file, drafted from the rules' merge; the
    buffer ends as the engine's apply in that mode writes it (``Engine.edit``, what ``copy-as-decode
    apply --mode speculative --backend transformers`` runs), and the answer names the rewrite with
    its drafts. One client profile: the streaming is the other tests'."""
    engine = transformers_engine
    if client.profile != "visual-studio-code":
        pytest.skip("one case, under VS Code's capabilities")
    editor: Editor = client.editor
    uri = uri_of(workspace, "specapply/shapes.py")
    editor.open(uri, REWRITE_FILE)
    outcome = await apply_update(client, {"uri": uri, "update": REWRITE_UPDATE})
    engine.forget_prompts()
    want = engine.edit(EditRequest(text=REWRITE_FILE, instruction="", update=REWRITE_UPDATE, mode="speculative",
                                   max_new_tokens=400, context_lines=3, language="python"))
    assert want.stop_reason == "done" and want.changed and want.breakdown["drafted_tokens"] > 0
    assert outcome["status"] == "done", outcome
    assert editor.text(uri) == want.output_text and editor.history[uri][-1] == want.output_text
    summary = outcome["summary"]
    assert summary["mode"] == "speculative" and summary["breakdown"]["drafted_tokens"] > 0
    assert 0 < summary["tokens"]["copied"] <= summary["breakdown"]["drafted_tokens"]
    note = next(w for w in summary["warnings"] if w.startswith(REWROTE))
    assert (f"({summary['tokens']['copied']} of {summary['breakdown']['drafted_tokens']} drafted tokens "
            "accepted)") in note
    merged = merge_draft(EditRequest(text=REWRITE_FILE, instruction="", update=REWRITE_UPDATE, language="python"))
    assert note.endswith(f"its rewrite {'equals' if want.output_text == merged else 'differs from'} the merge")
    editing = [s["message"] for s in editor.status if s["state"] == "editing"]
    assert editing[-1].startswith("apply: speculative"), editing


async def test_apply_update_arguments_are_checked(client: LanguageClient, workspace: Path):
    uri = uri_of(workspace, f"apply/args_{client.profile[:6]}.py")
    client.editor.open(uri, APPLY_FILE)
    missing = await apply_update(client, {"uri": uri}, 30)
    assert missing["status"] == "error" and "'update'" in missing["message"]
    empty = await apply_update(client, {"uri": uri, "update": " \n"}, 30)
    assert empty["status"] == "error" and "the update is empty" in empty["message"]
    closed = await apply_update(client, {"uri": uri_of(workspace, "apply/not_open.py"), "update": APPLY_UPDATE}, 30)
    assert closed["status"] == "error" and "not open" in closed["message"]
    assert client.editor.text(uri) == APPLY_FILE


async def test_configuration_pull_push_and_files(client: LanguageClient, workspace: Path):
    uri = uri_of(workspace, f"spec/config_{client.profile[:6]}.py")
    client.editor.open(uri, BUGGY)
    settings = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="copyAsDecode.server.settings", arguments=[{"uri": uri}]))
    s = settings["settings"]
    assert (s["mode"], s["maxNewTokens"], s["contextLines"]) == ("speculative", 48, 3)
    # a change of the LSP settings (pulled by VS Code, pushed by Neovim) wins over the files
    new = {"contextLines": 4, "applyMode": "final", "colour": "red"}
    client.set_configuration({"copyAsDecode": new})
    pushed = {"copyAsDecode": new} if client.profile.startswith("neovim") else None
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=pushed))
    await asyncio.sleep(0.5)
    settings = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="copyAsDecode.server.settings", arguments=[{"uri": uri}]))
    s = settings["settings"]
    assert (s["mode"], s["contextLines"], s["applyMode"]) == ("speculative", 4, "final")
    assert "unknown setting 'colour'" in messages(client) + "\n".join(settings["warnings"])
    # restore
    client.set_configuration({"copyAsDecode": dict(LSP_SETTINGS)})
    pushed = {"copyAsDecode": dict(LSP_SETTINGS)} if client.profile.startswith("neovim") else None
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=pushed))
    await asyncio.sleep(0.3)
    if client.profile.startswith("visual"):
        assert "workspace/didChangeConfiguration" in getattr(client, "registrations", [])


async def test_config_file_hot_reload_and_invalid_file(client: LanguageClient, workspace: Path):
    if not client.profile.startswith("visual"):
        pytest.skip("config files are client-independent: covered under the VS Code profile")
    path = workspace / "reload" / ".copy-as-decode.toml"
    uri = uri_of(workspace, "reload/doc.py")
    client.editor.open(uri, BUGGY)

    async def current() -> dict:
        result = await client.workspace_execute_command_async(types.ExecuteCommandParams(
            command="copyAsDecode.server.settings", arguments=[{"uri": uri}]))
        return result["settings"]

    assert (await current())["mode"] == "ar"
    path.write_text('mode = "program"\nmax_new_tokens = 33\n')

    async def reloaded() -> bool:
        return any("reloaded settings" in m.message and "reload" in m.message for m in client.log_messages)

    await wait_until(reloaded, "the reload log message", client, timeout=10)
    s = await current()
    assert (s["mode"], s["maxNewTokens"]) == ("program", 33)
    path.write_text('mode = "turbo"\nmax_new_tokens = 34\n')  # a bad value: its key is skipped, the rest applies

    async def complained() -> bool:
        return f"{path}:1: mode 'turbo' is not valid; choose one of auto" in messages(client)

    await wait_until(complained, "the invalid-value message", client, timeout=10)
    await wait_until(lambda: _mode_is(current, "ar"), "the file's other keys", client, timeout=10)  # mode: the root file's
    assert (await current())["maxNewTokens"] == 34
    path.write_text('mode = "program\n')  # broken TOML

    async def complained_toml() -> bool:
        return f"{path}:1: invalid TOML" in messages(client)

    await wait_until(complained_toml, "the invalid-TOML message", client, timeout=10)
    assert "last good configuration stays in force" in messages(client)
    s = await current()
    assert (s["mode"], s["maxNewTokens"]) == ("ar", 34)
    path.write_text(FOLDER_SETTINGS["reload"])

    async def restored() -> bool:
        return (await current())["maxNewTokens"] == 48  # the root file's again

    await wait_until(restored, "the restored file", client, timeout=10)

    # a model change reloads the model without a restart (once the server has loaded one)
    loaded = (await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="copyAsDecode.server.settings", arguments=[{"uri": uri}])))["loadedModels"]
    if loaded:
        path.write_text('mode = "ar"\ndtype = "float32"\n')

        async def reloaded_model() -> bool:
            states = [(s["state"], s["message"]) for s in client.editor.status]
            return any(state == "ready" and "float32" in message for state, message in states)

        await wait_until(reloaded_model, "the new model to load", client, timeout=90)
        assert any(s["state"] == "loading" and "float32" in s["message"] for s in client.editor.status)
        path.write_text(FOLDER_SETTINGS["reload"])
        await wait_until(lambda: _mode_is(current, "ar"), "the restored file", client, timeout=10)


async def _mode_is(current, mode: str) -> bool:
    return (await current())["mode"] == mode


async def test_program_mode_fix(client: LanguageClient, workspace: Path, engine):
    if not client.profile.startswith("visual"):
        pytest.skip("one program-mode run is enough (the slowest mode with the embedded model)")
    editor: Editor = client.editor
    uri = uri_of(workspace, f"program/fix_{client.profile[:6]}.py")
    editor.open(uri, BUGGY)
    outcome = await execute(client, {"uri": uri, "range": None, "instruction": f"Fix: {BUG_MESSAGE}", "kind": "fix"})
    want, result, _ = expected(engine, BUGGY, f"Fix: {BUG_MESSAGE}", mode="program", max_new_tokens=48)
    assert editor.text(uri) == want, outcome
    assert outcome["summary"]["mode"] == "program"
    assert outcome["status"] == {"done": "done" if result.changed else "unchanged"}.get(result.stop_reason,
                                                                                        result.stop_reason)


async def test_an_idle_buffers_fix_is_read_ahead_and_is_the_same_fix(client: LanguageClient, workspace: Path):
    """warmUp "fix" (the default): the cursor rests on the bug, the server decodes the AI fix while
    the buffer is idle, and the lightbulb's fix then gets that answer: the same edit as the same fix
    in a folder that reads nothing ahead."""
    if not client.profile.startswith("visual"):
        pytest.skip("one read-ahead run is enough")
    editor: Editor = client.editor
    cursor = types.Range(start=types.Position(line=1, character=4), end=types.Position(line=1, character=4))

    async def fix_arguments(uri: str) -> dict:
        actions = await client.text_document_code_action_async(types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri), range=cursor,
            context=types.CodeActionContext(diagnostics=[])))
        return next(a for a in actions if a.title == "AI fix").command.arguments[0]

    cold_uri = uri_of(workspace, "cold/idle.py")
    editor.open(cold_uri, BUGGY)
    cold = await execute(client, await fix_arguments(cold_uri))
    assert "read_ahead_s" not in cold["summary"]["timings"]

    uri = uri_of(workspace, "program/idle.py")
    editor.open(uri, BUGGY)
    arguments = await fix_arguments(uri)  # the cursor rests here: the idle timer starts

    async def answered() -> bool:
        state = await client.workspace_execute_command_async(types.ExecuteCommandParams(
            command="copyAsDecode.server.settings", arguments=[{"uri": uri}]))
        return any(w["uri"] == uri and w["answered"] for w in state["warmUps"])

    await wait_until(answered, "a warm-up that answered", client, timeout=240)
    outcome = await execute(client, arguments)
    assert outcome["summary"]["timings"]["read_ahead_s"] > outcome["summary"]["timings"]["total_s"]
    assert outcome["summary"]["program"] == cold["summary"]["program"]
    assert editor.text(uri) == editor.text(cold_uri)


async def test_a_crlf_selection_gets_its_lf_twins_edit(client: LanguageClient, workspace: Path, engine):
    """A CRLF buffer is edited as its LF twin (the same program) and every edit the server sends
    keeps CRLF, with ranges that land right; Neovim's profile applies the text as sent."""
    from engine.core.lines import to_crlf

    lf = (ROOT / "examples" / "buggy_add.py").read_text()
    editor: Editor = client.editor
    uri = uri_of(workspace, f"program/crlf_{client.profile[:6]}.py")
    editor.open(uri, to_crlf(lf))
    # the whole function: a selection of its last two lines alone is a fix the model writes prose after
    rng = {"start": {"line": 0, "character": 0}, "end": {"line": 2, "character": len("    return a - b")}}
    outcome = await execute(client, {"uri": uri, "range": rng, "instruction": "Fix the bug", "kind": "fix"})
    want, result, _ = expected(engine, lf, "Fix the bug", lines=(1, 3), mode="program", max_new_tokens=48)
    assert editor.text(uri) == to_crlf(want), outcome
    assert outcome["summary"]["program"] == to_crlf(result.program.serialize())
    for state in editor.history[uri]:
        assert "\n" not in state.replace("\r\n", ""), state  # no bare LF at any step


async def test_cancel_mid_decode_restores_the_region(client: LanguageClient, workspace: Path):
    """VS Code cancels through the progress UI; Neovim users run the cancel command."""
    editor: Editor = client.editor
    text = LONG
    uri = uri_of(workspace, f"long/cancel_{client.profile[:6]}.py")
    editor.open(uri, text)

    def cancel_on_first_edit(ed: Editor, doc_uri: str, count: int) -> None:
        if count != 1:
            return
        if client.profile.startswith("visual"):
            token = next(tok for tok, values in client.progress_reports.items()
                         if values and getattr(values[0], "title", "") == "AI edit"
                         and not isinstance(values[-1], types.WorkDoneProgressEnd))
            client.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token=token))
        else:
            client.protocol.send_request("workspace/executeCommand", types.ExecuteCommandParams(
                command="copyAsDecode.server.cancel", arguments=[{"uri": doc_uri}]))

    editor.hooks[uri] = cancel_on_first_edit
    outcome = await execute(client, {"uri": uri, "range": None, "instruction": LONG_INSTRUCTION, "kind": "edit"})
    assert outcome["status"] == "cancelled", outcome
    assert editor.history[uri], "the edit never streamed"
    assert editor.text(uri) == text, "the original text was not restored"
    assert outcome["summary"]["stop_reason"] == "cancelled"
    assert outcome["summary"]["tokens"]["total"] < 200  # stopped early, not at max_new_tokens


async def test_user_typing_during_a_streamed_edit_stops_it(client: LanguageClient, workspace: Path):
    editor: Editor = client.editor
    text = LONG
    uri = uri_of(workspace, f"long/typing_{client.profile[:6]}.py")
    editor.open(uri, text)
    typed = "# the user typed this\n"

    def type_on_first_edit(ed: Editor, doc_uri: str, count: int) -> None:
        if count == 1:
            ed.type(doc_uri, len(ed.text(doc_uri)), typed)

    editor.hooks[uri] = type_on_first_edit
    outcome = await execute(client, {"uri": uri, "range": None, "instruction": LONG_INSTRUCTION, "kind": "edit"})
    assert editor.history[uri]
    first = editor.history[uri][0]
    assert len(editor.history[uri]) == 1, "an edit was sent after the user typed"
    assert editor.text(uri) == first + typed, "the user's text or the streamed text was corrupted"
    assert outcome["status"] == "conflict", outcome
    assert "document changed" in outcome["message"] and "undo" in outcome["message"]
    assert "document changed" in messages(client)


# The embedded model's "fix" of this function (speculative) drops the 20-line note after it.
NOTE = (
    "def pairwise_sums(values):\n    for i in range(len(values)):\n        for j in range(i, len(values)):\n"
    "            yield values[i] - values[j]\n\n\n\n"
    '"""\nPairwise sums\n\nYields the sum of every pair of items of a list.\n\n\nInput:\n    values: A list of numbers\n\n'
    "Precondition:\n    The list is not empty\n\nOutput:\n    A generator of sums, one per pair (i <= j)\n\n"
    'Example:\n    >>> list(pairwise_sums([1, 2]))\n    [2, 3, 4]\n"""\n')


@pytest.mark.parametrize("case", ["destructive", "apply_mode_preview"])
async def test_edits_for_review(client: LanguageClient, workspace: Path, engine, case: str):
    """A destructive fix, and every edit under applyMode preview, waits for the user: VS Code gets
    a WorkspaceEdit annotated needsConfirmation (its refactor preview; the test editor confirms
    it), Neovim 0.7 (no changeAnnotationSupport) a message and the edit on applyPending."""
    from engine.checks.guards import assess_edit, destructive_reason

    editor: Editor = client.editor
    folder, text, mode = ("spec/", NOTE, "speculative") if case == "destructive" else ("preview/", BUGGY, "ar")
    uri = uri_of(workspace, f"{folder}review_{case}_{client.profile[:6]}.py")
    editor.open(uri, text)
    want, result, _ = expected(engine, text, "Fix the bug", mode=mode)
    assert result.stop_reason == "done" and result.changed, "the case no longer makes an edit"
    reason = destructive_reason(assess_edit(result.region_input, result.region_output), "Fix the bug")
    if case == "destructive":
        assert reason, "the model no longer deletes the note; pick another case"
    outcome = await execute(client, {"uri": uri, "range": None, "instruction": "Fix the bug", "kind": "fix"})
    if client.profile.startswith("visual"):
        assert outcome["status"] == "done" and "after review" in outcome["message"], outcome
        assert editor.text(uri) == want
        *streamed, sent = editor.sent[uri]  # the preview comes last
        if case == "apply_mode_preview":
            assert not streamed, "preview mode streamed into the document"
        elif streamed:  # what streamed before the damage showed was put back before the preview
            assert editor.history[uri][-2] == text
        assert all(not getattr(e, "change_annotations", None) for e in streamed)
        (change,) = sent.document_changes
        (annotated,) = change.edits
        assert isinstance(annotated, types.AnnotatedTextEdit)
        note = sent.change_annotations[annotated.annotation_id]
        assert note.needs_confirmation is True
        assert (reason or "applyMode is preview") in note.label
        if case == "destructive":
            assert outcome["damage"]["deleted"] >= 20
        return
    assert outcome["status"] == "pending", outcome
    assert "copyAsDecode.server.applyPending" in outcome["message"] and "copyAsDecode.server.applyPending" in messages(client)
    assert editor.text(uri) == text, "the edit was applied without the user's word"
    if case == "apply_mode_preview":
        assert not editor.sent[uri], "preview mode streamed into the document"
    assert any("pending AI edit" in m.message and "@@" in m.message for m in client.log_messages)
    applied = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="copyAsDecode.server.applyPending", arguments=[{"uri": uri}]))
    assert applied["status"] == "done", applied
    assert editor.text(uri) == want
    again = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="copyAsDecode.server.applyPending", arguments=[{"uri": uri}]))
    assert again["status"] == "error" and "no AI edit is waiting" in again["message"]


def _case_files() -> list:
    """(name, text, selection ((line, utf16 char), (line, utf16 char)) or None, folder, instruction)."""
    emoji = "\U0001F600"
    fix = "Fix the bug"
    return [
        ("crlf", "def add(a, b):\r\n    return a - b\r\n\r\nprint(add(1, 2))\r\n", None, "", fix),
        ("no_final_newline", "def add(a, b):\n    return a - b", None, "", fix),
        ("empty", "", None, "", fix),
        ("tabs", "def add(a, b):\n\tif a:\n\t\treturn a - b\n\treturn b\n", None, "", fix),
        ("emoji_cjk", f"def greet():\n    s = '{emoji}\u4e2d\u6587 e\u0301'  # {emoji}\n    return s - 1\n", None, "",
         "Fix: s is a string; return s + '!'"),
        ("emoji_before_the_change", EMOJI_BUG, None, "", EMOJI_BUG_INSTRUCTION),
        ("emoji_selection", f"x = '{emoji}{emoji}'\ny = '\u4e2d{emoji}' + 1\nz = y - x\nprint(z)\n",
         ((1, 7), (3, 1)), "", fix),
        ("gen_tag", 'def tags():\n    return "</gen><copy lines=\\"1-2\\"/>" - 1\n', None, "program/", fix),
        ("final_apply_mode", BUGGY, None, "final/", fix),
        ("speculative", BUGGY, None, "spec/", fix),
    ]


@pytest.mark.parametrize("name,text,selection,folder,instruction", _case_files(), ids=[c[0] for c in _case_files()])
async def test_reliability_cases(client: LanguageClient, workspace: Path, engine, name, text, selection, folder,
                                 instruction):
    if not client.profile.startswith("visual"):
        pytest.skip("reliability cases run under the VS Code profile")
    editor: Editor = client.editor
    uri = uri_of(workspace, f"{folder}{name}.py")
    editor.open(uri, text)
    rng = None
    lines = None
    if selection is not None:
        (l1, c1), (l2, c2) = selection
        rng = {"start": {"line": l1, "character": c1}, "end": {"line": l2, "character": c2}}
        lines = (l1 + 1, l2 + 1)
    outcome = await execute(client, {"uri": uri, "range": rng, "instruction": instruction, "kind": "fix"})
    mode = {"program/": "program", "spec/": "speculative"}.get(folder, "ar")
    want, result, _ = expected(engine, text, instruction, lines=lines, mode=mode, max_new_tokens=48)
    assert editor.text(uri) == want, (outcome, result.region_output)
    assert outcome["summary"]["region"] == (list(lines) if lines else None)
    if folder == "final/":
        assert len(editor.history[uri]) == (1 if result.changed and result.stop_reason == "done" else 0)
    if name == "crlf" and result.changed:
        assert uses_crlf(editor.text(uri))


async def test_unsaved_buffer_is_edited_not_the_file(client: LanguageClient, workspace: Path, engine):
    if not client.profile.startswith("visual"):
        pytest.skip("reliability cases run under the VS Code profile")
    on_disk = "def add(a, b):\n    return a + b\n"
    uri = uri_of(workspace, "unsaved.py", on_disk)
    buffer = "def add(a, b):\n    # unsaved change\n    return a - b\n"
    client.editor.open(uri, buffer)
    await execute(client, {"uri": uri, "range": None, "instruction": "Fix the bug", "kind": "fix"})
    want, _, _ = expected(engine, buffer, "Fix the bug")
    assert client.editor.text(uri) == want
    assert (workspace / "unsaved.py").read_text() == on_disk


async def test_the_editor_makes_the_clis_edit(client: LanguageClient, workspace: Path, engine, monkeypatch, capsys):
    """The same file, settings and instruction give the same edit in the editor as with
    ``copy-as-decode edit`` (the CLI here runs in-process on the reference engine): the request
    carries the document's language, so the prompt (its code fences: the prompt's token count) and
    the syntax verdict agree."""
    if not client.profile.startswith("visual"):
        pytest.skip("reliability cases run under the VS Code profile")
    import engine.commands.edit as edit_command
    from engine.cli import main

    text = 'def add(a, b):\n    """Return the sum of a and b."""\n    return a - b\n'
    uri = uri_of(workspace, "parity.py", text)
    client.editor.open(uri, text)
    outcome = await execute(client, {"uri": uri, "range": None, "instruction": "Fix the bug", "kind": "fix"})
    monkeypatch.setattr(edit_command.Engine, "load", lambda *args, **kwargs: engine)
    out = workspace / "parity.out.py"
    capsys.readouterr()
    code = await asyncio.to_thread(main, ["edit", str(workspace / "parity.py"), "-i", "Fix the bug",
                                          "--output", str(out), "--json"])
    cli = json.loads(capsys.readouterr().out)
    editor_summary = outcome["summary"]
    for key in ("mode", "region", "prompt_tokens", "program", "stop_reason", "changed"):
        assert editor_summary[key] == cli[key], (key, outcome, cli)
    assert cli["syntax"]["language"] == "python"
    if outcome["syntax"] is not None:  # the verdict of a finished edit (done, or held for review)
        assert outcome["syntax"] == cli["syntax"]
    if code == 0 and outcome["status"] == "done":
        assert client.editor.text(uri) == out.read_text()


async def test_rejected_apply_edit_stops(client: LanguageClient, workspace: Path):
    if not client.profile.startswith("visual"):
        pytest.skip("reliability cases run under the VS Code profile")
    editor: Editor = client.editor
    uri = uri_of(workspace, "rejected.py")
    editor.open(uri, BUGGY)
    original_apply = editor.apply

    def refuse(params):
        if params.edit.document_changes and params.edit.document_changes[0].text_document.uri == uri:
            return types.ApplyWorkspaceEditResult(applied=False, failure_reason="read-only editor")
        return original_apply(params)

    editor.apply = refuse  # type: ignore[method-assign]
    try:
        outcome = await execute(client, {"uri": uri, "range": None, "instruction": "Fix the bug", "kind": "fix"})
    finally:
        editor.apply = original_apply  # type: ignore[method-assign]
    assert editor.text(uri) == BUGGY
    if outcome["summary"] and outcome["summary"]["changed"]:
        assert outcome["status"] == "rejected" and "read-only editor" in outcome["message"], outcome


async def test_file_over_the_size_limit(client: LanguageClient, workspace: Path):
    if not client.profile.startswith("visual"):
        pytest.skip("reliability cases run under the VS Code profile")
    text = ("x = 1  # " + "y" * 90 + "\n") * 2100
    uri = uri_of(workspace, "huge.py")
    client.editor.open(uri, text)
    outcome = await execute(client, {"uri": uri, "range": None, "instruction": "Fix the bug", "kind": "fix"}, 30)
    assert outcome["status"] == "error" and "input too large" in outcome["message"]
    assert "limit" in messages(client)
    assert not client.editor.history[uri]
    assert client.editor.status[-1]["state"] == "error"


async def test_model_that_fails_to_load(client: LanguageClient, workspace: Path):
    if not client.profile.startswith("visual"):
        pytest.skip("reliability cases run under the VS Code profile")
    uri = uri_of(workspace, "badmodel/doc.py")
    client.editor.open(uri, BUGGY)
    outcome = await execute(client, {"uri": uri, "range": None, "instruction": "Fix the bug", "kind": "fix"}, 60)
    assert outcome["status"] == "error" and "cannot load the model" in outcome["message"]
    assert "GGUF file not found" in messages(client)
    assert any(s["state"] == "error" and "GGUF" in s["message"] for s in client.editor.status)
    # the server keeps serving
    result = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), range=whole_range(BUGGY),
        context=types.CodeActionContext(diagnostics=[])))
    assert [a.title for a in result] == ["AI fix", "AI edit\u2026"]


async def test_workspace_files_cannot_enable_remote_code_or_other_models(client: LanguageClient, workspace: Path):
    if not client.profile.startswith("visual"):
        pytest.skip("reliability cases run under the VS Code profile")
    (workspace / "evil").mkdir(exist_ok=True)
    (workspace / "evil" / ".copy-as-decode.toml").write_text(
        'trust_remote_code = true\nmodel = "/opt/elsewhere/model"\nallowed_models = ["*"]\n')
    uri = uri_of(workspace, "evil/doc.py")
    client.editor.open(uri, BUGGY)
    result = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="copyAsDecode.server.settings", arguments=[{"uri": uri}]))
    assert result["settings"]["model"] == "default" and result["settings"]["trustRemoteCode"] is False
    warnings = "\n".join(result["warnings"])
    assert "not in your allowedModels" in warnings


async def test_edit_without_instruction_is_refused(client: LanguageClient, workspace: Path):
    uri = uri_of(workspace, f"noinstr_{client.profile[:6]}.py")
    client.editor.open(uri, BUGGY)
    outcome = await execute(client, {"uri": uri, "range": None, "instruction": None, "kind": "edit"}, 30)
    assert outcome["status"] == "error" and "instruction" in outcome["message"]


async def test_concurrent_requests(client: LanguageClient, workspace: Path, engine):
    """Three requests at once: A1 and B queue behind each other, A2 supersedes A1; the server
    keeps answering other requests meanwhile."""
    if not client.profile.startswith("visual"):
        pytest.skip("reliability cases run under the VS Code profile")
    editor: Editor = client.editor
    text_a = "def sub(a, b):\n    return a + b\n"
    text_b = "def mul(a, b):\n    return a + b\n"
    uri_a, uri_b = uri_of(workspace, "conc_a.py"), uri_of(workspace, "conc_b.py")
    editor.open(uri_a, text_a)
    editor.open(uri_b, text_b)
    a1 = asyncio.ensure_future(execute(client, {"uri": uri_a, "range": None, "instruction": "Make sub subtract",
                                                "kind": "edit"}))
    await asyncio.sleep(0.05)
    b = asyncio.ensure_future(execute(client, {"uri": uri_b, "range": None, "instruction": "Make mul multiply",
                                               "kind": "edit"}))
    await asyncio.sleep(0.05)
    a2 = asyncio.ensure_future(execute(client, {"uri": uri_a, "range": None, "instruction": "Fix the bug",
                                                "kind": "fix"}))
    started = time.monotonic()
    await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri_b), range=whole_range(text_b),
        context=types.CodeActionContext(diagnostics=[])))
    assert time.monotonic() - started < 5, "the server stopped answering while decoding"
    out_a1, out_b, out_a2 = await asyncio.gather(a1, b, a2)
    assert out_a1["status"] == "superseded", out_a1
    assert out_b["status"] in ("done", "unchanged", "max_tokens") and out_a2["status"] in ("done", "unchanged", "max_tokens")
    assert editor.text(uri_a) == expected(engine, text_a, "Fix the bug")[0]
    assert editor.text(uri_b) == expected(engine, text_b, "Make mul multiply")[0]


# --- a client that negotiates UTF-8 positions -------------------------------------------------

@pytest_lsp.fixture(config=SERVER, scope="module")
async def utf8_client(lsp_client: LanguageClient, workspace: Path):
    _attach_editor(lsp_client, "visual-studio-code", encoding="utf-8")
    lsp_client.profile = "utf-8"  # type: ignore[attr-defined]
    capabilities = client_capabilities("visual-studio-code")
    capabilities.general = types.GeneralClientCapabilities(
        position_encodings=[types.PositionEncodingKind.Utf8, types.PositionEncodingKind.Utf16])
    lsp_client.set_configuration({"copyAsDecode": dict(LSP_SETTINGS)})
    result = await lsp_client.initialize_session(types.InitializeParams(
        capabilities=capabilities, root_uri=workspace.as_uri(),
        workspace_folders=[types.WorkspaceFolder(uri=workspace.as_uri(), name="ws")]))
    lsp_client.position_encoding = result.capabilities.position_encoding  # type: ignore[attr-defined]
    yield
    await lsp_client.shutdown_session()


async def test_utf8_position_encoding(utf8_client: LanguageClient, workspace: Path):
    """The negotiated encoding is used for incoming and outgoing positions. (Edits in every
    encoding are checked against a scripted engine in test_lsp_jobs.py; no model is loaded here.)"""
    assert utf8_client.position_encoding == types.PositionEncodingKind.Utf8
    uri = uri_of(workspace, "utf8_emoji.py")
    utf8_client.editor.open(uri, EMOJI_BUG)
    line1 = EMOJI_BUG.splitlines()[1]
    emoji_end = len(line1[:line1.index("'", 9) + 1].encode("utf-8"))  # after "r = '😀'"
    rng = types.Range(start=types.Position(line=1, character=emoji_end), end=types.Position(line=1, character=emoji_end))
    actions = await utf8_client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), range=rng,
        context=types.CodeActionContext(diagnostics=[])))
    assert actions[0].command.arguments[0]["range"]["start"] == {"line": 1, "character": emoji_end}
    # a character typed after the emoji lands in the server's mirror where the client put it:
    # a range past the end of line 1 is clamped to the line's new length, in UTF-8 bytes
    at = EMOJI_BUG.index("; return")
    utf8_client.editor.type(uri, at, "!")
    typed = utf8_client.editor.text(uri)
    assert typed[at] == "!"
    far = types.Position(line=1, character=999)
    actions = await utf8_client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), range=types.Range(start=far, end=far),
        context=types.CodeActionContext(diagnostics=[])))
    new_line1 = typed.splitlines()[1]
    assert actions[0].command.arguments[0]["range"]["start"] == {"line": 1, "character": len(new_line1.encode("utf-8"))}


# Correct code the embedded model keeps at line 3 (the CLI's exit status 8 in tests/test_edit_cli.py).
GREET = "def greet(name):\n    \"\"\"Say hello.\"\"\"\n    print('Hello, ' + name)\n"


async def test_an_ai_fix_that_finds_no_fix_says_why_and_what_fits(client: LanguageClient, workspace: Path):
    """The CLI's no fix (exit 8) in the editor: the document is left as it is, and the message
    says where and why the model kept the code, and what to try: an instruction built from the
    line (a print line: no loop named), and the editor's controls, not the CLI's flags."""
    if not client.profile.startswith("visual"):
        pytest.skip("one run is enough")
    editor: Editor = client.editor
    uri = uri_of(workspace, "program/no_fix.py", GREET)
    editor.open(uri, GREET)
    outcome = await execute(client, {"uri": uri, "range": None, "instruction": None, "kind": "fix",
                                     "focus": {"line": 2, "character": 4, "source": "cursor"}})
    if outcome["summary"] and outcome["summary"]["changed"]:
        pytest.skip(f"the model changed the code here: {outcome['summary']}")
    assert outcome["status"] == "unchanged", outcome
    message = outcome["message"]
    assert message.startswith("AI fix: no fix found: the model kept") and "line 3" in message, message
    assert 'e.g. "line 3: what is wrong and what it should do"' in message and "loop" not in message
    assert "--candidates" not in message and "checkCommand" in message and message in messages(client)
    assert editor.text(uri) == GREET  # (a streamed edit's ops may have been sent and written back)


# A bug 4 lines above the cursor, which sits on a comment beyond the localizer's window: the model
# fixes the bug anyway, and the fix is held as far from where the user pointed
# (engine.checks.guards.far_from_focus; the CLI's exit 4).
NOTES = ("def add(a, b):\n    return a - b\n# Notes on add: it adds two numbers\n# and returns their sum, the one\n"
         "# thing this module is for,\n# and nothing else.\n")


async def test_a_fix_far_from_the_cursor_goes_to_review(client: LanguageClient, workspace: Path, engine):
    """VS Code gets the fix as a preview annotated needsConfirmation, saying where it edits; Neovim
    0.7 a message and the edit on applyPending. Nothing is applied without the user's word."""
    editor: Editor = client.editor
    want = engine.edit(EditRequest(NOTES, "Fix the bug", mode="program", max_new_tokens=48, language="python",
                                   focus_line=6))
    if want.output_text != NOTES.replace("a - b", "a + b"):
        pytest.skip(f"the model no longer fixes line 2 from a cursor on line 6: {want.summary()['program']}")
    uri = uri_of(workspace, f"cold/far_{client.profile[:6]}.py")
    editor.open(uri, NOTES)
    outcome = await execute(client, {"uri": uri, "range": None, "instruction": None, "kind": "fix",
                                     "focus": {"line": 5, "character": 2, "source": "cursor"}})
    where = "it edits lines 2-2, far from line 6 where you pointed"
    assert outcome["farFromFocus"] == {"lines": [2, 2], "focus": 6, "radius": 3}, outcome
    if client.profile.startswith("visual"):
        assert outcome["status"] == "done" and "after review" in outcome["message"] and where in outcome["message"]
        *_, sent = editor.sent[uri]  # the preview comes last
        (annotated,) = sent.document_changes[0].edits
        note = sent.change_annotations[annotated.annotation_id]
        assert note.needs_confirmation is True and where in note.label
        assert editor.text(uri) == want.output_text  # the test editor confirms the preview
        return
    assert outcome["status"] == "pending" and where in outcome["message"], outcome
    assert editor.text(uri) == NOTES, "the far fix was applied without the user's word"
    applied = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="copyAsDecode.server.applyPending", arguments=[{"uri": uri}]))
    assert applied["status"] == "done" and editor.text(uri) == want.output_text, applied
