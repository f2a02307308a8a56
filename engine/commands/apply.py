"""``copy-as-decode apply``: merge an update written elsewhere (a chat model's answer with
``... existing code ...`` markers, an agent's edit) into one file, or (no FILE) a chat answer
that names files into each of them (engine.commands.apply_answer). It shares the edit command's
flags and files (engine.commands.files) and its report, verdict and writing
(engine.commands.report); a merge no model writes (the aligner's) loads none
(engine.dispatch.ModelFree), unless in ``auto`` its rules leave a choice and the user named
their own model: then the model decides it (engine.apply.choice;
engine.dispatch.ModelFree.loads_for_choice). What it refuses and its exit statuses are in :data:`DESCRIPTION`."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from engine.api import EditError, EditRequest, Engine, language_for
from engine.commands.files import ENGINE_FLAGS, read_text, workspace_settings
from engine.commands.report import deliver, streamed
from engine.core.errors import ModelLoadError
from engine.core.modes import APPLY_AUTO_MODE, needs_model
from engine.decoding.events import EditResult
from engine.dispatch import ModelFree
from engine.language.resolve import ResolveError
from engine.runtime.selector.adapter import resolve_selector
from engine.settings import add_setting_flags, engine_arguments, given_flags, with_flags
from engine.verdict import EXIT_BAD_REQUEST, EXIT_CANCELLED, EXIT_UNPLACED

# What --compare may run beside the apply: the model's program, or the model rewriting the file.
COMPARE_MODES = ("program", "ar", "speculative")

DESCRIPTION = """\
Merge an update into a file: the changed code as a chat model or an agent wrote
it, with unchanged parts elided by comments such as "// ... existing code ..."
(in any phrasing) or without them. The merged file is written as a program
whose copies come from the file and from the update, so it takes about as long
as the changes, not the file.

By default (mode auto) the aligner writes that program without running the model,
unless its rules leave a choice (a definition of a new name: a rename of one
alike, or a new one beside it) and --model names your own model: then it is
loaded and the likelier merge is written. The result names who chose ("model"
or "rule") and the alternative (--json: breakdown.choice); with the embedded
model (no better than the rule there), or when no model loads, the rule decides.
--mode aligner is the rules alone: the rule decides every such choice and no
model is loaded, whatever --model names. --mode program has the model write the
merge, with the aligner's program as its draft (the model decides such a choice
there too); --mode speculative has the
model rewrite the file, drafted from that merge (the output is the model's own
rewrite, ar's, at copy speed where it agrees; --json's warnings say how many
drafted tokens it accepted).

It never writes a merge whose update could not all be placed (unless --partial:
then the rest is written and the unplaced chunks are listed), that did not
finish, or that breaks the file's syntax, unless --force is given.

