"""Subcommands of the copy-as-decode CLI that belong to the language server."""
