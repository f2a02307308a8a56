"""``copy-as-decode edit``: a headless edit of one file. What it prints, what it refuses to write
and its exit statuses are in :data:`DESCRIPTION` (its ``--help``); the statuses are
engine.verdict's, and the syntax check is engine/checks/syntax.py."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

from engine.api import EditError, EditRequest, Engine, language_for
from engine.commands.files import ENGINE_FLAGS, read_text, workspace_settings, write_atomic
from engine.commands.report import deliver, report, streamed
from engine.core.choices import DEFAULT_FOCUS_POLICY, FOCUS_POLICIES
from engine.core.errors import ModelLoadError
from engine.core.modes import AUTO, modes_where
from engine.decoding.results import empty_result
from engine.language.resolve import ResolveError
from engine.runtime.selector.adapter import resolve_selector
from engine.settings import add_setting_flags, engine_arguments, given_flags, with_flags
from engine.core.choices import FIX_INSTRUCTION
from engine.verdict import EXIT_BAD_REQUEST, EXIT_NO_FIX, check_focus, json_summary, no_fix

# What --compare may run beside the edit: auto, and every mode an instruction's edit runs alone.
COMPARE_MODES = (AUTO, *modes_where(given_program=False, apply_only=False))


DESCRIPTION = """\
Edit one file with the model, without an editor. It prints the edit's progress,
what the model wrote (the program in program mode, the text in ar, speculative
and pld mode), a diff and the time each phase took.

It never writes an edit that did not finish, would delete or rewrite most of the
region for a fix, breaks the file's syntax, or (with --focus LINE) changes only
lines more than 3 from LINE, unless --force is given.

