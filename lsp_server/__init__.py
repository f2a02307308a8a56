"""The copy-as-decode language server (pygls): "AI fix" / "AI edit…" code actions that stream
an edit program's output into the editor. Start it with ``python -m lsp_server`` or
``copy-as-decode serve``."""

__version__ = "0.1.0"
