"""The commands' --help is written for users: plain text (no reStructuredText markup), and the
language server's module entry point names itself as it is run."""

from __future__ import annotations

import argparse
import importlib

import pytest

from lsp_server.__main__ import main as lsp_main


@pytest.mark.parametrize("module", ["edit", "serve_openai", "analyze", "synth", "train_selector"])
def test_a_command_help_has_no_markup(module: str) -> None:
    sub = argparse.ArgumentParser(prog="copy-as-decode").add_subparsers()
    importlib.import_module(f"engine.commands.{module}").add_parser(sub)
    (parser,) = sub.choices.values()
    text = parser.format_help()
    assert "``" not in text and ":data:" not in text, text


def test_python_m_lsp_server_names_itself(capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        lsp_main(["--help"])
    usage = capsys.readouterr().out
    assert exit_.value.code == 0 and usage.startswith("usage: python -m lsp_server [-h] [--stdio | --tcp]")
    with pytest.raises(SystemExit):
        lsp_main(["serve", "--port", "x"])  # the subcommand's name is still accepted first
    assert "python -m lsp_server: error: argument --port" in capsys.readouterr().err
