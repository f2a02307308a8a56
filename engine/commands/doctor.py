"""``copy-as-decode doctor``: one screen that says what this configuration will do and why (first
one sentence of what an edit will get, from measured figures: engine.runtime.expectations; then the
model and where it was found, backend, device, threads, context, flash attention, selector and
so the mode ``auto`` runs, the verify rule and whether drafting pays here, the prompt cache, and
an estimate from a short probe), each line naming the setting that changes it. It loads the model
as ``edit`` does, decodes nothing, and exits 2 when the configuration cannot run."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from engine.api import Engine
from engine.commands.files import ENGINE_FLAGS, workspace_settings
from engine.core.errors import EditError, ModelLoadError
from engine.doctor_report import load_failure, report
from engine.runtime.selector.adapter import resolve_selector
from engine.settings import add_setting_flags, engine_arguments, given_flags, with_flags
from engine.verdict import EXIT_BAD_REQUEST

DESCRIPTION = """\
Say what this configuration will do, and why, without editing anything. The first
line says in one sentence what an edit will get: the mode that runs, whether it
drafts, and the whole-edit ratio against ar measured for this backend and verify
rule (the results file is named), or "no measured figure". Then the model
and where it was found, the backend, device and threads, the context, flash
attention, whether a span selector was found (so what mode auto runs), the verify
rule and whether speculative decoding drafts here, the prompt cache, and what to
expect from a short timing probe (an estimate). Each line names the setting that
changes it. Settings come from the workspace files of PATH, then the flags.

example:
  copy-as-decode doctor
  copy-as-decode doctor --selector none --json

exit status:
  0  this configuration runs
  2  it cannot: the model or the backend is missing (the message names the fix)
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("doctor", help="say what this configuration will do and why (no edit)", description=DESCRIPTION,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("path", nargs="?", type=Path, default=Path("."), metavar="PATH",
                   help="a file or folder whose workspace settings apply (default: the current folder)")
    add_setting_flags(p, ["mode", *ENGINE_FLAGS, "verify"])
    p.add_argument("--json", action="store_true", help="print the facts as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    settings = with_flags(workspace_settings(args.path), given_flags(args))
    began = time.perf_counter()
    try:
        resolve_selector(settings.model.selector, settings.model.name)  # a bad adapter folder fails before the model loads
        engine = Engine.load(**engine_arguments(settings))
    except (ModelLoadError, EditError) as exc:
        failure = load_failure(exc)
        if args.json:
            print(json.dumps(failure, indent=2))
        else:
            print(f"error: {failure['error']}" + (f"\nfix: {failure['fix']}" if failure["fix"] else ""),
                  file=sys.stderr)
        return EXIT_BAD_REQUEST
    load_s = time.perf_counter() - began
    try:
        facts = report(engine, settings, load_s)
    finally:
        engine.close()
    if args.json:
        print(json.dumps({k: v for k, v in facts.items() if k != "screen"}, indent=2))
    else:
        print(facts["screen"])
    return 0
