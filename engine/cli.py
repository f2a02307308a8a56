"""The ``copy-as-decode`` command: one subcommand per module, each owning its own arguments.

Every subcommand module exposes ``add_parser(subparsers)``, which registers the subcommand and
sets ``func(args) -> int`` as its entry point. Imports stay lazy so ``--help`` is instant.
Packages beside the engine (the language server's ``serve``) add theirs through the
``copy_as_decode.commands`` entry-point group, so the engine never imports them.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from importlib.metadata import entry_points

SUBCOMMAND_MODULES = (
    "engine.commands.analyze",
    "engine.commands.edit",
    "engine.commands.serve_openai",
    "engine.commands.bench",
    "engine.commands.synth",
    "engine.commands.train_selector",
)
COMMAND_GROUP = "copy_as_decode.commands"


def subcommand_modules() -> list[str]:
    """The engine's own subcommands, then those other installed packages register."""
    plugins = sorted(ep.value for ep in entry_points(group=COMMAND_GROUP))
    return [*SUBCOMMAND_MODULES, *(m for m in plugins if m not in SUBCOMMAND_MODULES)]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="copy-as-decode", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in subcommand_modules():
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:  # subcommand not built yet
                continue
            raise
        module.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
