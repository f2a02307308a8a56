"""Soak: N AI fixes through ONE language server process, with typing between them and every k-th
fix cancelled while the model still reads its prompt.

The client (pygls' LanguageClient, as in scripts/measure_editor_session.py) starts
``python -m lsp_server``, opens a few files (HumanEvalFix-Python cases and the 102-line
``textwrap`` function) and then, per fix: puts the file back to its original text with the user's
typing on top (a comment typed one character per didChange, as an editor sends keystrokes), and
sends "AI fix". Every ``--cancel-every``-th fix goes to the long function and is cancelled
``--cancel-after`` seconds after its job starts (its work-done progress begins), alternately by
the cancel command and by a work-done progress cancel, before any edit has landed: during the
localizer's read of the prompt. Reported: the server's RSS after each fix, the fixes' latency
percentiles (the command's answer), and the cancel latency (cancel sent -> the command's answer:
the job's end) with the phase each cancel landed in. With ``--idle-every k`` every k-th fix that
is not cancelled is a fix after idle: the cursor rests on the fix's line until the server's
warm-up (``warmUp``, the default ``fix``) of it has ended, then the lightbulb's "AI fix" runs;
its latency is reported apart, beside the warm-up's own time.

    OMP_NUM_THREADS=1 .venv/bin/python scripts/soak_editor.py --fixes 20 --cancel-every 4 \\
        --json results/soak/soak_llamacpp_20.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lsprotocol import types

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure_editor_session import Editor, buggy_function  # noqa: E402

from engine.evaluation.corpora import load_corpus  # noqa: E402

INSTRUCTION = "Fix the bug."


class SoakEditor(Editor):
    """The session benchmark's editor, plus what a soak watches: progress tokens (to cancel through
    the progress UI), keystrokes, and the server process's memory."""

    def __init__(self, settings: dict[str, Any]):
        super().__init__(settings)
        self.progress: dict[str, list[Any]] = {}  # token -> begin/report/end values, in order
        self.began: dict[str, float] = {}  # token -> when its begin arrived
        client = self.client

        @client.feature(types.PROGRESS)
        def progress(params: types.ProgressParams) -> None:
            token = str(params.token)
            value = params.value
            kind = value.get("kind") if isinstance(value, dict) else getattr(value, "kind", None)
            self.progress.setdefault(token, []).append(value)
            if kind == "begin":
                self.began[token] = time.monotonic()

    def rss_mb(self) -> float:
        """Resident memory of the server process (Linux /proc), in MiB."""
        pid = self.client._server.pid  # type: ignore[union-attr]
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
        return float("nan")

    def type_text(self, uri: str, text: str) -> None:
        """The user types ``text`` at the end of the buffer, one didChange per character."""
        from lsp_server.positions import LineIndex

        for ch in text:
            current, version = self.texts[uri]
            pos = LineIndex(current).position_at(len(current))
            self.texts[uri] = [current + ch, version + 1]
            self.client.text_document_did_change(types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version + 1),
                content_changes=[types.TextDocumentContentChangePartial(
                    range=types.Range(start=pos, end=pos), text=ch)]))

    def job_tokens(self) -> set[str]:
        return {t for t, values in self.progress.items() if _title(values[0]) == "AI edit"}


def _title(value: Any) -> str | None:
    return value.get("title") if isinstance(value, dict) else getattr(value, "title", None)


def _kind(value: Any) -> str | None:
    return value.get("kind") if isinstance(value, dict) else getattr(value, "kind", None)


async def cancelled_fix(editor: SoakEditor, uri: str, line: int, after: float, by: str) -> dict[str, Any]:
    """An AI fix cancelled ``after`` seconds after its job began (``by``: command | progress)."""
    known = editor.job_tokens()
    editor.first_edit.pop(uri, None)
    start = time.monotonic()
    fix = asyncio.ensure_future(editor.fix(uri, line))
    token = None
    while token is None and not fix.done():
        await asyncio.sleep(0.01)
        token = next(iter(editor.job_tokens() - known), None)
    if token is None:
        return {**(await fix), "cancel": None}
    await asyncio.sleep(max(0.0, editor.began[token] + after - time.monotonic()))
    phase = "decoding" if uri in editor.first_edit else "prompt"
    sent = time.monotonic()
    if by == "progress":
        editor.client.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token=token))
    else:
        await editor.client.workspace_execute_command_async(types.ExecuteCommandParams(
            command="copyAsDecode.server.cancel", arguments=[{"uri": uri}]))
    run = await fix
    ended = time.monotonic()
    run["cancel"] = {"by": by, "phase": phase, "sent_after_s": round(sent - start, 3),
                     "latency_s": round(ended - sent, 3)}
    return run


def percentiles(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"n": 0, "p50": None, "p95": None, "max": None}
    ordered = sorted(values)
    at = lambda q: ordered[max(0, math.ceil(q * len(ordered)) - 1)]  # noqa: E731 - nearest rank
    return {"n": len(values), "p50": round(statistics.median(ordered), 3), "p95": round(at(0.95), 3),
            "max": round(ordered[-1], 3)}


