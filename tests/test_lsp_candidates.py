"""A checked AI fix through the real language server (pytest-lsp, VS Code's capabilities, the
embedded model): with ``checkCommand`` in the user's settings the fix writes only a candidate the
check passes, writes nothing when none passes and says so, stops within 0.5 s when cancelled
during a running check (its process killed, the buffer as it was), offers the other candidates as
"AI fix: next candidate", and a workspace file cannot put another command in its place.

The one check command (user level) is ``python check.py {file}``, run in the workspace folder; the
name of the document picks what ``check.py`` does with the candidate (``CHECK``).
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient, client_capabilities
from support import ADD as BUGGY
from support import wait_until
from test_lsp_server import SERVER, Editor, _attach_editor, execute, messages, progress_of, uri_of

pytestmark = [pytest.mark.model, pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(300)]

FIX = "Fix: add must return the sum of a and b"
IS_EVEN = "def is_even(n):\n    return n % 2 == 1\n"  # two distinct fixes among the candidates
MEAN = "def mean(xs):\n    total = 0\n    for x in xs:\n        total += x\n    return total / (len(xs) - 1)\n"
NEXT = "copyAsDecode.server.nextCandidate"
CANCEL = "copyAsDecode.server.cancel"
CHECK = """\
import os, pathlib, sys, time
path = pathlib.Path(sys.argv[1])
name, text = path.name, path.read_text()
if name.startswith("fail_"):
    print("AssertionError: add(2, 3) returned -1, expected 5")
    sys.exit(1)
if name.startswith("sleep_"):
    pathlib.Path("sleeping.pid").write_text(str(os.getpid()))
    time.sleep(60)
if name.startswith("next_") and not pathlib.Path("next.slow").exists():
    pathlib.Path("next.slow").write_text("")
    time.sleep(5)  # the first check: slow enough that the other candidates decode meanwhile
if name.startswith("pass_"):
    scope = {}
    exec(text, scope)
    sys.exit(0 if scope["add"](2, 3) == 5 else 1)
