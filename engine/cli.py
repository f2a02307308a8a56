"""The ``copy-as-decode`` command: one subcommand per module, each owning its own arguments.

Every subcommand module exposes ``add_parser(subparsers)``, which registers the subcommand and
sets ``func(args) -> int`` as its entry point. Imports stay lazy so ``--help`` is instant.
"""

from __future__ import annotations

import argparse
import importlib
import sys

SUBCOMMAND_MODULES = (
    "engine.commands.analyze",
    "engine.commands.edit",
    "engine.commands.serve_openai",
    "engine.commands.bench",
    "engine.commands.synth",
    "engine.commands.train_selector",
    "lsp_server.commands.serve",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="copy-as-decode", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in SUBCOMMAND_MODULES:
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
