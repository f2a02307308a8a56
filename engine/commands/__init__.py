"""Subcommands of the copy-as-decode CLI (see engine/cli.py)."""
