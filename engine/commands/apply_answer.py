"""``copy-as-decode apply --update answer.md [--root DIR]`` (no FILE): a chat answer that names
files, merged into each of them under the root and written to all of them or to none
(engine.workspace_apply). The report lists each file's outcome and diff; ``--json`` prints the
plan's summary."""

from __future__ import annotations

import argparse
import difflib
import json
from functools import cache
from pathlib import Path

from engine.api import EditError, Engine
from engine.commands.files import workspace_settings
from engine.core.errors import ModelLoadError
from engine.core.modes import needs_model
from engine.runtime.selector.adapter import resolve_selector
from engine.settings import Settings, engine_arguments, given_flags, with_flags
from engine.verdict import EXIT_BAD_REQUEST
from engine.workspace_apply import (FORCEABLE, AnswerOptions, AnswerPlan, ChoosingMerger, Merger, plan_answer,
                                   write_all)

# Flags of the one-file apply that name a single target, and what to do instead.
_ONE_FILE_ONLY = {"output": "--output", "in_place": "--in-place", "compare": "--compare"}


def run_answer(args: argparse.Namespace, answer: str) -> int:
    """Merge ``answer`` into the files it names under ``--root`` (default: the working folder);
    the exit status is the first refused file's (engine.workspace_apply.AnswerPlan.exit_code)."""
    from rich.console import Console
    from rich.markup import escape

    out, err = Console(stderr=args.json), Console(stderr=True)
    try:
        for name, flag in _ONE_FILE_ONLY.items():
            if getattr(args, name):
                raise EditError(f"{flag} takes FILE: an answer that names files writes each of them (every file or "
                               f"none); leave {flag} out, or give FILE")
        root = (args.root or Path.cwd())
        if not root.is_dir():
            raise EditError(f"--root {root}: no such folder")
        flags = given_flags(args)

        @cache
        def folder_settings(folder: Path) -> Settings:
            return with_flags(workspace_settings(folder / "_"), flags)

        def settings_for(path: Path) -> Settings:
            return folder_settings(path.parent)

        merger = _merger(folder_settings(root.resolve()), args, err)
        plan = plan_answer(answer, root, merger, settings_for,
                           AnswerOptions(args.instruction, args.mode, args.partial, args.create))
        status = plan.exit_code(args.force)
        written = write_all(plan) if status == 0 else []
    except (EditError, ModelLoadError) as exc:
        err.print(f"[bold red]error:[/bold red] {escape(str(exc))}")
        return EXIT_BAD_REQUEST
    if args.json:
        print(json.dumps(plan.json(written, args.force), indent=2))
    else:
        _report(out, plan, written)
    if plan.notice():
        err.print(f"[bold yellow]note:[/bold yellow] {escape(plan.notice())}")
    if status:
        err.print(f"[bold red]error:[/bold red] {escape(plan.message(args.force))}")
    elif plan.refusal() is not None:
        forced = "; ".join(f"{c.path}: {c.message}" for c in plan.changes if c.kind in FORCEABLE)
        err.print(f"[bold yellow]warning:[/bold yellow] {escape(forced)}; written anyway (--force)")
    return status


def _merger(settings: Settings, args: argparse.Namespace, err) -> Merger:
    """The aligner's merge (no model) unless the mode needs the model: then it is loaded once.
    In ``auto`` a user's own model is loaded at the first file whose merge leaves a choice, to
    decide it (engine.workspace_apply.ChoosingMerger), as for one file."""
    mode = args.mode or settings.value("mode")
    if not needs_model(mode, apply=True):
        return ChoosingMerger(settings.model.name, lambda: load_for_choice(settings, err))
    resolve_selector(settings.model.selector, settings.model.name)
    with err.status(f"loading model {settings.model.name}..."):
        engine = Engine.load(**engine_arguments(settings), progress=lambda m: err.print(f"[dim]{m}[/dim]"))
    engine.prime()
    return engine


def load_for_choice(settings: Settings, err) -> Engine | None:
    """The engine of the user's own model, loaded to decide where an apply's rules leave a choice
    (under its lock: engine.api.Engine.plan); None when it does not load: the rule decides, and
    the result says so."""
    try:
        with err.status(f"loading model {settings.model.name} to decide between two readings..."):
            return Engine.load(**engine_arguments(settings), progress=lambda m: err.print(f"[dim]{m}[/dim]"))
    except ModelLoadError as exc:
        err.print(f"[yellow]warning:[/yellow] {exc}; the rule decides")
        return None


def _report(out, plan: AnswerPlan, written: list[Path]) -> None:
    """Each file: what became of it, its diff, its warnings."""
    from rich.markup import escape

    done = set(written)
    for change in plan.changes:
        state = "written" if change.target in done else "not written" if change.kind == "write" else change.kind
        out.print(f"[bold]{escape(change.path)}[/bold]: {state}" + (" (created)" if change.before is None
                                                                      and change.after is not None else ""))
        if change.after is not None and change.changed:
            for line in difflib.unified_diff((change.before or "").splitlines(keepends=True),
                                             change.after.splitlines(keepends=True), f"a/{change.path}",
                                             f"b/{change.path}"):
                style = "green" if line.startswith("+") else "red" if line.startswith("-") else "dim"
                out.print(f"[{style}]{escape(line.rstrip(chr(10)))}[/{style}]")
        for warning in change.warnings:
            out.print(f"[yellow]warning:[/yellow] {escape(warning)}")
