"""The VS Code extension in a real VS Code: code-server 4.100.3 driven by headless Chromium.

What a user does, end to end: the extension (.vsix built from vscode-client/) is installed into a
throwaway code-server, a workspace holding buggy files is opened, a file is opened from the
explorer and "Copy-as-Decode: AI Fix" is run from the command palette (and "AI fix" from the
quick-fix menu, Ctrl+.). The extension starts the real language server (`python -m lsp_server`
with this test's interpreter), the server streams its edit into the editor, and the file (saved
by files.autoSave) must equal what the engine itself answers for the same request. A third file
lives in a folder whose `.copy-as-decode.toml` sets `apply_mode = "preview"`: there the edit
must open in VS Code's Refactor Preview (a WorkspaceEdit whose edits carry a change annotation
with needsConfirmation, which VS Code shows unticked), leave the file alone until the user ticks
the change and presses the preview's Apply button, and then land. A fourth file is
examples/buggy_add.py (def line, docstring, buggy `return a - b`) with the caret on the docstring,
one line above the bug: "AI fix" from the quick-fix menu must give the actual fix (`return a + b`,
def line and docstring kept), not merely whatever the engine computes. The client's initialize
request (logged with `copyAsDecode.trace.server: verbose`) must advertise
`workspace.workspaceEdit.changeAnnotationSupport`. A fifth step copies a chat model's fix for
examples/buggy_add.py (the docstring elided by `# ... existing code ...`) to the clipboard and runs
"Copy-as-Decode: Apply Clipboard": the file must end as the engine's merge. One code-server
session runs all five edits (the model loads once).

Set-up: scripts/vscode-deps.sh (apt: chromium and build headers, as root; code-server from npm
into ~/.cache/copy-as-decode). Without node/npm/chromium/code-server the tests skip, naming what
is missing; COPY_AS_DECODE_REQUIRE_VSCODE=1 turns those skips into failures (for CI).
Artifacts: artifacts/vscode-ai-fix.png (the editor after the edit), artifacts/vscode-preview.png
(the Refactor Preview before Apply), artifacts/vscode-e2e/ (driver output, code-server and
extension logs); docs/vscode-ai-fix.png and docs/vscode-preview.png are written when missing or
when COPY_AS_DECODE_UPDATE_DOCS=1.

`test_the_readme_leaves_the_server_settings_to_the_reference` and
`test_apply_clipboard_is_contributed_and_runs_the_servers_apply_command` are fast and need neither
Node nor the model (package.json and src/settings.ts are checked against the schema in
tests/test_settings_schema.py).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest
from support import ADD as BUGGY

ROOT = Path(__file__).resolve().parents[1]
CLIENT = ROOT / "vscode-client"
ARTIFACTS = ROOT / "artifacts"
DEPS_SCRIPT = ROOT / "scripts" / "vscode-deps.sh"
DRIVER = CLIENT / "test-e2e" / "drive.mjs"
EXAMPLE = ROOT / "examples" / "buggy_add.py"


INSTRUCTION = "Fix the bug"  # what the server uses for "AI fix" without diagnostics
CARET_ON = "return"          # each step clicks this line: "AI fix" sends it as the focus hint
FOCUS_LINE = 2               # ... which the server passes to the engine (1-based)
# Workspace settings (.vscode/settings.json): they reach the server through workspace/configuration
# (per-folder scope); the token budget bounds the CPU time of each edit. The embedded model
# fixes this bug in "speculative" (and "ar") mode in a few seconds; in "program" mode it does
# not close its program within the budget (the server then leaves the document unchanged).
MODE = os.environ.get("COPY_AS_DECODE_VSCODE_MODE", "speculative")
MAX_NEW_TOKENS = int(os.environ.get("COPY_AS_DECODE_VSCODE_MAX_NEW_TOKENS", "64"))
EDIT_TIMEOUT_S = 240         # per edit, from the trigger to the text on disk
READY_TIMEOUT_S = 150        # code-server up + extension activated + server started

PREVIEW_FOLDER = "review"    # its .copy-as-decode.toml sets apply_mode = "preview"
FILES = {"palette": "buggy.py", "quickfix": "quickfix.py", "preview": f"{PREVIEW_FOLDER}/preview.py",
         "near": "buggy_add.py", "apply": "apply_add.py"}
# The "apply" step: "Apply Clipboard" on examples/buggy_add.py with a chat model's fix on the clipboard.
APPLY_UPDATE = "def add(a, b):\n    # ... existing code ...\n    return a + b\n"
# The "near" step: examples/buggy_add.py with the caret on its docstring (line 2), next to the bug
# on line 3; the file must end up with the fix itself (tests/test_examples.py: the CLI's --focus 2).
NEAR_FIXED = 'def add(a, b):\n    """Return the sum of a and b."""\n    return a + b\n'
NEAR_CARET_ON = "Return the sum"
NEAR_FOCUS_LINE = 2

# The VS Code tests (set-up may install apt + npm packages); the settings mirror test is fast.
slow = [pytest.mark.slow, pytest.mark.timeout(1800)]


def _unavailable(reason: str) -> None:
    if os.environ.get("COPY_AS_DECODE_REQUIRE_VSCODE") == "1":
        pytest.fail(f"VS Code test prerequisites missing (COPY_AS_DECODE_REQUIRE_VSCODE=1): {reason}")
    pytest.skip(reason)


def _run(cmd: list[str], cwd: Path, timeout: float, what: str, env: dict | None = None) -> str:
    """Run a set-up command; on failure, fail the test with the command's output tail."""
    try:
        proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or b"")[-3000:] if isinstance(exc.stdout, bytes) else (exc.stdout or "")[-3000:]
        pytest.fail(f"{what} took more than {timeout:.0f} s: {' '.join(cmd)}\n{out}")
    if proc.returncode != 0:
        pytest.fail(f"{what} failed (exit {proc.returncode}): {' '.join(cmd)}\n"
                    f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc.stdout


@dataclass
class Node:
    node: str
    npm: str


@dataclass
class Tools(Node):
    code_server: str
    chromium: str


@pytest.fixture(scope="module")
def node_tools() -> Node:
    node, npm = shutil.which("node"), shutil.which("npm")
    if not node or not npm:
        _unavailable("node/npm not found: install Node 20 and npm to build and test the VS Code extension")
    major = subprocess.run([node, "-p", "process.versions.node.split('.')[0]"],
                           capture_output=True, text=True).stdout.strip()
    if major != "20":
        _unavailable(f"the VS Code client and code-server 4.100.3 need Node 20, found Node {major or '?'}")
    return Node(node, npm)


@pytest.fixture(scope="module")
def tools(node_tools: Node) -> Tools:
    """Chromium and code-server, installed by scripts/vscode-deps.sh (idempotent; apt as root)."""
    if not DEPS_SCRIPT.exists():
        _unavailable(f"{DEPS_SCRIPT} is missing")
    t0 = time.monotonic()
    proc = subprocess.run(["bash", str(DEPS_SCRIPT)], cwd=ROOT, capture_output=True, text=True, timeout=1200)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("CODE_SERVER=")]
    code_server = lines[-1].split("=", 1)[1] if lines else ""
    print(f"vscode-deps.sh: {time.monotonic() - t0:.1f} s", file=sys.stderr)
    if not code_server or not os.access(code_server, os.X_OK):
        _unavailable(f"code-server 4.100.3 could not be installed by scripts/vscode-deps.sh:\n{proc.stderr[-2000:]}")
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    if not os.access(chromium, os.X_OK):
        _unavailable("chromium not found (Debian: apt-get install chromium; scripts/vscode-deps.sh does it as root)")
    return Tools(node_tools.node, node_tools.npm, code_server, chromium)


