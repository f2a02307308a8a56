"""An editor session through the language server, per backend: AI fixes on one unchanged buffer.

The client (pygls' LanguageClient, what pytest-lsp drives) starts ``python -m lsp_server``, opens a
102-line function of the standard library (``textwrap.TextWrapper._wrap_chunks``) with one
operator changed, and sends "AI fix" with the focus on that line; then undoes the edit (the buffer
is unchanged again) and sends the same fix again; then once more with the cursor on another line.
A warm-up fix on another file loads the model first, so every measured request has it loaded
(the language server's steady state). Per request it prints the time to the first op the user
sees (the first applied edit, or the answer when the fix changes nothing) and to the last applied
edit, the total (the command's answer), the prompt's
prefill and how many prompt tokens came from the previous request's KV (``prefix_reused``,
engine.runtime.prefix_cache). It also prints how much of the prompt two requests with
different cursor lines share in each selector prompt layout (the focus sentence before or after
the code: engine.decoding.prompt.HINT_BEFORE / HINT_AFTER).

    OMP_NUM_THREADS=1 .venv/bin/python scripts/measure_editor_session.py --backend llamacpp --threads 1
    OMP_NUM_THREADS=1 .venv/bin/python scripts/measure_editor_session.py --backend transformers --threads 1

With ``--warm-up fix`` (or ``prompt``) the server reads ahead while the buffer is idle (``warmUp``;
off otherwise) and every fix runs the "AI fix" code action's own command (instruction "Fix the
bug", as the lightbulb sends it). After the runs above, copies of the function with a line on top
(no cache holds them) are opened with the cursor on the bug:

* first fix after idle: once the warm-up has run for a while, a keystroke (a didChange, undone by
  the next one) is timed (its round trip, with a code action behind it, and how long until the
  warm-up reports it stopped); the buffer then stays idle until a warm-up of it ends, and the AI
  fix runs;
* fix during the warm-up: the AI fix is asked for 2 s into the warm-up of another copy.

    OMP_NUM_THREADS=1 .venv/bin/python scripts/measure_editor_session.py --backend llamacpp --threads 1 --warm-up fix
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import os
import shlex
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.lsp.client import LanguageClient

from engine.evaluation.corpora import load_corpus

INSTRUCTION = "Fix the bug."


def buggy_function() -> tuple[str, str, int]:
    """(buggy source, fixed source, 0-based line of the change): one operator of a 102-line function."""
    source = textwrap.dedent(inspect.getsource(textwrap.TextWrapper._wrap_chunks))
    lines = source.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if "width = self.width - len(indent)" in line:
            lines[i] = line.replace("self.width - len(indent)", "self.width + len(indent)")
            return "".join(lines), source, i
    raise RuntimeError("textwrap._wrap_chunks changed: pick another line")


class Editor:
    """A minimal editor: open documents, apply the server's edits as they stream, undo, send AI fix."""

    def __init__(self, settings: dict[str, Any]):
        self.settings = settings
        self.client = LanguageClient("editor-session", "0")
        self.texts: dict[str, list[Any]] = {}
        self.first_edit: dict[str, float] = {}
        self.last_edit: dict[str, float] = {}
        client = self.client

        @client.feature(types.WORKSPACE_APPLY_EDIT)
        def apply(params: types.ApplyWorkspaceEditParams) -> types.ApplyWorkspaceEditResult:
            from lsp_server.positions import LineIndex

            for change in params.edit.document_changes or []:
                uri = change.text_document.uri
                self.first_edit.setdefault(uri, time.monotonic())
                self.last_edit[uri] = time.monotonic()
                for edit in change.edits:
                    text, version = self.texts[uri]
                    a, b = LineIndex(text).offsets_of(edit.range)
                    self.texts[uri] = [text[:a] + edit.new_text + text[b:], version + 1]
                    client.text_document_did_change(types.DidChangeTextDocumentParams(
                        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version + 1),
                        content_changes=[types.TextDocumentContentChangePartial(range=edit.range, text=edit.new_text)]))
            return types.ApplyWorkspaceEditResult(applied=True)

        @client.feature(types.WINDOW_WORK_DONE_PROGRESS_CREATE)
        def create(params: Any) -> None:
            return None

        @client.feature(types.CLIENT_REGISTER_CAPABILITY)
        def register(params: Any) -> None:
            return None

        @client.feature(types.WORKSPACE_CONFIGURATION)
        def configuration(params: types.ConfigurationParams) -> list[dict[str, Any]]:
            return [self.settings for _ in params.items]

    async def start(self, root: Path) -> None:
        await self.client.start_io(sys.executable, "-m", "lsp_server", env={**os.environ})
        caps = types.ClientCapabilities(
            window=types.WindowClientCapabilities(work_done_progress=True),
            workspace=types.WorkspaceClientCapabilities(
                configuration=True, apply_edit=True,
                workspace_edit=types.WorkspaceEditClientCapabilities(document_changes=True)))
        # the settings as the user's own (initializationOptions): a workspace layer may not pick a selector folder
        await self.client.initialize_async(types.InitializeParams(capabilities=caps, root_uri=root.as_uri(),
                                                                  initialization_options=self.settings))
        self.client.initialized(types.InitializedParams())

    def open(self, uri: str, text: str) -> None:
        self.texts[uri] = [text, 1]
        self.client.text_document_did_open(types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)))

    def replace_all(self, uri: str, text: str) -> None:
        """Undo: the whole buffer back to ``text``."""
        version = self.texts[uri][1] + 1
        self.texts[uri] = [text, version]
        self.client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)]))

    def action_arguments(self, uri: str, line: int) -> list[Any]:
        """The "AI fix" code action's command arguments for a cursor on ``line`` (what an editor runs;
        the server's own code_actions, called here on the same text and request)."""
        from lsp_server.actions import FIX_TITLE, code_actions

        cursor = types.Position(line=line, character=0)
        params = types.CodeActionParams(text_document=types.TextDocumentIdentifier(uri=uri),
                                        range=types.Range(start=cursor, end=cursor),
                                        context=types.CodeActionContext(diagnostics=[]))
        action = next(a for a in code_actions(uri, self.texts[uri][0], params) if a.title == FIX_TITLE)
        return list(action.command.arguments)

    async def fix(self, uri: str, line: int, via_action: bool = False) -> dict[str, Any]:
        """An AI fix with the focus on ``line``: the instruction "Fix the bug." (``via_action``: the
        code action's own command, as an editor's lightbulb runs it)."""
        self.first_edit.pop(uri, None)
        self.last_edit.pop(uri, None)
        arguments = self.action_arguments(uri, line) if via_action else [
            {"uri": uri, "range": None, "instruction": INSTRUCTION, "kind": "fix", "focus": {"line": line, "character": 0}}]
        start = time.monotonic()
        result = await self.client.workspace_execute_command_async(types.ExecuteCommandParams(
            command="copyAsDecode.server.edit", arguments=arguments))
        total = time.monotonic() - start
        first, last = self.first_edit.get(uri), self.last_edit.get(uri)
        summary = result.get("summary") or {}
        breakdown = summary.get("breakdown") or {}
        decode = (summary.get("timings") or {}).get("decode_s")
        # The first op the user sees: the first edit applied; when the answer changes nothing, the answer.
        return {"first_op_s": round((first if first is not None else start + total) - start, 3),
                "first_edit_s": None if first is None else round(first - start, 3),
                "last_edit_s": None if last is None else round(last - start, 3), "total_s": round(total, 3),
                "status": result.get("status"), "prompt_tokens": summary.get("prompt_tokens"),
                "prefill_s": breakdown.get("prefill_s"), "decode_s": decode,
                "localize_s": breakdown.get("localize_s"), "prefix_reused": breakdown.get("prefix_reused"),
                "read_ahead_s": (summary.get("timings") or {}).get("read_ahead_s"), "program": summary.get("program"),
                "fixed": self.texts[uri][0]}

    async def code_action(self, uri: str, line: int) -> float:
        """The cursor moves to ``line`` (VS Code asks for code actions); returns the round trip (s)."""
        start = time.monotonic()
        await self.client.text_document_code_action_async(types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=types.Range(start=types.Position(line=line, character=0), end=types.Position(line=line, character=0)),
            context=types.CodeActionContext(diagnostics=[])))
        return time.monotonic() - start

    async def warm_ups(self, uri: str, every_document: bool = False) -> list[dict[str, Any]]:
        """The server's last warm-ups of ``uri``, or of every document (copyAsDecode.server.settings
        reports them)."""
        answer = await self.client.workspace_execute_command_async(types.ExecuteCommandParams(
            command="copyAsDecode.server.settings", arguments=[{"uri": uri}]))
        return [w for w in answer.get("warmUps") or [] if every_document or w["uri"] == uri]

    async def last_warm_up(self, uri: str) -> int:
        """The number of the last warm-up the server ended, of any document (0: none yet)."""
        return max((w["n"] for w in await self.warm_ups(uri, every_document=True)), default=0)

    async def idle_until_warm(self, uri: str, line: int, timeout: float = 600.0) -> dict[str, Any]:
        """The user puts the cursor on ``line`` and looks at the buffer until a warm-up of it ends
        (one that a keystroke stopped does not count); a code-action round trip is timed while it runs."""
        start = time.monotonic()
        before = await self.last_warm_up(uri)
        await self.code_action(uri, line)
        await asyncio.sleep(self.settings.get("warmUpDelayMs", 1500) / 1000 + 0.5)
        during = await self.code_action(uri, line)  # the same cursor: does not stop the warm-up
        while time.monotonic() - start < timeout:
            done = [w for w in await self.warm_ups(uri) if w["n"] > before and w["status"] != "cancelled"]
            if done:
                return {**done[-1], "wall_s": round(time.monotonic() - start, 3),
                        "code_action_during_s": round(during, 4)}
            await asyncio.sleep(0.2)
        raise TimeoutError("no warm-up ended")

    async def keystroke_during_warm_up(self, uri: str, line: int, text: str) -> dict[str, Any]:
        """1 s into a warm-up of ``uri`` (cursor on ``line``): a code action, then a keystroke (a
        space typed at the end of the first line: didChange, then a code action behind it, whose
        answer ends the round trip), then how long until the server reports the warm-up stopped.
        The keystroke is undone (the buffer is ``text`` again) before it returns."""
        before = await self.last_warm_up(uri)
        await self.code_action(uri, line)
        await asyncio.sleep(self.settings.get("warmUpDelayMs", 1500) / 1000 + 1.0)
        alone = await self.code_action(uri, line)
        version = self.texts[uri][1] + 1
        first = text.splitlines()[0]
        at = types.Position(line=0, character=len(first))
        start = time.monotonic()
        self.texts[uri] = [text.replace(first, first + " ", 1), version]
        self.client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[types.TextDocumentContentChangePartial(range=types.Range(start=at, end=at), text=" ")]))
        await self.client.text_document_code_action_async(types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri), range=types.Range(start=at, end=at),
            context=types.CodeActionContext(diagnostics=[])))
        round_trip = time.monotonic() - start
        stopped = None
        while time.monotonic() - start < 60:
            ended = [w for w in await self.warm_ups(uri) if w["n"] > before]
            if ended:
                stopped = {"status": ended[-1]["status"], "after_s": round(time.monotonic() - start, 3)}
                break
            await asyncio.sleep(0.02)
        self.replace_all(uri, text)
        return {"round_trip_s": round(round_trip, 4), "code_action_s": round(alone, 4),
                "stopped_after_s": None if stopped is None else stopped["after_s"],
                "stopped_status": None if stopped is None else stopped["status"]}

    async def stop(self) -> None:
        await self.client.shutdown_async(None)
        self.client.exit(None)
        await asyncio.sleep(0.5)


