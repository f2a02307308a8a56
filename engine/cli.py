"""copy-as-decode: fast LLM code edits that copy what stays and write only what changes.

Each subcommand is a module of its own; only the one you run is imported, so ``edit`` and the
servers never load the benchmarks, the training or the evaluation code. Packages beside the
engine (the language server's ``serve``) add theirs through the ``copy_as_decode.commands``
entry-point group, so the engine never imports them.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from importlib.metadata import entry_points

# The engine's own subcommands: name -> the module whose ``add_parser(subparsers)`` registers it
# and sets ``func(args) -> int``.
COMMANDS: dict[str, str] = {
    "edit": "engine.commands.edit",
    "apply": "engine.commands.apply",
    "doctor": "engine.commands.doctor",
    "serve-openai": "engine.commands.serve_openai",
    "analyze": "engine.commands.analyze",
    "bench": "engine.commands.bench",
    "synth": "engine.commands.synth",
    "train-selector": "engine.commands.train_selector",
    "train-apply-selector": "engine.commands.train_apply_selector",
}
COMMAND_GROUP = "copy_as_decode.commands"
DESCRIPTION = ("Fast LLM code edits: the model copies the lines that stay and writes only what changes. "
               "Run 'copy-as-decode COMMAND --help' for a command's options.")


def commands() -> dict[str, str]:
    """Every subcommand's module: the engine's own, then those other installed packages register."""
    plugins = {ep.name: ep.value for ep in entry_points(group=COMMAND_GROUP)}
    return {**COMMANDS, **{name: module for name, module in sorted(plugins.items()) if name not in COMMANDS}}


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser for ``argv``: when it names a subcommand, only that subcommand's module is
    imported; otherwise (``--help``, a typo) every one is, to list them."""
    parser = argparse.ArgumentParser(prog="copy-as-decode", description=DESCRIPTION)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    known = commands()
    named = next((arg for arg in (argv if argv is not None else sys.argv[1:]) if not arg.startswith("-")), None)
    for name, module in known.items():
        if named in known and name != named:
            continue
        importlib.import_module(module).add_parser(sub)
    return parser


# One-edit commands whose process ends as soon as they return (see :func:`exit_now`).
EXIT_AT_ONCE = frozenset({"edit", "apply"})


def main(argv: list[str] | None = None) -> int:
    """Run the command ``argv`` names (None: this process's own command line; only then may a
    one-edit command end the process itself, :func:`exit_now`)."""
    args = build_parser(argv).parse_args(argv)
    try:
        code = int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    if argv is None and args.command in EXIT_AT_ONCE:
        exit_now(code)
    return code


def exit_now(code: int) -> None:
    """End the process with ``code`` once its output is flushed, without the interpreter's
    teardown: finalizing torch's, transformers' and xgrammar's modules takes about 0.6 s of CPU,
    a fifth of a headless edit's start-up, and a one-edit command has nothing left to do by then
    (its file is written, its temporary folders are gone, llama.cpp's memory goes with the process)."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (`| head`) or stream: nothing more to say
            pass
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main())
