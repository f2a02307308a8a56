"""``copy-as-decode edit``: a headless edit of one file, with progress, the program as it
resolves, a coloured diff and the timing (optionally against plain regeneration)."""

from __future__ import annotations

import argparse
import difflib
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from engine.api import MODES, EditError, EditRequest, Engine, language_for
from engine.events import EditFinished, EditResult, EditStarted, OpResolved
from engine.models import ModelLoadError
from engine.resolve import ResolveError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("edit", help="edit a file headlessly", description=__doc__)
    p.add_argument("file", type=Path)
    p.add_argument("--instruction", "-i", required=True, help="what to change, e.g. 'Fix the bug'")
    p.add_argument("--lines", help="edit only lines A-B (1-based, inclusive)")
    p.add_argument("--mode", choices=[m for m in MODES if m != "forced"], default=None,
                   help="speculative (default: lossless, same output as ar), program, ar or pld")
    p.add_argument("--model", default=None, help="'default' (embedded SmolLM2-135M), a hub id, a folder or a .gguf "
                   "(default: the workspace configuration, else 'default')")
    p.add_argument("--device", default=None)
    p.add_argument("--dtype", default=None)
    p.add_argument("--max-new-tokens", type=int, default=None)
    p.add_argument("--output", type=Path, help="write the edited text to this path")
    p.add_argument("--in-place", action="store_true", help="replace FILE atomically (the original stays on any error)")
    p.add_argument("--json", action="store_true", help="print a machine-readable summary instead of the report")
    p.add_argument("--compare", default="", help="also run these modes on the same request (comma list) and "
                   "print the timings side by side, e.g. --compare ar")
    p.set_defaults(func=run)


def parse_lines(spec: str | None) -> tuple[int, int] | None:
    if not spec:
        return None
    try:
        a, _, b = spec.partition("-")
        return int(a), int(b or a)
    except ValueError:
        raise EditError(f"--lines {spec!r}: expected A-B, e.g. 10-24") from None


def read_text(path: Path) -> str:
    if not path.is_file():
        raise EditError(f"{path}: no such file")
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise EditError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def write_atomic(path: Path, text: str) -> None:
    """Write via a temporary file in the same folder and rename, so a failure leaves the original."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=str(path.parent))
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o7777)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _settings(args: argparse.Namespace):
    """Workspace settings for FILE, read exactly as the language server reads them (its
    ``.copy-as-decode.toml`` / ``[tool.copy-as-decode]`` files, found from the file's folder up)."""
    from lsp_server.config import Settings, load_workspace_settings

    try:
        settings, warnings = load_workspace_settings(args.file.resolve())
    except Exception as exc:  # noqa: BLE001 - a bad config file must not stop a headless edit
        print(f"warning: ignoring workspace configuration: {exc}", file=sys.stderr)
        return Settings()
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return settings


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    out = Console(stderr=args.json)
    err = Console(stderr=True)
    try:
        text = read_text(args.file)
        settings = _settings(args)
        request = EditRequest(text=text, instruction=args.instruction, lines=parse_lines(args.lines),
                              language=language_for(str(args.file)), mode=args.mode or settings.mode,
                              max_new_tokens=args.max_new_tokens or settings.max_new_tokens,
                              context_lines=settings.context_lines)
        request.validate()
        model = args.model or settings.model
        with err.status(f"loading model {model}..."):
            engine = Engine.load(model, device=args.device or settings.device, dtype=args.dtype or settings.dtype,
                                 progress=lambda m: err.print(f"[dim]{m}[/dim]"),
                                 trust_remote_code=settings.trust_remote_code)
        others = [m.strip() for m in args.compare.split(",") if m.strip() and m.strip() != request.mode]
        if others:
            engine.warm_up()  # so the first timed mode does not pay one-time costs
        result = _run_one(engine, request, out, quiet=args.json)
        compared = {}
        for mode in others:
            req = EditRequest(**{**request.__dict__, "mode": mode})
            with err.status(f"running {mode} for comparison..."):
                compared[mode] = engine.edit(req)
    except (EditError, ModelLoadError, ResolveError) as exc:
        err.print(f"[bold red]error:[/bold red] {exc}")
        return 2
    if args.output:
        write_atomic(args.output, result.output_text)
    if args.in_place and result.stop_reason == "done":
        write_atomic(args.file, result.output_text)
    if args.json:
        summary = result.summary()
        summary["compare"] = {m: r.summary() for m, r in compared.items()}
        print(json.dumps(summary, indent=2))
        return 0 if result.stop_reason != "cancelled" else 1
    _report(out, args.file, result, compared)
    return 0


def _run_one(engine: Engine, request: EditRequest, out, quiet: bool) -> EditResult:
    from rich.markup import escape

    result = None
    for event in engine.stream(request):
        if isinstance(event, EditStarted) and not quiet:
            out.print(f"[bold]{event.mode}[/bold] edit with {event.model}: {event.input_lines} input lines, "
                      f"{event.prompt_tokens} prompt tokens")
        elif isinstance(event, OpResolved) and not quiet:
            kind = "copy" if "copy" in event.op.serialize()[:6] else "gen "
            colour = "cyan" if kind == "copy" else "yellow"
            label = event.op.serialize() if kind == "copy" else f"<gen> {len(event.text)} chars"
            out.print(f"  [{colour}]{escape(label)}[/{colour}]  [dim]{event.elapsed_s:6.2f}s  "
                      f"gen={event.tokens.generated} copied={event.tokens.copied} forced={event.tokens.forced}[/dim]")
        elif isinstance(event, EditFinished):
            result = event.result
    assert result is not None
    return result


def _report(out, path: Path, result: EditResult, compared: dict[str, EditResult]) -> None:
    from rich.markup import escape
    from rich.table import Table

    out.print("\n[bold]program[/bold]")
    out.print(escape(result.program.serialize()), soft_wrap=True)
    out.print("\n[bold]diff[/bold]")
    diff = list(difflib.unified_diff(result.input_text.splitlines(keepends=True),
                                     result.output_text.splitlines(keepends=True), f"a/{path.name}", f"b/{path.name}"))
    if not diff:
        out.print("[dim](no change)[/dim]")
    for line in diff:
        style = "green" if line.startswith("+") else "red" if line.startswith("-") else "dim"
        out.print(f"[{style}]{escape(line.rstrip(chr(10)))}[/{style}]")
    for warning in result.warnings:
        out.print(f"[yellow]warning:[/yellow] {escape(warning)}")
    for mode, other in compared.items():
        out.print(f"\n[bold]{mode} program[/bold]")
        out.print(escape(other.program.serialize()), soft_wrap=True)
    out.print(timing_table([result, *compared.values()]))


def timing_table(results: list[EditResult]):
    """Side-by-side timings of one request under several modes (one run each, same process)."""
    from rich.table import Table

    ar = next((r for r in results if r.mode == "ar"), None)
    table = Table(title="decode phase, same request, one run each in this process")
    for col in ("mode", "decode s", "speed-up vs ar", "model steps", "copied tok", "forced tok", "stop",
                "output == ar"):
        table.add_column(col)
    for r in results:
        speed = f"{ar.timings['decode_s'] / r.timings['decode_s']:.2f}x" if ar and r.timings["decode_s"] else "-"
        table.add_row(r.mode, f"{r.timings['decode_s']:.2f}", speed, str(r.tokens.generated), str(r.tokens.copied),
                      str(r.tokens.forced), r.stop_reason, "-" if ar is None or r is ar else str(r.output_text == ar.output_text))
    return table