def prompt_sharing(buggy: str, line_a: int, line_b: int) -> dict[str, Any]:
    """Common token prefix of the program-mode prompts for two cursor lines, in each selector
    prompt layout (engine.decoding.prompt: the focus sentence before the code, as older adapters were
    trained, and after it, as adapters trained since are)."""
    from engine.decoding.prompt import PromptParts, render, selector_messages
    from engine.runtime.sources import load_tokenizer
    from engine.runtime.prefix_cache import common_prefix
    from engine.runtime.selector.adapter import HINT_AFTER, HINT_BEFORE

    tok = load_tokenizer("default")

    def parts(line: int) -> PromptParts:
        return PromptParts(instruction=INSTRUCTION, region=buggy, before="", after="", first_line=1,
                           language="python", focus_line=line + 1)

    out: dict[str, Any] = {}
    for layout in (HINT_BEFORE, HINT_AFTER):
        a, b = (render(tok, selector_messages(parts(line), layout)) for line in (line_a, line_b))
        n = common_prefix(a, b)
        out[layout] = {"prompt_tokens": len(b), "shared": n, "share": round(n / len(b), 3)}
    return out


def _print(backend: str, name: str, run: dict[str, Any]) -> None:
    print(f"{backend:12s} {name:22s} first op {run['first_op_s']}s  last edit {run['last_edit_s']}s  "
          f"total {run['total_s']}s  prefill {run['prefill_s']}s  decode {run['decode_s']}s  "
          f"localize {run['localize_s']}  reused {run['prefix_reused']}/{run['prompt_tokens']}  "
          f"read ahead {run['read_ahead_s']}  status {run['status']}  fixed {run['fixed']}", flush=True)


