"""``copy-as-decode edit``: a headless edit of one file, with progress, the program as it
resolves, a coloured diff and the timing (optionally against plain regeneration).

It never writes an unfinished, destructive or syntax-breaking edit unless told to (``--force``).
Exit status: 0 done (and written where asked); 1 cancelled; 2 a bad request (file, range, size,
model); 3 the edit did not finish (token limit or a degenerate loop); 4 a destructive edit refused
(it would delete or rewrite most of the region for a fix); 5 an edit refused because it breaks the
syntax (the whole file parsed before the edit and does not after it; Python and JavaScript are
checked, see engine/checks/syntax.py)."""

from __future__ import annotations

import argparse
import difflib
import json
import os
import sys
import tempfile
from pathlib import Path

from engine.api import MODES, EditError, EditRequest, Engine, language_for
from engine.core.errors import ModelLoadError
from engine.decoding.events import EditFinished, EditResult, EditStarted, OpResolved
from engine.decoding.prompt import DEFAULT_FOCUS_POLICY, FOCUS_POLICIES
from engine.language.resolve import ResolveError
from engine.runtime.selector.adapter import resolve_selector
from engine.settings import (
    SPECS,
    Settings,
    add_setting_flags,
    engine_arguments,
    given_flags,
    load_workspace_settings,
    with_flags,
)
from engine.verdict import EXIT_BAD_REQUEST, EXIT_CANCELLED, check_focus, json_summary, judge

# The settings that choose and load the model, as flags of every command that loads one.
ENGINE_FLAGS = ("model", "device", "dtype", "selector", "backend", "threads", "context_size", "batch_size",
                "gpu_layers", "flash_attention", "prefix_cache_tokens", "server_url", "served_model")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("edit", help="edit a file headlessly", description=__doc__)
    p.add_argument("file", type=Path)
    p.add_argument("--instruction", "-i", required=True, help="what to change, e.g. 'Fix the bug'")
    p.add_argument("--lines", help="edit only lines A-B (1-based, inclusive)")
    add_setting_flags(p, ["mode"], extra_choices={"mode": ("pld",)},
                      extra_help={"mode": "pld (llama.cpp's prompt-lookup drafting) is for measuring."})
    add_setting_flags(p, ["model", "device", "dtype", "max_new_tokens"])
    p.add_argument("--focus", type=int, metavar="LINE", help="the line the problem is at or near (1-based, "
                   "in FILE's numbering); the prompt points the model at it")
    p.add_argument("--focus-policy", default=DEFAULT_FOCUS_POLICY, choices=FOCUS_POLICIES,
                   help="program mode: hold (default) is guard unless --focus is about as likely as the best line "
                   "near it, where it stays as under keep; guard puts the hint on the likeliest line near --focus "
                   "(or anywhere without it) and makes the model change it; keep holds the hint on --focus itself "
                   "(a line you know is wrong, e.g. a diagnostic's); move is the first policy, for measuring")
    add_setting_flags(p, (*ENGINE_FLAGS[3:], "verify"))
    p.add_argument("--force", action="store_true", help="write the edit even when it did not finish (token limit, "
                   "loop: exit status 3), would delete or rewrite most of the region (4) or breaks the file's "
                   "syntax (5)")
    p.add_argument("--output", type=Path, help="write the edited text to this path")
    p.add_argument("--in-place", action="store_true", help="replace FILE atomically (the original stays on any error)")
    p.add_argument("--json", action="store_true", help="print a machine-readable summary instead of the report")
    p.add_argument("--compare", default="", help="also run these modes on the same request (comma list) and "
                   "print the timings side by side, e.g. --compare ar")
    p.set_defaults(func=run)


def validate_args(args: argparse.Namespace) -> None:
    """Every argument error, before anything is read or loaded (exit status 2): the CLI must not
    spend a model load on a request it will refuse."""
    compare = [m.strip() for m in (args.compare or "").split(",") if m.strip()]
    unknown = [m for m in compare if m not in MODES or m == "forced"]
    if unknown:
        choices = ", ".join(m for m in MODES if m != "forced")
        raise EditError(f"--compare {args.compare!r}: unknown mode {unknown[0]!r}; choose among {choices}")
    if args.in_place and args.output is not None:
        raise EditError("--in-place and --output exclude each other: write FILE itself or another path, not both")
    if args.focus is not None and args.focus < 1:
        raise EditError(f"--focus {args.focus}: lines are 1-based")
    parse_lines(args.lines)


def _answer_empty(args: argparse.Namespace, request: EditRequest, model: str, out) -> int:
    """An empty region: the document as it is, without loading the model."""
    from engine.api import empty_result

    result = empty_result(request, model)
    targets = [path for path, wanted in ((args.output, bool(args.output)), (args.file, args.in_place)) if wanted]
    for path in targets:
        write_atomic(path, result.output_text)
    if args.json:
        print(json.dumps(json_summary(result, {}, None, "", targets, request.language), indent=2))
    else:
        out.print(f"[dim]{result.warnings[0]}[/dim]")
    return 0


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


def add_verify_argument(p: argparse.ArgumentParser, default: str | None = None) -> None:
    """``--verify`` with the setting's choices and help, for commands that take it with a fixed
    default (the benchmarks)."""
    spec = SPECS["verify"]
    p.add_argument("--verify", default=default, choices=spec.choices, help=f"{spec.help} (default {default})")


