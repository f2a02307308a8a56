"""A real client: headless Neovim runs the "AI fix" code action on a HumanEvalFix bug, and the
README's `:CopyAsDecodeApply` on examples/buggy_add.py (tests/nvim/apply.lua).

``nvim --headless --clean`` runs tests/nvim/ai_fix.lua, which starts the server with
``vim.lsp.start_client`` (the 0.7 API; Debian's neovim is 0.7.2), attaches it to the buggy file,
publishes a diagnostic on the bug, picks "AI fix" from ``vim.lsp.buf.code_action`` through an
overridden ``vim.ui.select``, waits for the edit and writes the buffer out. The buffer must equal
what the engine resolves for the same request in this process (with the diagnostic's line as the
focus, as the server passes it). Under ``applyMode = "preview"`` Neovim 0.7 (no
changeAnnotationSupport) gets a message and the edit waits for ``copyAsDecode.server.applyPending``.
In the first test's session the script then switches to the default settings (program mode with
the shipped span selector, as ``copy-as-decode edit`` runs), opens examples/buggy_add.py as well,
puts the cursor on its docstring (line 2, one line above the buggy ``return a - b``; no diagnostic)
and runs "AI fix" again: that buffer must hold the fix itself (``return a + b``, def line and
docstring kept).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from engine.api import EditRequest

pytestmark = [pytest.mark.model, pytest.mark.slow, pytest.mark.editor, pytest.mark.timeout(400)]

NVIM = shutil.which("nvim")
SCRIPT = Path(__file__).parent / "nvim" / "ai_fix.lua"
CASE_ID = "Python/158"
# HumanEvalFix Python/158 (MIT, bigcode-project/octopack): declaration + buggy_solution and its
# instruction, used when the shared corpus is not available. The embedded model fixes it
# (sorted(words)[0] -> max(words)) in ~15 tokens.
FALLBACK = ("def find_max(words):\n    return sorted(words)[0]\n", "Fix bugs in find_max.")
SETTINGS = {"mode": "ar", "maxNewTokens": 64, "contextLines": 3}
# The cursor next to the bug: examples/buggy_add.py, cursor on line 2 (the docstring), bug on line 3.
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "buggy_add.py"
NEAR_FIXED = 'def add(a, b):\n    """Return the sum of a and b."""\n    return a + b\n'
NEAR_LINE = 2
NEAR_SETTINGS: dict = {}  # the defaults: mode auto = program mode with the shipped span selector
NO_NVIM = "nvim is not installed (make test installs Debian's neovim as root; or: apt-get install neovim)"


def buggy_case() -> tuple[str, str]:
    """(file text, the diagnostic message) of the HumanEvalFix case."""
    try:
        from engine.evaluation.corpora import load_corpus

        for case in load_corpus("humanevalfix-python"):
            if case.id == CASE_ID:
                return case.input, case.instruction
    except Exception:  # noqa: BLE001 - the shared data is optional here
        pass
    return FALLBACK


def neovim_env(tmp_path: Path, source: Path, settings: dict) -> dict[str, str]:
    """The environment of a headless Neovim script: throwaway XDG dirs, the server's command and
    environment, the file to open, where the buffer and the log go, the settings to push."""
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith("NVIM")}
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    env.update({
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / "config"), "XDG_DATA_HOME": str(home / "data"),
        "XDG_STATE_HOME": str(home / "state"), "XDG_CACHE_HOME": str(home / "cache"),
        "CAD_FILE": str(source), "CAD_OUT": str(tmp_path / "buffer.txt"), "CAD_LOG": str(tmp_path / "log.json"),
        "CAD_CMD": json.dumps([sys.executable, "-m", "lsp_server"]),
        # the server keeps the real model cache (Neovim's XDG dirs are throwaway)
        "CAD_SERVER_ENV": json.dumps({"XDG_CACHE_HOME": cache, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1",
                                      "PYTHONPATH": str(Path(__file__).resolve().parents[1])}),
        "CAD_SETTINGS": json.dumps({"copyAsDecode": settings}), "CAD_TIMEOUT_MS": "240000",
    })
    for key in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
        Path(env[key]).mkdir(parents=True, exist_ok=True)
    return env


def run_script(script: Path, env: dict[str, str], tmp_path: Path) -> dict:
    """Run ``script`` in headless Neovim; its JSON log (the script must exit 0)."""
    proc = subprocess.Popen(
        [NVIM, "--headless", "--clean", "-n", "-i", "NONE", "-u", "NONE", "-c", f"luafile {script}"],
        env=env, cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        pytest.fail(f"nvim did not finish within 300 s; output:\n{output.decode(errors='replace')[-3000:]}")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    log_file = tmp_path / "log.json"
    log = json.loads(log_file.read_text()) if log_file.exists() else {}
    assert proc.returncode == 0, f"nvim failed: {log.get('error')}\nlog: {log}\n{output.decode(errors='replace')[-3000:]}"
    return log


def run_neovim(tmp_path: Path, settings: dict, apply_pending: bool = False,
               near: bool = False) -> tuple[str, int, dict, str]:
    """Run the headless Neovim script on the HumanEvalFix case; (text, bug line, log, buffer).
    ``near``: then AI fix on examples/buggy_add.py in the same session, the cursor on line 2
    (its buffer lands in tmp_path/near.txt, what the action sent in log["near"])."""
    text, bug_message = buggy_case()
    source = tmp_path / "project" / "find_max.py"
    source.parent.mkdir()
    source.write_text(text)
    bug_line = next(i for i, line in enumerate(text.splitlines()) if "return" in line)
    env = neovim_env(tmp_path, source, settings)
    env.update({"CAD_BUG_LINE": str(bug_line), "CAD_BUG_MESSAGE": bug_message,
                "CAD_APPLY_PENDING": "1" if apply_pending else "0"})
    if near:
        near_source = tmp_path / "project" / EXAMPLE.name
        near_source.write_text(EXAMPLE.read_text())
        env.update({"CAD_NEAR_FILE": str(near_source), "CAD_NEAR_LINE": str(NEAR_LINE),
                    "CAD_NEAR_OUT": str(tmp_path / "near.txt"),
                    "CAD_NEAR_SETTINGS": json.dumps({"copyAsDecode": NEAR_SETTINGS})})
    log = run_script(SCRIPT, env, tmp_path)
    assert log["instruction"] == f"Fix: {bug_message}"
    assert "AI fix" in log["titles"]
    states = [s["state"] for s in log["statuses"]]
    assert "editing" in states and states[-1] == "ready", log
    assert log["progress"] > 0, "no $/progress notifications reached Neovim"
    assert source.read_text() == text  # the file on disk is untouched (the buffer was never written)
    return text, bug_line, log, (tmp_path / "buffer.txt").read_text()


def engine_output(text: str, instruction: str, settings: dict, focus_line: int) -> str:
    """What the engine resolves for the server's request, in this process (one thread, like the server)."""
    import torch

    from engine.api import Engine

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the server runs with OMP_NUM_THREADS=1: same arithmetic, same output
    try:
        engine = Engine.load("default")
        result = engine.edit(EditRequest(text=text, instruction=instruction, mode="ar",
                                         max_new_tokens=settings["maxNewTokens"],
                                         context_lines=settings["contextLines"], focus_line=focus_line,
                                         language="python"))  # find_max.py: the server sends its language
    finally:
        torch.set_num_threads(threads)
    assert result.stop_reason == "done" and result.changed, "the case no longer exercises an edit"
    return result.output_text