@pytest.fixture(scope="module")
def client_deps(node_tools: Node) -> Path:
    """`npm ci` in vscode-client/ when package-lock.json changed since the last install."""
    lock = (CLIENT / "package-lock.json").read_bytes()
    stamp = CLIENT / "node_modules" / ".copy-as-decode-lock-sha256"
    want = hashlib.sha256(lock).hexdigest()
    if not stamp.exists() or stamp.read_text() != want:
        _run([node_tools.npm, "ci", "--no-audit", "--no-fund"], CLIENT, 900, "npm ci (vscode-client)")
        stamp.write_text(want)
    return CLIENT


@pytest.fixture(scope="module")
def vsix(tools: Tools, client_deps: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("vsix") / "copy-as-decode.vsix"
    _run([tools.npm, "exec", "--", "vsce", "package", "--allow-missing-repository", "--out", str(out)],
         CLIENT, 600, "vsce package")
    assert out.stat().st_size > 10_000, f"{out} is suspiciously small"
    return out


def test_the_readme_leaves_the_server_settings_to_the_reference() -> None:
    """vscode-client/README.md names the generated settings reference (docs/configuration.md)
    and lists only the extension's own settings, which package.json contributes besides the
    server's (tests/test_settings_schema.py checks package.json against the schema)."""
    readme = (CLIENT / "README.md").read_text()
    rows = set(re.findall(r"^\| `(copyAsDecode\.[\w.]+)` \|", readme, re.M))
    settings = json.loads((CLIENT / "package.json").read_text())["contributes"]["configuration"]["properties"]
    from engine.settings import SPECS

    server = {f"copyAsDecode.{spec.key}" for spec in SPECS.values()}
    assert "`docs/configuration.md`" in readme
    assert "](../" not in readme, "vsce cannot package a link outside the extension's folder"
    assert rows == set(settings) - server, "the README's table: exactly the extension's own settings"


def test_apply_clipboard_is_contributed_and_runs_the_servers_apply_command() -> None:
    """"Copy-as-Decode: Apply Clipboard" is in the palette, the extension registers it, and the
    server command it sends is the one the language server registers."""
    from lsp_server.actions import COMMAND_APPLY_UPDATE

    contributes = json.loads((CLIENT / "package.json").read_text())["contributes"]
    titles = {c["command"]: f"{c['category']}: {c['title']}" for c in contributes["commands"]}
    assert titles["copyAsDecode.applyClipboard"] == "Copy-as-Decode: Apply Clipboard"
    assert {"command": "copyAsDecode.applyClipboard", "when": "editorIsOpen"} in contributes["menus"]["commandPalette"]
    extension = (CLIENT / "src" / "extension.ts").read_text()
    assert re.search(r'registerCommand\("copyAsDecode\.applyClipboard", \(\) => applyClipboard\(\)\)', extension)
    assert re.search(r"sendEdit\(running, SERVER_APPLY_COMMAND, ", extension)
    settings = (CLIENT / "src" / "settings.ts").read_text()
    assert f'export const SERVER_APPLY_COMMAND = "{COMMAND_APPLY_UPDATE}";' in settings


@pytest.mark.editor
@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_extension_unit_tests(node_tools: Node, client_deps: Path) -> None:
    """`npm test` in vscode-client/: the client's pure logic (settings, status) under node:test."""
    out = _run([node_tools.npm, "test"], CLIENT, 600, "npm test (vscode-client)")
    assert "# fail 0" in out, out[-3000:]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_http(url: str, proc: subprocess.Popen, log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"code-server exited with {proc.returncode} before serving:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=5):
                return
        except urllib.error.HTTPError:
            return  # any HTTP answer (302 to the workbench) means it is serving
        except OSError:
            time.sleep(0.5)
    pytest.fail(f"code-server did not answer on {url} within {timeout:.0f} s:\n{log.read_text()[-3000:]}")


def _stop(proc: subprocess.Popen) -> None:
    """Stop code-server and everything it started (extension host, language server)."""
    if proc.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def _extension_logs(user_data: Path) -> str:
    """The Copy-as-Decode output channel (server stderr, client messages) as VS Code logged it."""
    parts = []
    for path in sorted((user_data / "logs").rglob("*Copy-as-Decode*")):
        parts.append(f"--- {path.relative_to(user_data)}\n{path.read_text(errors='replace')[-6000:]}")
    return "\n".join(parts) or "(no Copy-as-Decode log found)"


@pytest.fixture(scope="module")
def expected_fix(default_engine) -> str:
    """What the engine itself answers for the request the server makes for "AI fix" (whole
    document: the cursor is in a short file; no diagnostics: "Fix the bug"; the caret's line as
    the focus, from the palette and the quick-fix menu alike; the workspace's mode and token
    budget; the document's language, python). It must be a finished edit that changes the file: otherwise the server (rightly)
    leaves the document alone and the test could not tell an edit landed."""
    from engine.api import EditRequest

    result = default_engine.edit(EditRequest(text=BUGGY, instruction=INSTRUCTION, lines=None, mode=MODE,
                                             max_new_tokens=MAX_NEW_TOKENS, focus_line=FOCUS_LINE,
                                             language="python"))  # VS Code's languageId for the .py files
    assert result.stop_reason == "done" and result.output_text != BUGGY, (
        f"the engine's own answer ({MODE}, {MAX_NEW_TOKENS} tokens) is not a finished change: "
        f"stop_reason={result.stop_reason!r}, output={result.output_text!r}; the end-to-end test needs one "
        "(set COPY_AS_DECODE_VSCODE_MODE / COPY_AS_DECODE_VSCODE_MAX_NEW_TOKENS)")
    return result.output_text


PREVIEW_SETTINGS = f"""# Every AI edit in {PREVIEW_FOLDER}/ waits for confirmation in VS Code's Refactor Preview.
apply_mode = "preview"
"""


def _traced(log: str, what: str, method: str) -> list[dict]:
    """The params of every traced message ``what`` ("Sending request", "Received request") of
    ``method``, from the verbose LSP trace (copyAsDecode.trace.server) in the output channel."""
    out = []
    pattern = rf"{re.escape(what)} '{re.escape(method)} - \([^)]*\)'\.\s*Params: "  # ids: numbers or UUIDs
    for match in re.finditer(pattern, log):
        try:
            out.append(json.JSONDecoder().raw_decode(log[match.end():])[0])
        except ValueError:
            continue
    return out


@dataclass
class Workbench:
    """One code-server session's outcome: the driver's steps, the logs and the screenshots."""

    result: dict
    steps: dict[str, dict]
    log: str            # the whole Copy-as-Decode output channel (with the LSP trace)
    context: str        # tails of the driver and extension logs, for assertion messages
    shots: dict[str, Path]


@pytest.fixture(scope="module")
def workbench(tools: Tools, vsix: Path, expected_fix: str, tmp_path_factory: pytest.TempPathFactory) -> Workbench:
    """Run AI Fix four times in one code-server: palette, quick-fix menu, under preview, and from
    the quick-fix menu with the caret next to the bug (examples/buggy_add.py); then Apply
    Clipboard on examples/buggy_add.py."""
    tmp_path = tmp_path_factory.mktemp("code-server")
    timings: dict[str, float] = {}
    t_start = time.monotonic()
    ARTIFACTS.mkdir(exist_ok=True)
    out_dir = ARTIFACTS / "vscode-e2e"
    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir()

    workspace = tmp_path / "workspace"
    (workspace / PREVIEW_FOLDER).mkdir(parents=True)
    for kind, name in FILES.items():
        (workspace / name).write_text(BUGGY if kind not in ("near", "apply") else EXAMPLE.read_text())
    (workspace / PREVIEW_FOLDER / ".copy-as-decode.toml").write_text(PREVIEW_SETTINGS)
    (workspace / ".vscode").mkdir()
    (workspace / ".vscode" / "settings.json").write_text(json.dumps({
        "copyAsDecode.mode": MODE, "copyAsDecode.maxNewTokens": MAX_NEW_TOKENS}, indent=2))
    user_data, extensions = tmp_path / "user-data", tmp_path / "extensions"
    (user_data / "User").mkdir(parents=True)
    (user_data / "User" / "settings.json").write_text(json.dumps({
        "workbench.startupEditor": "none",
        "security.workspace.trust.enabled": False,
        "copyAsDecode.pythonPath": sys.executable,
        "copyAsDecode.trace.server": "verbose",  # the log shows the initialize and applyEdit params
        "files.autoSave": "afterDelay",
        "files.autoSaveDelay": 300,
        "extensions.ignoreRecommendations": True,
        "telemetry.telemetryLevel": "off",
        "update.mode": "none",
        "extensions.autoCheckUpdates": False,
        "extensions.autoUpdate": False,
        "workbench.tips.enabled": False,
        "git.enabled": False,
        "editor.minimap.enabled": False,
        "editor.fontSize": 15,
        "window.zoomLevel": 0,
    }, indent=2))
    env = dict(os.environ)
    env.update({
        "XDG_CONFIG_HOME": str(tmp_path / "xdg-config"),   # code-server's and chromium's, not the user's
        "XDG_DATA_HOME": str(tmp_path / "xdg-data"),
        "CS_DISABLE_GETTING_STARTED_OVERRIDE": "1",
        "HF_HUB_OFFLINE": "1",  # the server (started by the extension) inherits this environment
    })
    common = ["--user-data-dir", str(user_data), "--extensions-dir", str(extensions),
              "--config", str(tmp_path / "code-server.yaml")]

    t0 = time.monotonic()
    installed = _run([tools.code_server, *common, "--install-extension", str(vsix)], ROOT, 300,
                     "code-server --install-extension", env=env)
    assert "copy-as-decode" in installed.lower(), installed
    timings["install_extension_s"] = time.monotonic() - t0

    port = _free_port()
    log = out_dir / "code-server.log"
    shots = {"palette": ARTIFACTS / "vscode-ai-fix.png", "quickfix": out_dir / "quickfix.png",
             "preview": ARTIFACTS / "vscode-preview.png", "near": out_dir / "near.png",
             "apply": out_dir / "apply.png"}
    for shot in shots.values():
        shot.unlink(missing_ok=True)
    stdout = stderr = ""
    with open(log, "w") as log_file:
        proc = subprocess.Popen(
            [tools.code_server, *common, "--auth", "none", "--bind-addr", f"127.0.0.1:{port}",
             "--disable-telemetry", "--disable-update-check", "--disable-workspace-trust",
             "--disable-getting-started-override", str(workspace)],
            cwd=tmp_path, env=env, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        t0 = time.monotonic()
        _wait_http(f"http://127.0.0.1:{port}/", proc, log, 90)
        timings["code_server_up_s"] = time.monotonic() - t0

        config = {
            "url": f"http://127.0.0.1:{port}/?folder={workspace}",
            "chromium": tools.chromium,
            "workspace": str(workspace),
            "timeoutS": EDIT_TIMEOUT_S,
            "readyTimeoutS": READY_TIMEOUT_S,
            "failureScreenshot": str(out_dir / "failure.png"),
            "steps": [{"kind": kind, "file": FILES[kind], "caretOn": CARET_ON, "screenshot": str(shots[kind])}
                      for kind in ("palette", "quickfix", "preview")]
            # last, so that the cases above do not depend on it
            + [{"kind": "near", "trigger": "quickfix", "file": FILES["near"], "caretOn": NEAR_CARET_ON,
                "screenshot": str(shots["near"])},
               {"kind": "apply", "file": FILES["apply"], "caretOn": NEAR_CARET_ON, "clipboard": APPLY_UPDATE,
                "screenshot": str(shots["apply"])}],
        }
        config_path = out_dir / "drive.json"
        config_path.write_text(json.dumps(config, indent=2))
        t0 = time.monotonic()
        budget = READY_TIMEOUT_S + len(config["steps"]) * EDIT_TIMEOUT_S + 120
        drive_log = out_dir / "drive.log"  # written live: `tail -f` it while the test runs
        with open(drive_log, "w") as drive_err:
            try:
                drive = subprocess.run([tools.node, str(DRIVER), str(config_path)], cwd=CLIENT, env=env,
                                       stdout=subprocess.PIPE, stderr=drive_err, text=True, timeout=budget)
                stdout = drive.stdout
            except subprocess.TimeoutExpired as exc:
                stdout = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
                drive_err.write(f"\n[the driver ran past {budget} s and was stopped]\n")
        stderr = drive_log.read_text()
        timings["drive_s"] = time.monotonic() - t0
    finally:
        _stop(proc)  # also flushes VS Code's logs
        timings["total_s"] = time.monotonic() - t_start
        (out_dir / "timings.json").write_text(json.dumps(timings, indent=2))

    full_log = "\n".join(path.read_text(errors="replace")
                         for path in sorted((user_data / "logs").rglob("*Copy-as-Decode*")))
    ext_log = _extension_logs(user_data)
    (out_dir / "extension.log").write_text(full_log or ext_log)
    context = (f"\n--- driver (artifacts/vscode-e2e/drive.log)\n{stderr[-4000:]}"
               f"\n--- extension log (artifacts/vscode-e2e/extension.log)\n{ext_log[-6000:]}")
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    assert lines, f"the driver printed no result{context}"
    result = json.loads(lines[-1])
    steps = {step["kind"]: step for step in result["steps"]}
    timings.update({f"{kind}_edit_s": step["seconds"] for kind, step in steps.items()})
    (out_dir / "timings.json").write_text(json.dumps(timings, indent=2))
    print(f"vscode e2e timings: {json.dumps({k: round(v, 1) for k, v in timings.items()})}", file=sys.stderr)
    return Workbench(result, steps, full_log, context, shots)


def _finished_step(workbench: Workbench, kind: str, expected_fix: str, against: str = "the engine's answer") -> dict:
    step = workbench.steps.get(kind)
    if step is None:
        assert workbench.result["ok"], (f"driving the workbench failed before the {kind} step: "
                                        f"{workbench.result.get('error')}{workbench.context}")
    assert step is not None, f"the {kind} step did not run (an earlier step did not finish){workbench.context}"
    assert step["finished"], (f"AI fix via {kind} did not finish: {step['how']}; file now "
                              f"{step['text']!r}; notifications: {step.get('messages')}{workbench.context}")
    assert step["text"] == expected_fix, (
        f"AI fix via {kind}: the file differs from {against}\n"
        f"  file:     {step['text']!r}\n  expected: {expected_fix!r}{workbench.context}")
    return step


def _publish(shot: Path, name: str) -> None:
    """Copy a screenshot into docs/ when it is missing there or COPY_AS_DECODE_UPDATE_DOCS=1."""
    assert shot.exists(), f"no screenshot was written ({shot})"
    docs_shot = ROOT / "docs" / name
    if not docs_shot.exists() or os.environ.get("COPY_AS_DECODE_UPDATE_DOCS") == "1":
        docs_shot.parent.mkdir(exist_ok=True)
        shutil.copyfile(shot, docs_shot)


@pytest.mark.model
@pytest.mark.editor
@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_ai_fix_in_code_server(workbench: Workbench, expected_fix: str) -> None:
    """Palette and quick-fix menu: the streamed edit lands in the file as the engine answers it."""
    for kind in ("palette", "quickfix"):
        _finished_step(workbench, kind, expected_fix)
    # The palette sends what the quick-fix action does: the caret's line as the focus hint.
    commands = [p for p in _traced(workbench.log, "Sending request", "workspace/executeCommand")
                if p.get("command") == "copyAsDecode.server.edit"]
    palette = [p["arguments"][0] for p in commands if p["arguments"][0]["uri"].endswith(FILES["palette"])]
    assert palette, f"no copyAsDecode.server.edit for {FILES['palette']} in the trace{workbench.context}"
    assert palette[0]["kind"] == "fix" and palette[0]["focus"]["line"] == FOCUS_LINE - 1, palette[0]
    _publish(workbench.shots["palette"], "vscode-ai-fix.png")


@pytest.mark.model
@pytest.mark.editor
@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_ai_fix_preview_in_code_server(workbench: Workbench, expected_fix: str) -> None:
    """applyMode "preview" (from the folder's .copy-as-decode.toml): the edit opens in the Refactor
    Preview, the file stays as it was until Apply, then it holds the engine's answer."""
    step = workbench.steps.get("preview")
    preview = (step or {}).get("preview") or {}
    assert step is not None and preview.get("shown"), (
        f"no Refactor Preview for AI fix under applyMode preview: "
        f"{(step or {}).get('how', 'the step did not run')}{workbench.context}")
    assert preview["textWhileShown"] == BUGGY, (
        f"the edit reached the file before it was confirmed: {preview['textWhileShown']!r}{workbench.context}")
    assert any("preview.py" in entry for entry in preview["entries"]), (
        f"the Refactor Preview does not list the file: {preview['entries']}{workbench.context}")
    # needsConfirmation is what VS Code honours: such edits start unticked (the user opts in).
    assert preview["checkedBefore"] and not any(preview["checkedBefore"]), (
        f"the preview's changes were ticked before the user ticked them: {preview['checkedBefore']}")
    assert all(preview["checkedAfter"]), f"ticking the file did not tick its changes: {preview['checkedAfter']}"
    _finished_step(workbench, "preview", expected_fix)
    edits = _traced(workbench.log, "Received request", "workspace/applyEdit")
    confirmed = [e for e in edits
                 if any(a.get("needsConfirmation") for a in (e.get("edit", {}).get("changeAnnotations") or {}).values())]
    assert confirmed, (f"no workspace/applyEdit with a needsConfirmation change annotation in the trace "
                       f"({len(edits)} applyEdit requests){workbench.context}")
    for params in confirmed:
        for change in params["edit"].get("documentChanges", []):
            assert change["textDocument"]["uri"].endswith(FILES["preview"]), change
            assert all("annotationId" in edit for edit in change["edits"]), change
    _publish(workbench.shots["preview"], "vscode-preview.png")


@pytest.mark.model
@pytest.mark.editor
@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_client_advertises_change_annotations(workbench: Workbench) -> None:
    """The server may send needsConfirmation edits only to a client that says it supports change
    annotations; vscode-languageclient does, in the initialize request the trace shows."""
    sent = _traced(workbench.log, "Sending request", "initialize")
    assert sent, f"no initialize request in the trace{workbench.context}"
    params = sent[0]
    workspace_edit = params["capabilities"]["workspace"]["workspaceEdit"]
    assert workspace_edit.get("documentChanges") is True, workspace_edit
    assert "changeAnnotationSupport" in workspace_edit, workspace_edit


@pytest.mark.model
@pytest.mark.editor
@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_ai_fix_near_the_bug_in_code_server(workbench: Workbench) -> None:
    """The caret on the docstring of examples/buggy_add.py, one line above `return a - b`: "AI fix"
    from the quick-fix menu points the model at line 2 and the file gets the fix, with the def line
    and the docstring kept (the workspace's mode and token budget, as for the other steps)."""
    assert EXAMPLE.read_text() == NEAR_FIXED.replace("a + b", "a - b"), "the example no longer has its bug"
    assert "near" in workbench.steps, (f"the near step did not run: {workbench.result.get('error')} "
                                       f"(an earlier step did not finish?){workbench.context}")
    commands = [p["arguments"][0] for p in _traced(workbench.log, "Sending request", "workspace/executeCommand")
                if p.get("command") == "copyAsDecode.server.edit"
                and p["arguments"][0]["uri"].endswith("/" + FILES["near"])]
    assert commands, f"no copyAsDecode.server.edit for {FILES['near']} in the trace{workbench.context}"
    assert commands[0]["kind"] == "fix" and commands[0]["focus"]["line"] == NEAR_FOCUS_LINE - 1, (
        f"the caret was not on line {NEAR_FOCUS_LINE} (the docstring): {commands[0]}")
    _finished_step(workbench, "near", NEAR_FIXED, against="the fix (`return a + b`, def line and docstring kept)")


@pytest.mark.model
@pytest.mark.editor
@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_apply_clipboard_in_code_server(workbench: Workbench, default_engine) -> None:
    """"Copy-as-Decode: Apply Clipboard" from the palette merges the clipboard into the open file:
    the file ends as the engine's merge of the same request (examples/buggy_add.py fixed), and
    the server was asked through its apply command with the clipboard's text."""
    from lsp_server.actions import COMMAND_APPLY_UPDATE

    from engine.api import EditRequest
    from engine.settings import Settings

    merged = default_engine.edit(EditRequest.from_settings(
        Settings(), EXAMPLE.read_text(), "", update=APPLY_UPDATE, language="python", mode=MODE,
        max_new_tokens=MAX_NEW_TOKENS)).output_text
    assert merged == NEAR_FIXED
    _finished_step(workbench, "apply", merged, "the engine's merge")
    sent = [p for p in _traced(workbench.log, "Sending request", "workspace/executeCommand")
            if p.get("command") == COMMAND_APPLY_UPDATE]
    assert sent and sent[0]["arguments"][0]["update"] == APPLY_UPDATE, f"no {COMMAND_APPLY_UPDATE}{workbench.context}"