With --candidates K it decodes variants (other lines the model finds likely,
other changes at the line) until K distinct candidates change the code and
pass those guards, or 4 x K decodes are spent; it then says how many it found
and what the other decodes did ("3 distinct candidates; the model had no
fourth in 16 decodes (2 changed nothing, 11 repeated others)"). Without
--check the best-scored one is written. With --check CMD it runs CMD on each
in a temporary copy of FILE's folder ({file} is the candidate's path there;
exit status 0 passes) and stops at the first that passes. Only a candidate
that passes is written; with --max-rounds 2 the first failing check's output
joins the instruction for one more round. The
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
  4  held: it would delete or rewrite most of the region for a fix, or with
     --focus every line it changes is more than 3 lines from the focus, blank
     lines not counted ("it edits lines 4-4, far from line 10 where you
     pointed; --force writes it"; an insertion changes the lines beside it)
  5  refused: the file parsed before the edit and does not after it (Python,
     and every language with a tree-sitter grammar, by the file's suffix)
  6  --check: no candidate passed the check; nothing was written (the best
     candidate's diff and its check output are printed; when the edit as
     asked changed nothing, the no-fix reason of 8 follows)
  7  (copy-as-decode apply's: an update that could not all be placed)
  8  no fix: the edit finished and changed nothing (the model kept the code);
     it says where and why, and what to try (--output still gets the text)

An empty region (an empty file) exits 0: there is nothing to fix, and the
model is not asked. With --compare the status is the edit's own mode's.
An empty or blank --instruction is read as "Fix the bug".
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("edit", help="edit a file with the model, without an editor", description=DESCRIPTION,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file", type=Path, metavar="FILE", help="the file to edit (UTF-8 text)")
    p.add_argument("--instruction", "-i", required=True, help="what to change, e.g. 'Fix the bug' (what an "
                   "empty or blank one means)")
    p.add_argument("--lines", help="edit only lines A-B (1-based, inclusive)")
    add_setting_flags(p, ["mode"], extra_choices={"mode": ("pld",)},
                      extra_help={"mode": "pld (llama.cpp's prompt-lookup drafting) is for measuring."})
    add_setting_flags(p, ["model", "device", "dtype", "max_new_tokens"])
    p.add_argument("--focus", type=int, metavar="LINE", help="the line the problem is at or near (1-based, "
                   "in FILE's numbering); the prompt points the model at it, and an edit that changes only "
                   "lines more than 3 from it is held (exit status 4)")
    p.add_argument("--focus-policy", default=DEFAULT_FOCUS_POLICY, choices=FOCUS_POLICIES,
                   help="program mode: hold (default) is guard unless --focus is about as likely as the best line "
                   "near it, where it stays as under keep; guard puts the hint on the likeliest line near --focus "
                   "(or anywhere without it) and makes the model change it; keep holds the hint on --focus itself "
                   "(a line you know is wrong, e.g. a diagnostic's); move is the first policy, for measuring")
    add_setting_flags(p, (*ENGINE_FLAGS[3:], "verify"))
    p.add_argument("--force", action="store_true", help="write the edit even when it did not finish (token limit, "
                   "loop: exit status 3), would delete or rewrite most of the region or edits only lines far "
                   "from --focus (4), or breaks the file's syntax (5)")
    p.add_argument("--output", type=Path, help="write the edited text to this path")
    p.add_argument("--in-place", action="store_true", help="replace FILE atomically (the original stays on any error)")
    p.add_argument("--json", action="store_true", help="print a machine-readable summary instead of the report")
    p.add_argument("--compare", default="", help="also run these modes on the same request (comma list) and "
                   "print the timings side by side, e.g. --compare ar")
    p.add_argument("--check", metavar="CMD", help="a shell command that accepts a fix: {file} is the path of a "
                   "temporary copy holding the candidate; exit status 0 passes; only a passing candidate is written")
    p.add_argument("--check-timeout", type=float, default=60.0, metavar="S", help="seconds one check may run "
                   "before its process group is killed (default 60)")
    p.add_argument("--candidates", type=int, default=1, metavar="K", help="distinct candidates a round "
                   "(default 1): variants are decoded until K change the code and pass the guards, at most "
                   "4 x K decodes; without --check the best-scored one is written")
    p.add_argument("--max-rounds", type=int, default=1, metavar="R", help="with --check: rounds of candidates, each "
                   "after the first told the first failing check's output (default 1)")
    p.set_defaults(func=run)


def validate_args(args: argparse.Namespace) -> None:
    """Every argument error, before anything is read or loaded (exit status 2): the CLI must not
    spend a model load on a request it will refuse."""
    compare = [m.strip() for m in (args.compare or "").split(",") if m.strip()]
    unknown = [m for m in compare if m not in COMPARE_MODES]
    if unknown:
        choices = ", ".join(COMPARE_MODES)
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


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    out = Console(stderr=args.json)
    err = Console(stderr=True)
    if not args.instruction.strip():
        err.print(f"[dim]an empty instruction: editing with \"{FIX_INSTRUCTION}\"[/dim]")
        args.instruction = FIX_INSTRUCTION
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
        first, end = request.region_bounds()
        request = replace(request, mode=engine.resolve_mode(request.mode, one_shot_lines=end - first))
        err.print(f"[dim]backend: {engine.model_for(request.mode).runtime.describe()}[/dim]")
        if args.check or args.candidates > 1:
            return _run_candidates(args, engine, request, out, err)
        others = [m.strip() for m in args.compare.split(",") if m.strip() and m.strip() != request.mode]
        if others:
            engine.prime()  # so the first timed mode does not pay one-time costs
            engine.forget_prompts()  # and each mode runs as a first edit: none reuses another's prompt
        result = streamed(engine.stream(request), request.mode, out, quiet=args.json)
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
    status = deliver(args, request, result, compared, out, err, notice=unchanged.message if unchanged else "")
    return EXIT_NO_FIX if status == 0 and unchanged else status


def _run_candidates(args: argparse.Namespace, engine: Engine, request: EditRequest, out, err) -> int:
    """``--check`` / ``--candidates``: the search (engine.candidates), then write what it chose."""
    from rich.markup import escape

    from engine.candidates import CheckSpec, search_fixes
    from engine.candidates.outcome import decide, search_summary

    check = CheckSpec(args.check, args.check_timeout, Path.cwd()) if args.check else None
    with err.status("candidates...") as status:
        search = search_fixes(engine, request, k=args.candidates, check=check, max_rounds=args.max_rounds,
                              file_path=args.file, progress=lambda message: status.update(message))
    decision = decide(search, check is not None, args.candidates)
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
    if search.words() not in decision.message:
        out.print(f"[dim]{escape(search.words())}[/dim]")
    shown = decision.write or search.best
    if shown is not None:
        report(out, args.file, shown.result, {})
        if shown.check is not None and not shown.check.passed:
            out.print("\n[bold]check output[/bold]")
            out.print(escape(shown.check.output.rstrip()), soft_wrap=True)
    if decision.message:
        colour = "red" if decision.exit_code not in (0, EXIT_NO_FIX) else "yellow"
        err.print(f"[bold {colour}]{escape(decision.message)}[/bold {colour}]")
    return decision.exit_code


