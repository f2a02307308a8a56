"""``python -m lsp_server [--stdio | --tcp --port N]``: the same as ``copy-as-decode serve``."""

import sys

from lsp_server.commands.serve import main

if __name__ == "__main__":
    sys.exit(main())