sys.exit(0)  # any candidate passes
"""
# Written by a check command a workspace file names (it must never run).
EVIL = "import pathlib; pathlib.Path('evil.ran').write_text('the workspace ran a command')\n"


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("checked")
    (root / ".copy-as-decode.toml").write_text("max_new_tokens = 48\ncandidates = 3\nwarm_up = \"off\"\n")
    (root / "check.py").write_text(CHECK)
    (root / "evil.py").write_text(EVIL)
    (root / "many").mkdir()
    (root / "many" / ".copy-as-decode.toml").write_text("candidates = 6\n")
    (root / "evil").mkdir()
    (root / "evil" / ".copy-as-decode.toml").write_text(f'check_command = "{sys.executable} ../evil.py"\n')
    return root


@pytest_lsp.fixture(config=SERVER, scope="module")
async def client(lsp_client: LanguageClient, workspace: Path):
    _attach_editor(lsp_client, "visual-studio-code")
    lsp_client.set_configuration({"copyAsDecode": {}})
    await lsp_client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"),
        root_uri=workspace.as_uri(),
        workspace_folders=[types.WorkspaceFolder(uri=workspace.as_uri(), name="checked")],
        initialization_options={"copyAsDecode": {"checkCommand": f"{sys.executable} check.py {{file}}"}},
    ))
    yield
    await lsp_client.shutdown_session()


def fix(uri: str, instruction: str = FIX) -> dict:
    return {"uri": uri, "range": None, "instruction": instruction, "kind": "fix",
            "focus": {"line": 1, "character": 4, "source": "cursor"}}


async def actions(client: LanguageClient, uri: str) -> list[types.CodeAction]:
    cursor = types.Range(start=types.Position(line=1, character=4), end=types.Position(line=1, character=4))
    return await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), range=cursor,
        context=types.CodeActionContext(diagnostics=[])))


async def test_a_passing_check_writes_its_candidate(client: LanguageClient, workspace: Path):
    editor: Editor = client.editor
    uri = uri_of(workspace, "pass_add.py", BUGGY)
    editor.open(uri, BUGGY)
    outcome = await execute(client, fix(uri))
    assert outcome["status"] == "done", outcome
    scope: dict = {}
    exec(editor.text(uri), scope)
    assert scope["add"](2, 3) == 5
    assert editor.history[uri] == [editor.text(uri)]  # one edit: the passing candidate, nothing streamed
    assert (workspace / "pass_add.py").read_text() == BUGGY  # the buffer is edited, the file is not
    checked = [c for c in outcome["candidates"] if c["check"] is not None]
    assert checked and checked[-1]["check"]["passed"]
    assert all(not c["check"]["passed"] for c in checked[:-1])
    begin, *reports, end = progress_of(client, "AI fix")[-1]
    assert begin.cancellable and any("checking" in (r.message or "") for r in reports)
    assert isinstance(end, types.WorkDoneProgressEnd)


async def test_a_failing_check_writes_nothing_and_says_so(client: LanguageClient, workspace: Path):
    editor: Editor = client.editor
    uri = uri_of(workspace, "fail_add.py", BUGGY)
    editor.open(uri, BUGGY)
    outcome = await execute(client, fix(uri))
    assert outcome["status"] == "unverified", outcome
    assert "no verified fix found" in outcome["message"] and "nothing was written" in outcome["message"]
    assert "AssertionError: add(2, 3) returned -1" in outcome["message"]  # the best candidate's check output
    distinct = [c for c in outcome["candidates"] if c["changed"] and not c["refused"]]
    assert len({c["program"] for c in distinct}) == len(distinct)  # distinct, each checked
    assert all(c["check"] is not None for c in distinct)
    if len(distinct) == 3:  # the workspace asks for 3
        assert "(3 distinct candidates" in outcome["message"], outcome["message"]
    else:  # the model had no third in its budget (3 x 4 decodes): the message says so and counts the others
        assert f"the model had no {('', 'second', 'third')[len(distinct)]} in 12 decodes (" in outcome["message"]
    assert editor.text(uri) == BUGGY and not editor.sent[uri]  # not one applyEdit
    assert any("no verified fix found" in m.message for m in client.messages)
    assert all(not c["check"]["passed"] for c in outcome["candidates"] if c["check"])
    assert not [a for a in await actions(client, uri) if a.title.startswith("AI fix: next")]


@pytest.mark.parametrize("how", ["command", "progress"])
async def test_a_cancel_during_the_check_ends_the_fix_at_once(client: LanguageClient, workspace: Path, how: str):
    """Neovim's users run the cancel command; VS Code cancels from the progress bar."""
    editor: Editor = client.editor
    uri = uri_of(workspace, f"sleep_add_{how}.py", BUGGY)
    editor.open(uri, BUGGY)
    pid_file = workspace / "sleeping.pid"
    pid_file.unlink(missing_ok=True)
    running = asyncio.ensure_future(execute(client, fix(uri)))

    async def sleeping() -> bool:
        return pid_file.exists() and pid_file.read_text().isdigit()

    await wait_until(sleeping, "the check to start", client, timeout=240)
    pid = int(pid_file.read_text())
    started = time.monotonic()
    if how == "command":
        await client.workspace_execute_command_async(types.ExecuteCommandParams(command=CANCEL,
                                                                                arguments=[{"uri": uri}]))
    else:
        token = next(token for token, values in client.progress_reports.items()
                     if getattr(values[0], "title", "") == "AI fix"
                     and not isinstance(values[-1], types.WorkDoneProgressEnd))
        client.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token=token))
    outcome = await asyncio.wait_for(running, 5)
    elapsed = time.monotonic() - started
    assert outcome["status"] == "cancelled", outcome
    print(f"cancel ({how}) answered in {elapsed:.3f} s")
    assert elapsed < 0.5, f"the fix ended {elapsed:.2f} s after the cancel"
    assert editor.text(uri) == BUGGY and not editor.sent[uri]
    # The answer does not wait for the kill: the check's runner polls for the cancel every
    # engine.candidates.check.POLL_S on a worker thread, which a loaded CPU may schedule late.
    deadline = time.monotonic() + 1.0
    while _alive(pid) and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    assert not _alive(pid), "the check's process outlived the cancel by more than a second"


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie waiting for its reaper does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (FileNotFoundError, IndexError):
        return False
    except OSError:  # pragma: no cover - no /proc: ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True