async def session(args: argparse.Namespace) -> dict[str, Any]:
    buggy, fixed, line = buggy_function()
    other_line = min(len(buggy.splitlines()) - 1, line + 30)
    settings = {"backend": args.backend, "threads": args.threads, "mode": args.mode, "maxNewTokens": 512,
                "applyMode": "stream", "selector": args.selector, "warmUp": args.warm_up}
    root = Path(tempfile.mkdtemp())
    editor = Editor(settings)
    await editor.start(root)
    warm = load_corpus("humanevalfix-python")[0]
    editor.open((root / "warm.py").as_uri(), warm.input)
    warm_run = await editor.fix((root / "warm.py").as_uri(), 0)  # loads the model
    uri = (root / "wrap.py").as_uri()
    editor.open(uri, buggy)
    runs = {}
    for name, focus in (("first fix", line), ("same fix again", line), ("cursor moved 30 lines", other_line)):
        editor.replace_all(uri, buggy)
        run = await editor.fix(uri, focus, via_action=args.warm_up != "off")
        run["fixed"] = run["fixed"] == fixed
        runs[name] = run
        _print(args.backend, name, run)
    if args.warm_up != "off":  # copies of the function (a line on top: not in the caches), read while idle
        uri2 = (root / "wrap_copy.py").as_uri()
        text2 = "# a copy\n" + buggy
        editor.open(uri2, text2)
        keystroke = await editor.keystroke_during_warm_up(uri2, line + 1, text2)
        warm_up = await editor.idle_until_warm(uri2, line + 1)
        run = await editor.fix(uri2, line + 1, via_action=True)
        run["fixed"] = run["fixed"] == "# a copy\n" + fixed
        run["warm_up"], run["keystroke"] = warm_up, keystroke
        runs["first fix after idle"] = run
        print(f"{args.backend:12s} keystroke during the warm-up: didChange + codeAction round trip "
              f"{keystroke['round_trip_s']}s, code action alone {keystroke['code_action_s']}s, warm-up stopped "
              f"{keystroke['stopped_after_s']}s after it", flush=True)
        print(f"{args.backend:12s} warm-up {warm_up['status']} (answered {warm_up.get('answered')}): "
              f"{warm_up['forwarded']} tokens forwarded for a {warm_up['promptTokens']}-token prompt in "
              f"{warm_up['seconds']}s; code action while it ran {warm_up['code_action_during_s']}s", flush=True)
        _print(args.backend, "first fix after idle", run)
        uri3 = (root / "wrap_copy2.py").as_uri()
        editor.open(uri3, "# another copy\n" + buggy)
        await editor.code_action(uri3, line + 1)
        await asyncio.sleep(settings.get("warmUpDelayMs", 1500) / 1000 + 2.0)
        run = await editor.fix(uri3, line + 1, via_action=True)
        run["fixed"] = run["fixed"] == "# another copy\n" + fixed
        runs["fix during the warm-up"] = run
        _print(args.backend, "fix during the warm-up", run)
    await editor.stop()
    first, again = runs["first fix"]["first_op_s"], runs["same fix again"]["first_op_s"]
    warmed = runs.get("first fix after idle", {}).get("first_op_s")
    during = runs.get("fix during the warm-up", {}).get("first_op_s")
    return {"command": "OMP_NUM_THREADS=1 .venv/bin/python scripts/measure_editor_session.py " + shlex.join(sys.argv[1:]),
            "backend": args.backend, "threads": args.threads, "mode": args.mode,
            "function_lines": len(buggy.splitlines()),
            "warm_up_total_s": warm_run["total_s"], "runs": runs,
            "second_over_first_first_op": round(again / first, 3) if first and again else None,
            "warmed_over_first_first_op": round(warmed / first, 3) if first and warmed else None,
            "during_over_first_first_op": round(during / first, 3) if first and during else None,
            "prompt_sharing_between_cursor_lines": prompt_sharing(buggy, line, other_line)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", default="llamacpp", choices=("transformers", "llamacpp"))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--mode", default="program")
    ap.add_argument("--selector", default="auto", help="span selector: auto (the shipped adapter), none or a folder")
    ap.add_argument("--warm-up", default="off", choices=("fix", "prompt", "off"),
                    help="the warmUp setting; fix or prompt: also fixes on copies the server read ahead while idle")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    report = asyncio.run(session(args))
    print(json.dumps({k: v for k, v in report.items() if k != "runs"}, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
