"""An answer that names several files, through the real language server (a ``python -m lsp_server``
process driven by pytest-lsp as VS Code drives it): ``copyAsDecode.server.applyUpdate`` with such
an answer sends ONE ``workspace/applyEdit`` holding every file's change, each annotated for review
(needsConfirmation), and sends nothing when one chunk cannot be placed. Apply's default mode is
the aligner's merge, so no model loads (warm-ups are off)."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest
import pytest_lsp
from lsp_client_positions import client_offset
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(120)]

APPLY_CMD = "copyAsDecode.server.applyUpdate"
F = "```"
APP = "def add(a, b):\n    return a - b\n\n\ndef sub(a, b):\n    return a - b\n"
GO = "package calc\n\nfunc Mul(a, b int) int {\n\treturn a + b\n}\n"
CONF = "name = 'calc'\nversion = 1\ndebug = True\n"
FILES = {"src/app.py": APP, "calc/mul.go": GO, "conf.py": CONF}
APP_BLOCK = f"`src/app.py`\n{F}python\ndef add(a, b):\n    return a + b\n# ... rest of the file unchanged ...\n{F}\n"
NOWHERE = (f"**src/app.py**\n{F}python\ndef add(a, b):\n    return a + b\n# ... existing code ...\n"
           f"def zzz():\n    totally_new()\n# ... existing code ...\n{F}\n")
ANSWER = (f"Three changes.\n\n{APP_BLOCK}\n{F}go calc/mul.go\npackage calc\n\nfunc Mul(a, b int) int {{\n"
          f"\treturn a * b\n}}\n{F}\n\n{F}diff\n--- a/conf.py\n+++ b/conf.py\n@@ -1,3 +1,3 @@\n name = 'calc'\n"
          f"-version = 1\n+version = 2\n debug = True\n{F}\n")
MERGED = {"src/app.py": APP.replace("a - b", "a + b", 1), "calc/mul.go": GO.replace("a + b", "a * b"),
          "conf.py": CONF.replace("version = 1", "version = 2")}

SERVER = ClientServerConfig(
    server_command=[sys.executable, "-m", "lsp_server"],
    server_env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONUNBUFFERED": "1"},
)


class Editor:
    """Documents as VS Code holds them: a workspace edit applies to every document it names or,
    when any version is stale or a file to create exists, to none; a ``CreateFile`` makes the
    file (empty, its folders too) on disk, as VS Code does; a file that is not open is opened
    from disk (and left unsaved, as VS Code leaves it); each changed open document is reported
    back with didChange."""

    def __init__(self, client: LanguageClient):
        self.client = client
        self.docs: dict[str, list] = {}
        self.sent: list[types.WorkspaceEdit] = []
        self.status: list[str] = []  # the status bar's states, in order (``loading``: a model load began)

    def open(self, uri: str, text: str, language: str) -> None:
        self.docs[uri] = [text, 1]
        self.client.text_document_did_open(types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id=language, version=1, text=text)))

    def apply(self, params: types.ApplyWorkspaceEditParams) -> types.ApplyWorkspaceEditResult:
        self.sent.append(params.edit)
        operations = list(params.edit.document_changes or [])
        creates = [op for op in operations if isinstance(op, types.CreateFile)]
        changes = [op for op in operations if isinstance(op, types.TextDocumentEdit)]
        assert len(creates) + len(changes) == len(operations), "only CreateFile and TextDocumentEdit are sent"
        for create in creates:
            path = Path(create.uri.removeprefix("file://"))
            if path.exists() and not (create.options and (create.options.overwrite or create.options.ignore_if_exists)):
                return types.ApplyWorkspaceEditResult(applied=False, failure_reason=f"{path} exists")
        for change in changes:
            uri, version = change.text_document.uri, change.text_document.version
            if version is not None and (uri not in self.docs or version != self.docs[uri][1]):
                return types.ApplyWorkspaceEditResult(applied=False, failure_reason=f"{uri} is not at {version}")
        for create in creates:
            path = Path(create.uri.removeprefix("file://"))
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("")
        for change in changes:
            uri = change.text_document.uri
            if uri not in self.docs:
                self.docs[uri] = [Path(uri.removeprefix("file://")).read_text(), 0]
        for change in changes:
            uri = change.text_document.uri
            text, version = self.docs[uri]
            for edit in sorted(change.edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
                start, end = client_offset(text, edit.range.start), client_offset(text, edit.range.end)
                text = text[:start] + edit.new_text + text[end:]
            self.docs[uri] = [text, version + 1]
            if version == 0:  # opened for this edit: the server never saw it open
                continue
            self.client.text_document_did_change(types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version + 1),
                content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)]))
        return types.ApplyWorkspaceEditResult(applied=True)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("ws")
    (root / ".copy-as-decode.toml").write_text('warm_up = "off"\n')
    return root


def attach(lsp_client: LanguageClient) -> Editor:
    """The client-side handlers VS Code has (pytest-lsp has no default for these)."""
    editor = Editor(lsp_client)
    lsp_client.editor = editor  # type: ignore[attr-defined]

    @lsp_client.feature(types.WORKSPACE_APPLY_EDIT)
    def apply_edit(params: types.ApplyWorkspaceEditParams):
        return editor.apply(params)

    @lsp_client.feature(types.CLIENT_REGISTER_CAPABILITY)
    def register_capability(params: types.RegistrationParams) -> None:
        """VS Code accepts the server's registration for configuration changes."""

    @lsp_client.feature("copyAsDecode/status")
    def status(params) -> None:
        """The status bar item: its states recorded (``editor.status``)."""
        editor.status.append(params.state)

    lsp_client.set_configuration({"copyAsDecode": {}})
    return editor