Without FILE, the update is a chat answer that names its files: fenced blocks
headed by a path (```python src/app.py, or a line `src/app.py`, **app.py**,
"File: app.py" or "# app.py" just above the fence) or a unified diff (--- a/x,
+++ b/x, @@ hunks, applied exactly). Each file under --root (default: the
working folder) is merged in memory and checked; then every file is written, or
none. Refused, with every file unchanged (exit status 2): a path outside the
root (absolute, "..", a symbolic link leading out) or inside .git, a file that
does not exist (--create creates it), two blocks for the same file, a binary
file, a file over applyMaxLines. With FILE, an answer's one block headed by
FILE's path (or an update wrapped in one fence) is taken as the update; an
answer that names other or several files is refused: leave FILE out.

example:
  copy-as-decode apply app.py --update answer.py --in-place
  pbpaste | copy-as-decode apply app.js --update - --json
  copy-as-decode apply --update answer.md --root ~/project

exit status:
  0  done (and written where asked)
  1  cancelled
  2  a bad request: file, update, size, model, or a path the answer names
  3  the merge did not finish (token limit, or a loop)
  4  refused: it would delete most of the file
  5  refused: the file parsed before the merge and does not after it
  7  some of the update matches nothing in the file: nothing was written (the
     unmatched update lines are named, with their file; --partial writes the rest)
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("apply", help="merge an update (a chat model's answer, an agent's edit) into a file",
                       description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file", type=Path, metavar="FILE", nargs="?", default=None,
                   help="the file to merge into (UTF-8 text); leave it out when the update is an answer that "
                        "names its files")
    p.add_argument("--update", "-u", required=True, metavar="UPDATE_FILE",
                   help="the update: a file, or - to read it from standard input")
    p.add_argument("--root", type=Path, default=None, metavar="DIR",
                   help="without FILE: the folder the answer's paths are relative to (default: the working folder); "
                        "no path may lead out of it")
    p.add_argument("--create", action="store_true",
                   help="without FILE: create the files the answer names that do not exist (else refused)")
    p.add_argument("--instruction", "-i", default="", help="what the update is for (optional; the model reads it)")
    add_setting_flags(p, ["mode"], extra_choices={"mode": (APPLY_AUTO_MODE,)},
                      extra_help={"mode": f"{APPLY_AUTO_MODE} is the rules alone: no model is loaded, and the rule "
                                  "decides where they leave a choice (auto lets your own --model decide it)."})
    add_setting_flags(p, ["model", "device", "dtype", "max_new_tokens", "apply_window_lines", "apply_max_lines"])
    add_setting_flags(p, (*ENGINE_FLAGS[3:], "verify"))
    p.add_argument("--partial", action="store_true", help="when some of the update cannot be placed, write the "
                   "rest and list what was not placed (exit status 0)")
    p.add_argument("--force", action="store_true", help="write the merge even when it did not finish (exit status "
                   "3), would delete most of the file (4) or breaks the file's syntax (5)")
    p.add_argument("--output", type=Path, help="write the merged text to this path")
    p.add_argument("--in-place", action="store_true", help="replace FILE atomically (the original stays on any error)")
    p.add_argument("--json", action="store_true", help="print a machine-readable summary instead of the report "
                   "(the edit command's, plus 'unplaced': the update chunks that were not placed)")
    p.add_argument("--compare", default="", help="also merge with these modes (comma list of program, ar, "
                   "speculative) and print the timings side by side: ar has the model rewrite the file, "
                   "speculative too with the file as the prediction")
    p.set_defaults(func=run)


def compare_modes(spec: str) -> list[str]:
    modes = [m.strip() for m in spec.split(",") if m.strip()]
    unknown = [m for m in modes if m not in COMPARE_MODES]
    if unknown:
        raise EditError(f"--compare {spec!r}: unknown mode {unknown[0]!r}; choose among {', '.join(COMPARE_MODES)}")
    return modes


def read_update(spec: str) -> str:
    """The update's text from a file or (``-``) standard input; UTF-8 only."""
    if spec != "-":
        return read_text(Path(spec))
    data = sys.stdin.buffer.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise EditError(f"the update on standard input is not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def _run_answer(args: argparse.Namespace, err) -> int:
    """No FILE: the update is an answer that names its files (engine.commands.apply_answer)."""
    from engine.commands.apply_answer import run_answer

    try:
        answer = read_update(args.update)
    except EditError as exc:
        err.print(f"[bold red]error:[/bold red] {exc}")
        return EXIT_BAD_REQUEST
    return run_answer(args, answer)


def one_file_update(update: str, file: Path) -> str:
    """The update for FILE: the code itself, or a chat answer's one block for it (its fence or its
    path line dropped); an answer naming other or several files is an :class:`EditError` that
    says to leave FILE out (engine.apply.answer.update_for_file)."""
    from engine.apply.answer import update_for_file

    try:
        return update_for_file(update, str(file))
    except ValueError as exc:
        raise EditError(str(exc)) from None


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    out = Console(stderr=args.json)
    err = Console(stderr=True)
    if args.file is None:
        return _run_answer(args, err)
    if args.root is not None or args.create:
        err.print("[bold red]error:[/bold red] --root and --create are for an answer that names its files: "
                  "leave FILE out, or leave them out")
        return EXIT_BAD_REQUEST
    try:
        compare = compare_modes(args.compare or "")
        if args.in_place and args.output is not None:
            raise EditError("--in-place and --output exclude each other: write FILE itself or another path, not both")
        text = read_text(args.file)
        update = one_file_update(read_update(args.update), args.file)
        settings = with_flags(workspace_settings(args.file), given_flags(args))
        request = EditRequest.from_settings(settings, text, args.instruction, mode=args.mode, update=update,
                                            partial=args.partial, language=language_for(str(args.file)))
        engine: Engine | ModelFree = ModelFree(settings.model.name)  # the aligner's merge loads no model
        if needs_model(request.mode, apply=True) or compare:
            resolve_selector(settings.model.selector, settings.model.name)  # a bad adapter folder fails before the model loads
            with err.status(f"loading model {settings.model.name}..."):
                engine = Engine.load(**engine_arguments(settings), progress=lambda m: err.print(f"[dim]{m}[/dim]"))
            engine.prime()
        elif ModelFree.loads_for_choice(settings.model.name, request):
            from engine.commands.apply_answer import load_for_choice

            engine = load_for_choice(settings, err) or engine  # it decides under its lock (Engine.plan)
        # the merge's progress is printed when a model was loaded for it (the aligner's alone, a
        # choice decided or not, is at once)
        quiet = args.json or not needs_model(request.mode, apply=True) and not compare
        result = streamed(engine.stream(request), engine.resolve_mode(request.mode, apply=True), out, quiet=quiet)
        compared: dict[str, EditResult] = {}
        for mode in compare:
            assert isinstance(engine, Engine)
            engine.forget_prompts()  # each mode runs as a first edit: none reuses another's prompt
            with err.status(f"running {mode} for comparison..."):
                compared[mode] = engine.edit(replace(request, mode=mode))
    except (EditError, ModelLoadError, ResolveError) as exc:
        err.print(f"[bold red]error:[/bold red] {exc}")
        return EXIT_BAD_REQUEST
    return deliver(args, request, result, compared, out, err, never_forced=(EXIT_CANCELLED, EXIT_UNPLACED),
                   says_nothing_written=(EXIT_UNPLACED,))
