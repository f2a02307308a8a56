"""``copy-as-decode edit``: a headless edit of one file. What it prints, what it refuses to write
and its exit statuses are in :data:`DESCRIPTION` (its ``--help``); the statuses are
engine.verdict's, and the syntax check is engine/checks/syntax.py."""

from __future__ import annotations

import argparse
import difflib
import json
import os
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from engine.api import EditError, EditRequest, Engine, language_for
from engine.core.choices import DEFAULT_FOCUS_POLICY, FOCUS_POLICIES, MODES
from engine.core.errors import ModelLoadError
from engine.decoding.events import EditFinished, EditResult, EditStarted, OpResolved
from engine.language.program import Gen
from engine.language.resolve import ResolveError
from engine.runtime.selector.adapter import resolve_selector
from engine.settings import (
    Settings,
    add_setting_flags,
    engine_arguments,
    given_flags,
    load_workspace_settings,
    with_flags,
)
from engine.verdict import EXIT_BAD_REQUEST, EXIT_CANCELLED, check_focus, json_summary, judge, no_fix

# The settings that choose and load the model, as flags of every command that loads one.
ENGINE_FLAGS = ("model", "device", "dtype", "selector", "backend", "threads", "context_size", "batch_size",
                "gpu_layers", "flash_attention", "prefix_cache_tokens", "server_url", "served_model")
# The modes whose model writes an edit program; the others (ar, speculative, pld) write the text.
PROGRAM_MODES = ("program", "forced")


