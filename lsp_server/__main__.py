"""``python -m lsp_server [--stdio | --tcp --port N]``: the same as ``copy-as-decode serve``,
with its own name in the usage and help."""

import argparse
import sys

from lsp_server.commands.serve import add_parser

PROG = "python -m lsp_server"


def main(argv: list[str] | None = None) -> int:
    """Parse the ``serve`` command's flags under this module's name (a leading ``serve`` is
    accepted too) and run the server."""
    parser = add_parser(argparse.ArgumentParser(prog=PROG).add_subparsers())
    parser.prog = PROG
    args = list(sys.argv[1:] if argv is None else argv)
    parsed = parser.parse_args(args[1:] if args[:1] == ["serve"] else args)
    return int(parsed.func(parsed) or 0)


if __name__ == "__main__":
    sys.exit(main())
