"""What the file commands (``edit``, ``apply``) do with an edit's events and result: print its
progress as it streams, judge it (engine.verdict), write it where asked, and print the report
(what the model wrote, a diff, warnings, the timing table) or the ``--json`` summary."""

from __future__ import annotations

import argparse
import difflib
import json
from pathlib import Path
from typing import Iterator

from engine.commands.files import write_atomic
from engine.core.modes import traits
from engine.decoding.events import EditResult, EditStarted, Event, OpResolved
from engine.decoding.request import EditRequest
from engine.dispatch import finished
from engine.language.program import Gen
from engine.verdict import EXIT_CANCELLED, json_summary, judge

BASELINE_MODE = "ar"  # what the timing table compares every mode with, when it ran


def deliver(args: argparse.Namespace, request: EditRequest, result: EditResult, compared: dict[str, EditResult],
            out, err, *, notice: str = "", never_forced: tuple[int, ...] = (EXIT_CANCELLED,),
            says_nothing_written: tuple[int, ...] = ()) -> int:
    """What ``edit`` and ``apply`` do with a result: judge it, write it to ``--output`` /
    ``--in-place`` when the verdict allows (or ``--force``, except for the statuses in
    ``never_forced``), print it (or ``--json``) and return the exit status. ``notice``: a line
    for the user after the report; ``says_nothing_written``: statuses whose message says so itself."""
    from rich.markup import escape

    verdict = judge(result, request.instruction, request.max_new_tokens, request.language, request.focus_line)
    status, message = verdict.exit_code, verdict.message
    targets = [path for path, wanted in ((args.output, bool(args.output)), (args.file, args.in_place)) if wanted]
    write = status == 0 or (args.force and status not in never_forced)
    if write:
        for path in targets:
            write_atomic(path, result.output_text)
    if args.json:
        print(json.dumps(json_summary(result, compared, verdict.damage, message, targets if write else [],
                                      request.language, verdict.syntax, verdict.far), indent=2))
    else:
        report(out, args.file, result, compared)
        if notice:
            err.print(f"[bold yellow]{escape(notice)}[/bold yellow]")
    if status and write:
        err.print(f"[bold yellow]warning:[/bold yellow] {message}; written anyway (--force)")
        return 0
    if status in says_nothing_written:
        err.print(f"[bold red]error:[/bold red] {message}")
    elif status:
        what = f"nothing was written to {', '.join(map(str, targets))}" if targets else "nothing was written"
        if verdict.kind == "far":  # the user pointed elsewhere: where it edits leads, then how to have it
            err.print(f"[bold red]error:[/bold red] {message}; --force writes it ({what})")
            return status
        err.print(f"[bold red]error:[/bold red] {message}; {what}"
                  + ("" if status == EXIT_CANCELLED else " (--force writes it anyway)"))
    return status


def streamed(events: Iterator[Event], mode: str, out, quiet: bool) -> EditResult:
    """The result of an edit's ``events`` in the concrete ``mode``, each printed as it comes
    unless ``quiet``: the start, then each op (a program's op, or a text mode's line)."""
    program = not traits(mode).writes_text

    def show(event: Event) -> None:
        if quiet:
            return
        if isinstance(event, EditStarted):
            out.print(f"[bold]{event.mode}[/bold] edit with {event.model}: {event.input_lines} input lines, "
                      f"{event.prompt_tokens} prompt tokens")
        elif isinstance(event, OpResolved):
            out.print(_progress_line(event, program))

    return finished(events, show)


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


def report(out, path: Path, result: EditResult, compared: dict[str, EditResult]) -> None:
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

    if not traits(result.mode).writes_text:
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

    ar = next((r for r in results if r.mode == BASELINE_MODE), None)
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