def initialize(workspace: Path, capabilities: types.ClientCapabilities,
               client: types.ClientInfo | None = None) -> types.InitializeParams:
    return types.InitializeParams(capabilities=capabilities, root_uri=workspace.as_uri(), client_info=client,
                                  workspace_folders=[types.WorkspaceFolder(uri=workspace.as_uri(), name="ws")])


@pytest_lsp.fixture(config=SERVER, scope="module")
async def client(lsp_client: LanguageClient, workspace: Path):
    attach(lsp_client)
    await lsp_client.initialize_session(initialize(workspace, client_capabilities("visual-studio-code")))
    yield
    await lsp_client.shutdown_session()


def without_create() -> types.ClientCapabilities:
    """VS Code's capabilities, less its resource operations (a client that cannot create files)."""
    capabilities = client_capabilities("visual-studio-code")
    capabilities.workspace.workspace_edit.resource_operations = None
    return capabilities


@pytest_lsp.fixture(config=SERVER, scope="module")
async def plain_client(lsp_client: LanguageClient, workspace: Path):
    attach(lsp_client)
    await lsp_client.initialize_session(initialize(workspace, without_create()))
    yield
    await lsp_client.shutdown_session()


@pytest_lsp.fixture(config=SERVER, scope="module")
async def old_neovim(lsp_client: LanguageClient, workspace: Path):
    """Neovim 0.7 as it introduces itself: "create" listed, but no folder made for a new file."""
    attach(lsp_client)
    await lsp_client.initialize_session(initialize(workspace, client_capabilities("neovim@v0.7"),
                                                   types.ClientInfo(name="Neovim", version="0.7.2")))
    yield
    await lsp_client.shutdown_session()


def project(workspace: Path, name: str, editor: Editor) -> dict[str, str]:
    """The three files in a folder of their own, open in the editor (conf.py on disk only); their URIs."""
    uris = {}
    for path, text in FILES.items():
        file = workspace / name / path
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(text)
        uris[path] = file.as_uri()
        if path != "conf.py":
            editor.open(file.as_uri(), text, "go" if path.endswith(".go") else "python")
    return uris


async def apply_update(client: LanguageClient, argument: dict) -> dict:
    return await asyncio.wait_for(client.workspace_execute_command_async(
        types.ExecuteCommandParams(command=APPLY_CMD, arguments=[argument])), 60)