async def test_the_next_candidate_replaces_the_written_one(client: LanguageClient, workspace: Path):
    editor: Editor = client.editor
    uri = uri_of(workspace, "many/next_is_even.py", IS_EVEN)
    editor.open(uri, IS_EVEN)
    outcome = await execute(client, fix(uri, "Fix the bug"))
    assert outcome["status"] == "done", outcome
    first = editor.text(uri)
    offered = [a for a in await actions(client, uri) if a.title.startswith("AI fix: next candidate")]
    others = [c for c in outcome["candidates"] if c["changed"] and not c["refused"]]
    if len(others) < 2:  # the engine drops duplicates: two changed candidates are two fixes
        pytest.skip(f"the model gave one changed candidate here: {outcome['candidates']}")
    (action,) = offered
    total = int(action.title.split(" of ")[1].rstrip(")"))
    assert action.title == f"AI fix: next candidate (2 of {total})"
    answer = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command=action.command.command, arguments=action.command.arguments))
    assert answer["status"] == "done", answer
    second = editor.text(uri)
    assert second not in (first, IS_EVEN)
    # the turn comes back round to the first candidate
    for _ in range(total - 1):
        (action,) = [a for a in await actions(client, uri) if a.title.startswith("AI fix: next candidate")]
        await client.workspace_execute_command_async(types.ExecuteCommandParams(
            command=action.command.command, arguments=action.command.arguments))
    assert editor.text(uri) == first
    editor.type(uri, 0, "# typed\n")  # a change of the user's: the offer is gone

    async def gone() -> bool:
        return not [a for a in await actions(client, uri) if a.title.startswith("AI fix: next")]

    await wait_until(gone, "the offer to go", client)
    answer = await client.workspace_execute_command_async(types.ExecuteCommandParams(command=NEXT,
                                                                                     arguments=[{"uri": uri}]))
    assert answer["status"] == "error" and "no other candidate" in answer["message"]


async def test_a_fix_that_changes_nothing_says_so(client: LanguageClient, workspace: Path):
    """Every candidate wrote the code back: no fix found, where and why the model kept it, what
    to try; nothing was checked and nothing written."""
    editor: Editor = client.editor
    uri = uri_of(workspace, "fail_mean.py", MEAN)
    editor.open(uri, MEAN)
    outcome = await execute(client, fix(uri, "Fix the bug"))
    if any(c["changed"] for c in outcome["candidates"]):
        pytest.skip(f"the model changed the code here: {outcome['candidates']}")
    assert outcome["status"] == "unchanged", outcome
    message = outcome["message"]
    assert message.startswith("AI fix: no fix found: the model") and "Try more candidates" in message
    assert "instruction that names the problem" in message and message in messages(client)
    assert editor.text(uri) == MEAN and not editor.sent[uri]
    assert all(c["check"] is None for c in outcome["candidates"])


async def test_a_workspace_file_cannot_set_the_check_command(client: LanguageClient, workspace: Path):
    editor: Editor = client.editor
    uri = uri_of(workspace, "evil/any_add.py", BUGGY)
    editor.open(uri, BUGGY)
    settings = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="copyAsDecode.server.settings", arguments=[{"uri": uri}]))
    assert settings["settings"]["checkCommand"] == f"{sys.executable} check.py {{file}}"  # the user's
    assert any("check_command is only read from user-level settings" in w for w in settings["warnings"])
    outcome = await execute(client, fix(uri))
    assert outcome["candidates"] is not None  # the user's check ran ...
    assert not (workspace / "evil.ran").exists()  # ... and never the workspace's