@pytest.mark.skipif(NVIM is None, reason=NO_NVIM)
def test_neovim_ai_fix_code_action(tmp_path: Path):
    text, bug_line, log, buffer = run_neovim(tmp_path, SETTINGS, near=True)
    want = engine_output(text, log["instruction"], SETTINGS, focus_line=bug_line + 1)
    assert buffer == want, f"Neovim's buffer differs from the engine's output; log: {log}"
    # Same session, examples/buggy_add.py with the cursor on the docstring (no diagnostic).
    assert EXAMPLE.read_text() == NEAR_FIXED.replace("a + b", "a - b"), "the example no longer has its bug"
    assert log["near"]["instruction"] == "Fix the bug" and log["near"]["focus"]["line"] == NEAR_LINE - 1, log["near"]
    editing = [s["message"] for s in log["statuses"] if s["state"] == "editing"]
    assert editing[-1].startswith("fix: program"), f"not program mode (the default): {editing}"
    near_buffer = (tmp_path / "near.txt").read_text()
    assert near_buffer == NEAR_FIXED, (
        f"AI fix with the cursor on line {NEAR_LINE}, next to the bug, did not give the fix "
        f"(`return a + b`, def line and docstring kept): {near_buffer!r}; log: {log}")


@pytest.mark.skipif(NVIM is None, reason=NO_NVIM)
def test_neovim_preview_waits_for_apply_pending(tmp_path: Path):
    settings = {**SETTINGS, "applyMode": "preview"}
    text, bug_line, log, buffer = run_neovim(tmp_path, settings, apply_pending=True)
    assert log["before_apply"] == text, "the edit was applied before the user asked for it"
    assert any("copyAsDecode.server.applyPending" in m for m in log["messages"]), log["messages"]
    assert log.get("pending_error") is None and log["pending_result"]["status"] == "done", log
    assert buffer == engine_output(text, log["instruction"], settings, focus_line=bug_line + 1)