DESCRIPTION = """\
Edit one file with the model, without an editor. It prints the edit's progress,
what the model wrote (the program in program mode, the text in ar, speculative
and pld mode), a diff and the time each phase took.

It never writes an edit that did not finish, would delete or rewrite most of the
region for a fix, or breaks the file's syntax, unless --force is given.

With --check CMD it tries up to --candidates K fixes (other lines the model
finds likely, other changes at the line) and runs CMD on each in a temporary
copy of FILE's folder ({file} is the candidate's path there; exit status 0
passes). Only a candidate that passes is written; with --max-rounds 2 the
first failing check's output joins the instruction for one more round. The
check runs in the current folder, with variables whose names hold KEY, TOKEN,
SECRET or PASSWORD removed from its environment, and is killed with its
process group after --check-timeout seconds.

examples:
  copy-as-decode edit examples/buggy_add.py -i "Fix the bug in add." --focus 3
  copy-as-decode edit stats.py -i "Fix mean." --in-place --candidates 4 \\
      --check 'cd "$(dirname {file})" && python -m pytest -q test_stats.py'

exit status:
  0  done (and written where asked)
  1  cancelled
  2  a bad request: file, line range, size or model
  3  the edit did not finish (token limit, or a loop)
  4  refused: it would delete or rewrite most of the region for a fix
  5  refused: the file parsed before the edit and does not after it (Python and
     JavaScript are checked)
  6  --check: no candidate passed the check; nothing was written (the best
     candidate's diff and its check output are printed)
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("edit", help="edit a file with the model, without an editor", description=DESCRIPTION,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file", type=Path, metavar="FILE", help="the file to edit (UTF-8 text)")
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
    p.add_argument("--check", metavar="CMD", help="a shell command that accepts a fix: {file} is the path of a "
                   "temporary copy holding the candidate; exit status 0 passes; only a passing candidate is written")
    p.add_argument("--check-timeout", type=float, default=60.0, metavar="S", help="seconds one check may run "
                   "before its process group is killed (default 60)")
    p.add_argument("--candidates", type=int, default=1, metavar="K", help="candidates a round (default 1); "
                   "without --check the best-scored one a guard lets through is written")
    p.add_argument("--max-rounds", type=int, default=1, metavar="R", help="with --check: rounds of candidates, each "
                   "after the first told the first failing check's output (default 1)")
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
    if args.candidates < 1 or args.max_rounds < 1 or args.check_timeout <= 0:
        raise EditError("--candidates and --max-rounds must be at least 1, --check-timeout above 0")
    if (args.check or args.candidates > 1) and compare:
        raise EditError("--compare times one edit: it does not combine with --check or --candidates")
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
        request = EditRequest.from_settings(settings, text, args.instruction, lines=lines, mode=args.mode,
                                            language=language_for(str(args.file)), focus_line=args.focus,
                                            focus_policy=args.focus_policy)
        check_focus(args.focus, text, lines)
        if request.is_empty():  # nothing to edit: answered at once, no model loaded
            return _answer_empty(args, request, settings.model.name, out)
        resolve_selector(settings.model.selector, settings.model.name)  # a bad adapter folder fails before the model loads
        with err.status(f"loading model {settings.model.name}..."):
            engine = Engine.load(**engine_arguments(settings), progress=lambda m: err.print(f"[dim]{m}[/dim]"))
        request = replace(request, mode=engine.resolve_mode(request.mode))
        err.print(f"[dim]backend: {engine.model_for(request.mode).runtime.describe()}[/dim]")
        if args.check or args.candidates > 1:
            return _run_candidates(args, engine, request, out, err)
        others = [m.strip() for m in args.compare.split(",") if m.strip() and m.strip() != request.mode]
        if others:
            engine.prime()  # so the first timed mode does not pay one-time costs
            engine.forget_prompts()  # and each mode runs as a first edit: none reuses another's prompt
        result = _run_one(engine, request, out, quiet=args.json)
        compared = {}
        for mode in others:
            req = replace(request, mode=mode)
            engine.forget_prompts()
            with err.status(f"running {mode} for comparison..."):
                compared[mode] = engine.edit(req)
    except (EditError, ModelLoadError, ResolveError) as exc:
        err.print(f"[bold red]error:[/bold red] {exc}")
        return EXIT_BAD_REQUEST
    unchanged = no_fix(result)
    return deliver(args, request, result, compared, out, err, notice=unchanged.message if unchanged else "")


def deliver(args: argparse.Namespace, request: EditRequest, result: EditResult, compared: dict[str, EditResult],
            out, err, *, notice: str = "", never_forced: tuple[int, ...] = (EXIT_CANCELLED,),
            says_nothing_written: tuple[int, ...] = ()) -> int:
    """What ``edit`` and ``apply`` do with a result: judge it, write it to ``--output`` /
    ``--in-place`` when the verdict allows (or ``--force``, except for the statuses in
    ``never_forced``), print it (or ``--json``) and return the exit status. ``notice``: a line
    for the user after the report; ``says_nothing_written``: statuses whose message says so itself."""
    from rich.markup import escape

    verdict = judge(result, request.instruction, request.max_new_tokens, request.language)
    status, message = verdict.exit_code, verdict.message
    targets = [path for path, wanted in ((args.output, bool(args.output)), (args.file, args.in_place)) if wanted]
    write = status == 0 or (args.force and status not in never_forced)
    if write:
        for path in targets:
            write_atomic(path, result.output_text)
    if args.json:
        print(json.dumps(json_summary(result, compared, verdict.damage, message, targets if write else [],
                                      request.language, verdict.syntax), indent=2))
    else:
        _report(out, args.file, result, compared)
        if notice:
            err.print(f"[bold yellow]{escape(notice)}[/bold yellow]")
    if status and write:
        err.print(f"[bold yellow]warning:[/bold yellow] {message}; written anyway (--force)")
        return 0
    if status in says_nothing_written:
        err.print(f"[bold red]error:[/bold red] {message}")
    elif status:
        what = f"nothing was written to {', '.join(map(str, targets))}" if targets else "nothing was written"
        err.print(f"[bold red]error:[/bold red] {message}; {what}"
                  + ("" if status == EXIT_CANCELLED else " (--force writes it anyway)"))
    return status


def _run_candidates(args: argparse.Namespace, engine: Engine, request: EditRequest, out, err) -> int:
    """``--check`` / ``--candidates``: the search (engine.candidates), then write what it chose."""
    from rich.markup import escape

    from engine.candidates import CheckSpec, search_fixes
    from engine.candidates.outcome import decide, search_summary

    check = CheckSpec(args.check, args.check_timeout, Path.cwd()) if args.check else None
    with err.status("candidates...") as status:
        search = search_fixes(engine, request, k=args.candidates, check=check, max_rounds=args.max_rounds,
                              file_path=args.file, progress=lambda message: status.update(message))
    decision = decide(search, check is not None)
    targets = [path for path, wanted in ((args.output, bool(args.output)), (args.file, args.in_place)) if wanted]
    written = targets if decision.write is not None else []
    if decision.write is not None:
        for path in written:
            write_atomic(path, decision.write.result.output_text)
    if args.json:
        print(json.dumps(search_summary(search, decision, request, written), indent=2))
        return decision.exit_code
    for candidate in search.candidates:
        out.print(escape(decision.line(candidate)))
    shown = decision.write or search.best
    if shown is not None:
        _report(out, args.file, shown.result, {})
        if shown.check is not None and not shown.check.passed:
            out.print("\n[bold]check output[/bold]")
            out.print(escape(shown.check.output.rstrip()), soft_wrap=True)
    if decision.message:
        err.print(f"[bold {'red' if decision.exit_code else 'yellow'}]{escape(decision.message)}"
                  f"[/bold {'red' if decision.exit_code else 'yellow'}]")
    return decision.exit_code


def _run_one(engine: Engine, request: EditRequest, out, quiet: bool) -> EditResult:
    result = None
    for event in engine.stream(request):
        if isinstance(event, EditStarted) and not quiet:
            out.print(f"[bold]{event.mode}[/bold] edit with {event.model}: {event.input_lines} input lines, "
                      f"{event.prompt_tokens} prompt tokens")
        elif isinstance(event, OpResolved) and not quiet:
            out.print(_progress_line(event, request.mode in PROGRAM_MODES))
        elif isinstance(event, EditFinished):
            result = event.result
    assert result is not None
    return result


def _progress_line(event: OpResolved, program: bool) -> str:
    """One resolved op as it streams: in program mode the op (a copy, or a gen's size); in a text
    mode the line written, cyan where it repeats an input line. Then the time and token counts."""
    from rich.markup import escape

    copy = not isinstance(event.op, Gen)
    colour = "cyan" if copy else "yellow"
    if program:
        label = event.op.serialize() if copy else f"<gen> {len(event.text)} chars"
    else:
        label = event.text.rstrip("\n")
    return (f"  [{colour}]{escape(label)}[/{colour}]  [dim]{event.elapsed_s:6.2f}s  "
            f"gen={event.tokens.generated} copied={event.tokens.copied} forced={event.tokens.forced}[/dim]")


def _report(out, path: Path, result: EditResult, compared: dict[str, EditResult]) -> None:
    from rich.markup import escape

    _print_answer(out, result)
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
    for other in compared.values():
        _print_answer(out, other, f"{other.mode} ")
    out.print(timing_table([result, *compared.values()]))


def _print_answer(out, result: EditResult, prefix: str = "") -> None:
    """What the model wrote: the program in a program mode, the region's new text in a text mode."""
    from rich.markup import escape

    if result.mode in PROGRAM_MODES:
        out.print(f"\n[bold]{prefix}program[/bold]")
        out.print(escape(result.program.serialize()), soft_wrap=True)
    else:
        out.print(f"\n[bold]{prefix}text[/bold]")
        out.print(escape(result.region_output.rstrip("\n")), soft_wrap=True)


# The columns of the timing table: an edit's phases, in the order they run, then its total.
PHASES = ("localize", "prefill", "decode", "rest", "edit")


def phases(result: EditResult) -> dict[str, float]:
    """An edit's seconds by phase, rounded as printed, the phases adding up to ``edit`` (the
    total): the localizer's forward (program mode), the prompt's prefill, the decode after it,
    and the rest (the prompt built and tokenized, the progress printed, and on a process's first
    edit the model's token tables). The decoder's ``decode_s`` includes the localizer
    (engine.decoding.run), which is taken out here."""
    localize = round(result.breakdown.get("localize_s", 0.0), 2)
    prefill = round(result.timings.get("prefill_s", 0.0), 2)
    decode = round(result.timings.get("decode_s", 0.0) - result.breakdown.get("localize_s", 0.0), 2)
    total = round(result.timings.get("total_s", 0.0), 2)
    rest = max(0.0, round(total - localize - prefill - decode, 2))
    return dict(zip(PHASES, (localize, prefill, decode, rest, total)))


def timing_table(results: list[EditResult]):
    """Side-by-side timings of one request under several modes (one run each, same process),
    every phase in its own column, then each run's tokens; against ar when ar ran too. Short
    headers, no vertical rules and no wrapping, so it reads whole in an 80-column terminal."""
    from rich import box
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    ar = next((r for r in results if r.mode == "ar"), None)
    versus = ("x ar",) if ar else ()

    def table(title: str, columns: tuple[str, ...]) -> Table:
        t = Table(title=title, box=box.SIMPLE_HEAD, collapse_padding=True, pad_edge=False, show_edge=False)
        for col in columns:
            t.add_column(col, no_wrap=True, justify="left" if col in ("mode", "stop", "=ar") else "right")
        return t

    seconds = table("seconds", ("mode", *PHASES, *versus))
    tokens = table("tokens", ("mode", "steps", "copied", "forced", "stop", *("=ar" for _ in versus)))
    for r in results:
        phase = phases(r)
        row = [r.mode, *(f"{phase[p]:.2f}" for p in PHASES)]
        counts = [r.mode, str(r.tokens.generated), str(r.tokens.copied), str(r.tokens.forced), r.stop_reason]
        if ar:
            row.append(f"{ar.timings['total_s'] / r.timings['total_s']:.2f}x" if r.timings.get("total_s") else "-")
            counts.append("-" if r is ar else ("yes" if r.output_text == ar.output_text else "no"))
        seconds.add_row(*row)
        tokens.add_row(*counts)
    notes = ["edit = localize + prefill + decode + rest",
             "steps: decode steps; copied and forced tokens take none",
             *(["x ar: ar's edit time / this one's; =ar: the same output as ar"] if ar else [])]
    return Group(Text(), seconds, Text(), tokens, Text("\n".join(notes), style="dim"))