async def test_a_three_file_answer_is_one_workspace_edit_for_review(client: LanguageClient, workspace: Path):
    editor: Editor = client.editor  # type: ignore[attr-defined]
    (workspace / "one").mkdir()
    (workspace / "one" / ".copy-as-decode.toml").write_text('warm_up = "off"\n')
    uris = project(workspace, "one", editor)
    answer = ANSWER.replace("src/app.py", "one/src/app.py").replace("calc/mul.go", "one/calc/mul.go").replace(
        "a/conf.py", "a/one/conf.py").replace("b/conf.py", "b/one/conf.py")
    outcome = await apply_update(client, {"uri": uris["src/app.py"], "update": answer})
    assert outcome["status"] == "done", outcome
    assert outcome["editsApplied"] == 3 and "3 file(s) changed" in outcome["message"]
    (edit,) = editor.sent
    assert edit.change_annotations and all(a.needs_confirmation for a in edit.change_annotations.values())
    assert len(edit.document_changes) == 3
    assert all(isinstance(e, types.AnnotatedTextEdit) for change in edit.document_changes for e in change.edits)
    versions = {change.text_document.uri: change.text_document.version for change in edit.document_changes}
    assert versions == {uris["src/app.py"]: 1, uris["calc/mul.go"]: 1, uris["conf.py"]: None}  # conf.py: not open
    for path in FILES:
        assert editor.docs[uris[path]][0] == MERGED[path]
        assert (workspace / "one" / path).read_text() == FILES[path]  # the buffers changed; saving is the user's
    assert [f["status"] for f in outcome["summary"]["files"]] == ["write", "write", "write"]


async def test_one_unplaceable_chunk_leaves_all_three_untouched(client: LanguageClient, workspace: Path):
    editor: Editor = client.editor  # type: ignore[attr-defined]
    editor.sent.clear()
    uris = project(workspace, "two", editor)
    answer = ANSWER.replace(APP_BLOCK, NOWHERE).replace("src/app.py", "two/src/app.py").replace(
        "calc/mul.go", "two/calc/mul.go").replace("a/conf.py", "a/two/conf.py").replace("b/conf.py", "b/two/conf.py")
    outcome = await apply_update(client, {"uri": uris["src/app.py"], "update": answer})
    assert outcome["status"] == "unplaced", outcome
    assert "two/src/app.py: could not place update lines 4-5" in outcome["message"]
    assert editor.sent == []
    for path, text in FILES.items():
        assert (workspace / "two" / path).read_text() == text
        if path != "conf.py":
            assert editor.docs[uris[path]] == [text, 1]


async def test_a_path_outside_the_workspace_is_refused(client: LanguageClient, workspace: Path):
    editor: Editor = client.editor  # type: ignore[attr-defined]
    editor.sent.clear()
    uris = project(workspace, "three", editor)
    answer = f"`../escape.py`\n{F}python\nx = 1\n{F}\n"
    outcome = await apply_update(client, {"uri": uris["src/app.py"], "update": answer})
    assert outcome["status"] == "error" and "climbs out of the root" in outcome["message"], outcome
    assert editor.sent == [] and not (workspace.parent / "escape.py").exists()


async def test_an_answers_one_block_for_the_document_streams_in_as_its_update(client: LanguageClient,
                                                                               workspace: Path):
    """A chat block headed by the document's own name (folders left out) is that document's
    update: applied as any apply (edits into the buffer), not as a workspace edit for review."""
    editor: Editor = client.editor  # type: ignore[attr-defined]
    editor.sent.clear()
    uris = project(workspace, "four", editor)
    answer = f"Fixed:\n\n{F}python app.py\ndef add(a, b):\n    return a + b\n# ... rest of the file unchanged ...\n{F}\n"
    outcome = await apply_update(client, {"uri": uris["src/app.py"], "update": answer})
    assert outcome["status"] == "done", outcome
    assert editor.docs[uris["src/app.py"]][0] == MERGED["src/app.py"]
    assert editor.sent and not any(edit.change_annotations for edit in editor.sent)  # the streamed apply's edits


NEW_MODULE = "def double(x):\n    return 2 * x\n"


def with_new_file(name: str, new: str) -> str:
    """An answer for project ``name``: app.py's change, and a whole new file ``new`` (no markers)."""
    return APP_BLOCK.replace("src/app.py", f"{name}/src/app.py") + f"\n{F}python {name}/{new}\n{NEW_MODULE}{F}\n"