APPLY_SCRIPT = Path(__file__).parent / "nvim" / "apply.lua"
README = Path(__file__).resolve().parents[1] / "README.md"
# A chat model's answer for examples/buggy_add.py: the fixed line, the docstring elided.
APPLY_UPDATE = "def add(a, b):\n    # ... existing code ...\n    return a + b\n"


def readme_apply_command() -> str:
    """The README's ``:CopyAsDecodeApply`` definition, as a user pastes it into their config."""
    readme = README.read_text()
    start = readme.index('vim.api.nvim_create_user_command("CopyAsDecodeApply"')
    end = readme.index('end, { nargs = "?" })', start) + len('end, { nargs = "?" })')  # the command's last line
    return readme[start:end] + "\n"


def engine_apply(text: str, update: str) -> str:
    """What the engine merges for the server's apply request under the default settings, in this
    process (one thread, like the server)."""
    import torch

    from engine.api import Engine
    from engine.settings import Settings

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        engine = Engine.load("default")
        result = engine.edit(EditRequest.from_settings(Settings(), text, "", update=update, language="python"))
    finally:
        torch.set_num_threads(threads)
    assert result.stop_reason == "done" and result.changed, "the case no longer exercises an apply"
    return result.output_text


@pytest.mark.skipif(NVIM is None, reason=NO_NVIM)
def test_neovim_applies_a_register_with_the_readmes_command(tmp_path: Path):
    source = tmp_path / "project" / EXAMPLE.name
    source.parent.mkdir()
    source.write_text(EXAMPLE.read_text())
    snippet = tmp_path / "apply_command.lua"
    snippet.write_text(readme_apply_command())
    env = neovim_env(tmp_path, source, {})
    env.update({"CAD_SNIPPET": str(snippet), "CAD_REGISTER": "a", "CAD_UPDATE": APPLY_UPDATE})
    log = run_script(APPLY_SCRIPT, env, tmp_path)
    editing = [s["message"] for s in log["statuses"] if s["state"] == "editing"]
    assert editing and editing[-1].startswith("apply: "), log
    assert log["statuses"][-1]["state"] == "ready" and log["progress"] > 0, log
    assert (tmp_path / "buffer.txt").read_text() == engine_apply(EXAMPLE.read_text(), APPLY_UPDATE) == NEAR_FIXED
    assert source.read_text() == EXAMPLE.read_text()  # the buffer was never written to disk


F = "```"
ANSWER_FILES = {"app.py": "def add(a, b):\n    return a - b\n\n\ndef sub(a, b):\n    return a - b\n",
                "calc/mul.go": "package calc\n\nfunc Mul(a, b int) int {\n\treturn a + b\n}\n",
                "conf.py": "name = 'calc'\nversion = 1\n"}
ANSWER = (f"`app.py`\n{F}python\ndef add(a, b):\n    return a + b\n# ... rest of the file unchanged ...\n{F}\n\n"
          f"{F}go calc/mul.go\npackage calc\n\nfunc Mul(a, b int) int {{\n\treturn a * b\n}}\n{F}\n\n"
          f"{F}diff\n--- a/conf.py\n+++ b/conf.py\n@@ -1,2 +1,2 @@\n name = 'calc'\n-version = 1\n+version = 2\n{F}\n")