async def soak(args: argparse.Namespace) -> dict[str, Any]:
    settings = {"backend": args.backend, "threads": args.threads, "mode": args.mode,
                "maxNewTokens": args.max_new_tokens, "applyMode": "stream"}
    root = Path(tempfile.mkdtemp())
    editor = SoakEditor(settings)
    await editor.start(root)
    cases = load_corpus("humanevalfix-python")[:args.files]
    files = [((root / f"case{i}.py").as_uri(), case.input) for i, case in enumerate(cases)]
    long_text, _fixed, long_line = buggy_function()
    long_uri = (root / "wrap.py").as_uri()
    for uri, text in files + [(long_uri, long_text)]:
        editor.open(uri, text)
    rng = random.Random(args.seed)
    runs: list[dict[str, Any]] = []
    started = time.monotonic()
    for i in range(args.fixes):
        cancel = args.cancel_every > 0 and i % args.cancel_every == args.cancel_every - 1
        uri, text = (long_uri, long_text) if cancel else files[i % len(files)]
        editor.replace_all(uri, text)  # the user undid the last fix of this file
        editor.type_text(uri, f"# note {i}\n")  # and typed on
        line = long_line if cancel else 0
        idle = not cancel and args.idle_every > 0 and i % args.idle_every == args.idle_every - 1
        if cancel:
            by = "command" if (i // args.cancel_every) % 2 == 0 else "progress"
            run = await cancelled_fix(editor, uri, line, rng.uniform(*args.cancel_after), by)
        elif idle:
            warm_up = await editor.idle_until_warm(uri, line)
            run = await editor.fix(uri, line, via_action=True)
            run.update(cancel=None, warm_up_s=warm_up["seconds"], warm_up_answered=warm_up["answered"])
        else:
            run = await editor.fix(uri, line)
            run["cancel"] = None
        run["idle"] = idle
        run.pop("fixed", None)
        run.update(index=i, file=uri.rsplit("/", 1)[-1], rss_mb=editor.rss_mb())
        runs.append(run)
        c = run["cancel"]
        print(f"fix {i + 1:3d}/{args.fixes} {run['file']:10s} {run['status']:10s} total {run['total_s']:7.2f}s "
              + (f"after idle (warm-up {run['warm_up_s']}s) " if idle else "")
              + f"rss {run['rss_mb']:7.1f} MiB" + (f"  cancel ({c['by']}, {c['phase']}) -> end {c['latency_s']}s"
                                                  if c else ""), flush=True)
    await editor.stop()
    cancels = [r["cancel"] for r in runs if r["cancel"]]
    rss = [r["rss_mb"] for r in runs]
    errors = [r for r in runs if r["status"] == "error"]
    tenth = rss[min(9, len(rss) - 1)]
    return {
        "command": "OMP_NUM_THREADS=1 .venv/bin/python scripts/soak_editor.py " + shlex.join(sys.argv[1:]),
        "settings": settings, "fixes": args.fixes, "cancel_every": args.cancel_every, "idle_every": args.idle_every,
        "cancel_after_s": list(args.cancel_after), "files": [u.rsplit("/", 1)[-1] for u, _ in files] + ["wrap.py"],
        "wall_s": round(time.monotonic() - started, 1),
        "errors": len(errors),
        "statuses": {s: sum(r["status"] == s for r in runs) for s in sorted({r["status"] for r in runs})},
        "latency_s": percentiles([r["total_s"] for r in runs if not r["cancel"] and not r["idle"]]),
        "latency_after_idle_s": percentiles([r["total_s"] for r in runs if r["idle"]]),
        "warm_up_s": percentiles([r["warm_up_s"] for r in runs if r["idle"]]),
        "cancel_latency_s": percentiles([c["latency_s"] for c in cancels]),
        "cancel_latency_in_prompt_s": percentiles([c["latency_s"] for c in cancels if c["phase"] == "prompt"]),
        "rss_mb": {"after_fix_1": rss[0], "after_fix_10": tenth, "last": rss[-1],
                   "last_over_fix_10": round(rss[-1] / tenth, 3) if tenth else None},
        "runs": runs,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fixes", type=int, default=100)
    ap.add_argument("--cancel-every", type=int, default=4, help="cancel every k-th fix (0: none)")
    ap.add_argument("--cancel-after", type=float, nargs=2, default=(0.2, 1.0), metavar=("MIN", "MAX"),
                    help="seconds after the job starts that the cancel is sent (uniform)")
    ap.add_argument("--idle-every", type=int, default=0,
                    help="every k-th fix (not a cancelled one) comes after the buffer was idle until its warm-up ended")
    ap.add_argument("--files", type=int, default=5, help="HumanEvalFix-Python cases the fixes cycle through")
    ap.add_argument("--backend", default="llamacpp", choices=("transformers", "llamacpp"))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--mode", default="program")
    ap.add_argument("--max-new-tokens", type=int, default=256)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    report = asyncio.run(soak(args))
    print(json.dumps({k: v for k, v in report.items() if k != "runs"}, indent=1))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