def add_flash_attention_argument(p: argparse.ArgumentParser, default: str | None = None) -> None:
    """``--flash-attention`` with the setting's choices and help, for commands that take it with
    a fixed default (the benchmarks)."""
    spec = SPECS["flash_attention"]
    p.add_argument("--flash-attention", default=default, choices=spec.choices, help=f"{spec.help} (default {default})")


def workspace_settings(path: Path) -> Settings:
    """Workspace settings for ``path``, read exactly as the language server reads them (its
    ``.copy-as-decode.toml`` / ``[tool.copy-as-decode]`` files, found from the folder up); each
    problem is printed on stderr with its file and line, and the files' other keys apply."""
    settings, warnings = load_workspace_settings(path.resolve())
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return settings


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    out = Console(stderr=args.json)
    err = Console(stderr=True)
    try:
        validate_args(args)
        text = read_text(args.file)
        settings = with_flags(workspace_settings(args.file), given_flags(args))
        lines = parse_lines(args.lines)
        request = EditRequest(text=text, instruction=args.instruction, lines=lines,
                              language=language_for(str(args.file)), mode=args.mode or settings.mode,
                              max_new_tokens=settings.max_new_tokens,
                              context_lines=settings.context_lines, focus_line=args.focus,
                              focus_policy=args.focus_policy,
                              program_prompt=settings.prompt_style,  # type: ignore[arg-type]  # config checks it
                              verify=settings.verify)  # type: ignore[arg-type]
        request.validate()
        check_focus(args.focus, text, lines)
        if request.is_empty():  # nothing to edit: answered at once, no model loaded
            return _answer_empty(args, request, settings.model, out)
        resolve_selector(settings.selector, settings.model)  # a bad adapter folder fails before the model loads
        with err.status(f"loading model {settings.model}..."):
            engine = Engine.load(**engine_arguments(settings), progress=lambda m: err.print(f"[dim]{m}[/dim]"))
        request.mode = engine.resolve_mode(request.mode)  # type: ignore[assignment]
        err.print(f"[dim]backend: {engine.model_for(request.mode).runtime.describe()}[/dim]")
        others = [m.strip() for m in args.compare.split(",") if m.strip() and m.strip() != request.mode]
        if others:
            engine.prime()  # so the first timed mode does not pay one-time costs
            engine.forget_prompts()  # and each mode runs as a first edit: none reuses another's prompt
        result = _run_one(engine, request, out, quiet=args.json)
        compared = {}
        for mode in others:
            req = EditRequest(**{**request.__dict__, "mode": mode})
            engine.forget_prompts()
            with err.status(f"running {mode} for comparison..."):
                compared[mode] = engine.edit(req)
    except (EditError, ModelLoadError, ResolveError) as exc:
        err.print(f"[bold red]error:[/bold red] {exc}")
        return EXIT_BAD_REQUEST
    verdict = judge(result, request.instruction, request.max_new_tokens, request.language)
    status, message = verdict.exit_code, verdict.message
    targets = [path for path, wanted in ((args.output, bool(args.output)), (args.file, args.in_place)) if wanted]
    write = status == 0 or (args.force and status != EXIT_CANCELLED)
    if write:
        for path in targets:
            write_atomic(path, result.output_text)
    if args.json:
        print(json.dumps(json_summary(result, compared, verdict.damage, message, targets if write else [],
                                      request.language, verdict.syntax), indent=2))
    else:
        _report(out, args.file, result, compared)
    if status and write:
        err.print(f"[bold yellow]warning:[/bold yellow] {message}; written anyway (--force)")
        return 0
    if status:
        what = f"nothing was written to {', '.join(map(str, targets))}" if targets else "nothing was written"
        err.print(f"[bold red]error:[/bold red] {message}; {what}"
                  + ("" if status == EXIT_CANCELLED else " (--force writes it anyway)"))
    return status


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
    """Side-by-side timings of one request under several modes (one run each, same process).
    Short headers, no vertical rules and no wrapping, so it reads whole in an 80-column terminal."""
    from rich import box
    from rich.table import Table

    ar = next((r for r in results if r.mode == "ar"), None)
    table = Table(title="same request, one run each in this process (seconds; decode: after the prompt's "
                  "prefill, the localizer included; edit: all of it; =ar: same output as ar)",
                  box=box.SIMPLE_HEAD, collapse_padding=True, pad_edge=False)
    # steps: model-chosen tokens (one decode step each); copied / forced: tokens that rode along
    for col in ("mode", "decode", "x ar", "edit", "x ar", "steps", "copied", "forced", "stop", "=ar"):
        table.add_column(col, no_wrap=True, justify="left" if col in ("mode", "stop", "=ar") else "right")

    def versus(r: EditResult, key: str) -> str:
        return f"{ar.timings[key] / r.timings[key]:.2f}x" if ar and r.timings.get(key) else "-"

    for r in results:
        table.add_row(r.mode, f"{r.timings['decode_s']:.2f}", versus(r, "decode_s"), f"{r.timings['total_s']:.2f}",
                      versus(r, "total_s"), str(r.tokens.generated), str(r.tokens.copied), str(r.tokens.forced),
                      r.stop_reason, "-" if ar is None or r is ar else ("yes" if r.output_text == ar.output_text else "no"))
    return table
