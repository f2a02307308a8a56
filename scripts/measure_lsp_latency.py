"""LSP latency, side by side in one run: time from the code action to the first applied edit, and the
total, per mode (ar, speculative, program), default model on the CPU, three HumanEvalFix files.
Usage: OMP_NUM_THREADS=1 .venv/bin/python scripts/measure_lsp_latency.py (one warm-up round first)."""
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

from lsprotocol import types
from pygls.lsp.client import LanguageClient

from engine.evaluation.corpora import load_corpus

CASES = ["Python/158", "Python/33", "Python/0"]

async def main():
    cases = {c.id: c for c in load_corpus("humanevalfix-python")}
    ws = Path(tempfile.mkdtemp())
    client = LanguageClient("measure", "0")
    from typing import Union
    conv = client.protocol._converter
    conv.register_structure_hook(Union[types.Command, types.CodeAction], lambda o, _t: conv.structure(o, types.Command if isinstance(o.get("command"), str) else types.CodeAction))
    first_edit = {}
    texts = {}
    @client.feature(types.WORKSPACE_APPLY_EDIT)
    def apply(params):
        for ch in params.edit.document_changes or []:
            uri = ch.text_document.uri
            first_edit.setdefault(uri, time.monotonic())
            # apply + echo
            from lsp_server.positions import LineIndex
            text, ver = texts[uri]
            e = ch.edits[0]
            a, b = LineIndex(text).offsets_of(e.range)
            texts[uri] = [text[:a] + e.new_text + text[b:], ver + 1]
            client.text_document_did_change(types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=ver + 1),
                content_changes=[types.TextDocumentContentChangePartial(range=e.range, text=e.new_text)]))
        return types.ApplyWorkspaceEditResult(applied=True)
    @client.feature(types.WINDOW_WORK_DONE_PROGRESS_CREATE)
    def create(params): return None
    @client.feature(types.CLIENT_REGISTER_CAPABILITY)
    def reg(params): return None
    @client.feature(types.WORKSPACE_CONFIGURATION)
    def conf(params): return [settings for _ in params.items]
    await client.start_io(sys.executable, "-m", "lsp_server", env={**os.environ})
    caps = types.ClientCapabilities(window=types.WindowClientCapabilities(work_done_progress=True),
        workspace=types.WorkspaceClientCapabilities(configuration=True, apply_edit=True,
            workspace_edit=types.WorkspaceEditClientCapabilities(document_changes=True)))
    settings = {"maxNewTokens": 256, "contextLines": 20}
    await client.initialize_async(types.InitializeParams(capabilities=caps, root_uri=ws.as_uri()))
    client.initialized(types.InitializedParams())
    rows = []
    run = 0
    for warm in (True, False):
        for cid in CASES:
            case = cases[cid]
            for mode in ("ar", "speculative", "program"):
                if warm and (cid != CASES[0]):
                    continue
                settings["mode"] = mode
                run += 1
                uri = (ws / f"r{run}.py").as_uri()
                texts[uri] = [case.input, 1]
                client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
                    uri=uri, language_id="python", version=1, text=case.input)))
                t0 = time.monotonic()
                acts = await client.text_document_code_action_async(types.CodeActionParams(
                    text_document=types.TextDocumentIdentifier(uri=uri),
                    range=types.Range(start=types.Position(line=0, character=0), end=types.Position(line=0, character=0)),
                    context=types.CodeActionContext(diagnostics=[types.Diagnostic(range=types.Range(
                        start=types.Position(line=0, character=0), end=types.Position(line=0, character=1)),
                        message=case.instruction)])))
                fix = acts[0]
                cmd = fix.command
                if isinstance(cmd, dict):
                    name, args = cmd["command"], cmd["arguments"]
                elif hasattr(cmd, "command"):
                    name, args = cmd.command, cmd.arguments
                res = await client.workspace_execute_command_async(types.ExecuteCommandParams(command=name, arguments=args))
                t1 = time.monotonic()
                if not warm:
                    fe = first_edit.get(uri)
                    s = res.get("summary") or {}
                    rows.append((cid, len(case.input.splitlines()), mode, None if fe is None else round(fe - t0, 2), round(t1 - t0, 2),
                                 res["status"], (s.get("tokens") or {}), texts[uri][0] == case.gold))
    for r in rows: print(r)
    await client.shutdown_async(None); client.exit(None)
    await asyncio.sleep(0.5)

asyncio.run(main())
