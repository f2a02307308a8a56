"""``copy-as-decode serve``: run the language server over stdio (default) or TCP (127.0.0.1)."""

from __future__ import annotations

import argparse
import logging
import os
import sys


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("serve", help="run the language server (stdio, or --tcp on 127.0.0.1)",
                                   description="Run the copy-as-decode language server over stdio (default) "
                                               "or TCP on 127.0.0.1.")
    transport = parser.add_mutually_exclusive_group()
    transport.add_argument("--stdio", action="store_true", help="talk LSP over stdin/stdout (default)")
    transport.add_argument("--tcp", action="store_true", help="listen on 127.0.0.1:PORT instead")
    parser.add_argument("--port", type=int, default=2087, help="TCP port (with --tcp; default 2087)")
    parser.add_argument("--log-level", default="WARNING", choices=("DEBUG", "INFO", "WARNING", "ERROR"),
                        help="server log level (logs go to stderr)")
    parser.set_defaults(func=run)
    return parser


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=getattr(logging, args.log_level), stream=sys.stderr,
                        format="copy-as-decode %(levelname)s %(name)s: %(message)s")
    from lsp_server.server import create_server

    server = create_server()
    if args.tcp:
        if not 0 < args.port < 65536:
            print(f"--port {args.port} is not a TCP port (1-65535)", file=sys.stderr)
            return 2
        # Loopback only: the server edits files and loads models; never expose it to the network.
        server.start_tcp("127.0.0.1", args.port)
    else:
        server.start_io(sys.stdin.buffer, _protocol_stdout())
    return 0


def _protocol_stdout():
    """stdout for LSP messages only: the real fd 1 is kept for the protocol and fd 1 / sys.stdout
    then point at stderr, so a stray print (ours, a library's, or C code's) cannot corrupt it."""
    protocol_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(protocol_fd, "wb")