@pytest.mark.skipif(NVIM is None, reason=NO_NVIM)
def test_neovim_applies_an_answer_that_names_three_files(tmp_path: Path):
    """The README's :CopyAsDecodeApply with a chat answer naming three files: Neovim applies the
    server's one workspace edit to the open buffer and loads the two other files into buffers (the
    files on disk stay as they were until the user writes them). Apply's default mode needs no model."""
    project = tmp_path / "project"
    for name, text in ANSWER_FILES.items():
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text(text)
    snippet = tmp_path / "apply_command.lua"
    snippet.write_text(readme_apply_command())
    env = neovim_env(tmp_path, project / "app.py", {"warmUp": "off"})
    others = [[str(project / "calc/mul.go"), str(tmp_path / "mul.txt")], [str(project / "conf.py"), str(tmp_path / "conf.txt")]]
    env.update({"CAD_SNIPPET": str(snippet), "CAD_REGISTER": "a", "CAD_UPDATE": ANSWER, "CAD_OTHERS": json.dumps(others)})
    log = run_script(APPLY_SCRIPT, env, tmp_path)
    assert log["statuses"][-1]["state"] == "ready" and "3 file(s) changed" in log["statuses"][-1]["message"], log
    assert (tmp_path / "buffer.txt").read_text() == ANSWER_FILES["app.py"].replace("a - b", "a + b", 1)
    assert (tmp_path / "mul.txt").read_text() == ANSWER_FILES["calc/mul.go"].replace("a + b", "a * b")
    assert (tmp_path / "conf.txt").read_text() == ANSWER_FILES["conf.py"].replace("version = 1", "version = 2")
    assert all((project / name).read_text() == text for name, text in ANSWER_FILES.items())


NEW_FILE = "def double(x):\n    return 2 * x\n"


@pytest.mark.skipif(NVIM is None, reason=NO_NVIM)
@pytest.mark.parametrize("new", ["helpers.py", "lib/helpers.py"])
def test_neovim_creates_the_file_an_answer_adds(tmp_path: Path, new: str):
    """Neovim lists "create" among its resource operations: an answer that changes app.py and adds
    a file gets one workspace edit whose CreateFile Neovim runs (an empty file on disk, the text in
    its buffer). Neovim 0.7 makes no folder for a new file, so one in a new folder is refused with
    the reason and nothing changes (Neovim 0.8 and later make the folder)."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "app.py").write_text(ANSWER_FILES["app.py"])
    snippet = tmp_path / "apply_command.lua"
    snippet.write_text(readme_apply_command())
    env = neovim_env(tmp_path, project / "app.py", {"warmUp": "off"})
    answer = ANSWER.split(f"\n\n{F}go")[0] + f"\n\n{F}python {new}\n{NEW_FILE}{F}\n"
    env.update({"CAD_SNIPPET": str(snippet), "CAD_REGISTER": "a", "CAD_UPDATE": answer,
                "CAD_OTHERS": json.dumps([[str(project / new), str(tmp_path / "new.txt")]])})
    log = run_script(APPLY_SCRIPT, env, tmp_path)
    version = subprocess.run([NVIM, "--version"], capture_output=True, text=True).stdout.split()[1]
    if "/" in new and version.startswith("v0.7."):
        assert log["statuses"][-1]["state"] == "error", log
        assert any(f"{new}: its folder" in m and "create the folder first" in m for m in log["messages"]), log
        assert (tmp_path / "buffer.txt").read_text() == ANSWER_FILES["app.py"]
        assert not (project / "lib").exists()
        return
    assert log["statuses"][-1]["state"] == "ready" and f"{new} (new)" in log["statuses"][-1]["message"], log
    assert (tmp_path / "buffer.txt").read_text() == ANSWER_FILES["app.py"].replace("a - b", "a + b", 1)
    assert (tmp_path / "new.txt").read_text() == NEW_FILE
    assert (project / new).read_text() == "" and (project / "app.py").read_text() == ANSWER_FILES["app.py"]