async def test_a_new_file_is_created_in_the_same_edit_for_review(client: LanguageClient, workspace: Path):
    """A client that lists "create" gets one edit: the CreateFile (its folder made as VS Code makes
    it), then every file's text, all under the one annotation that needs confirmation."""
    editor: Editor = client.editor  # type: ignore[attr-defined]
    editor.sent.clear()
    uris = project(workspace, "five", editor)
    new = workspace / "five" / "src" / "lib" / "helpers.py"
    outcome = await apply_update(client, {"uri": uris["src/app.py"], "update": with_new_file("five", "src/lib/helpers.py")})
    assert outcome["status"] == "done", outcome
    assert outcome["editsApplied"] == 2 and "five/src/lib/helpers.py (new)" in outcome["message"]
    (edit,) = editor.sent
    create, *changes = edit.document_changes
    assert isinstance(create, types.CreateFile) and create.uri == new.as_uri()
    assert create.options.overwrite is False and create.options.ignore_if_exists is False
    (annotation,) = edit.change_annotations
    assert create.annotation_id == annotation and edit.change_annotations[annotation].needs_confirmation
    assert all(isinstance(c, types.TextDocumentEdit) for c in changes) and len(changes) == 2
    assert all(e.annotation_id == annotation for c in changes for e in c.edits)
    assert {c.text_document.uri: c.text_document.version for c in changes} == {uris["src/app.py"]: 1,
                                                                              new.as_uri(): None}
    assert editor.docs[new.as_uri()][0] == NEW_MODULE and new.read_text() == ""  # the buffer, unsaved
    assert editor.docs[uris["src/app.py"]][0] == MERGED["src/app.py"]
    assert [(f["path"], f["created"]) for f in outcome["summary"]["files"]] == [
        ("five/src/app.py", False), ("five/src/lib/helpers.py", True)]


async def test_a_client_that_cannot_create_files_is_told_which_and_why(plain_client: LanguageClient,
                                                                       workspace: Path):
    editor: Editor = plain_client.editor  # type: ignore[attr-defined]
    uris = project(workspace, "six", editor)
    outcome = await apply_update(plain_client, {"uri": uris["src/app.py"], "update": with_new_file("six", "src/new.py")})
    assert outcome["status"] == "error", outcome
    assert "six/src/new.py: no such file under" in outcome["message"]
    assert "cannot create it" in outcome["message"] and "resourceOperations" in outcome["message"]
    assert editor.sent == [] and not (workspace / "six" / "src" / "new.py").exists()
    assert editor.docs[uris["src/app.py"]] == [APP, 1]


async def test_a_new_file_outside_the_workspace_is_refused(client: LanguageClient, workspace: Path,
                                                           tmp_path_factory):
    """Created files stay inside the folder: a path that climbs out, or a folder that is a
    symbolic link to elsewhere, is refused and nothing is created nor changed."""
    editor: Editor = client.editor  # type: ignore[attr-defined]
    editor.sent.clear()
    uris = project(workspace, "seven", editor)
    outside = tmp_path_factory.mktemp("outside")
    (workspace / "seven" / "out").symlink_to(outside, target_is_directory=True)
    linked = await apply_update(client, {"uri": uris["src/app.py"], "update": with_new_file("seven", "out/new.py")})
    assert linked["status"] == "error" and "seven/out/new.py leads outside the root" in linked["message"], linked
    climbing = await apply_update(client, {"uri": uris["src/app.py"], "update": with_new_file("seven", "../new.py")})
    assert climbing["status"] == "error" and "climbs out of the root" in climbing["message"], climbing
    assert editor.sent == [] and list(outside.iterdir()) == [] and not (workspace / "new.py").exists()
    assert editor.docs[uris["src/app.py"]] == [APP, 1]


async def test_neovim_0_7_creates_a_file_only_in_a_folder_that_exists(old_neovim: LanguageClient, workspace: Path):
    """Neovim 0.7 lists "create" but opens the new file without making its folder (an error
    there), so a new file in a new folder is refused; one beside existing files is created."""
    editor: Editor = old_neovim.editor  # type: ignore[attr-defined]
    uris = project(workspace, "eight", editor)
    refused = await apply_update(old_neovim, {"uri": uris["src/app.py"],
                                              "update": with_new_file("eight", "src/lib/helpers.py")})
    assert refused["status"] == "error" and "create the folder first" in refused["message"], refused
    assert editor.sent == [] and not (workspace / "eight" / "src" / "lib").exists()
    done = await apply_update(old_neovim, {"uri": uris["src/app.py"], "update": with_new_file("eight", "src/helpers.py")})
    assert done["status"] == "done", done
    (edit,) = editor.sent
    assert isinstance(edit.document_changes[0], types.CreateFile) and not edit.change_annotations  # no review there
    assert editor.docs[(workspace / "eight" / "src" / "helpers.py").as_uri()][0] == NEW_MODULE
