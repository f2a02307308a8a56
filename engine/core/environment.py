"""The environment variables copy-as-decode reads, each declared once with what it does.

The readers take their variable's name from here (the shell scripts and the Makefile read theirs
by the same name), and docs/configuration.md's "Environment variables" section is written from
:data:`VARIABLES` (scripts/settings_reference.py); tests/test_settings_schema.py checks that every
``COPY_AS_DECODE_`` name in engine/, lsp_server/, scripts/ and the Makefile is declared here.
Settings go in settings files; these are what must not (keys) or cannot (where make puts its
environment) live there.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Variable:
    """One environment variable: its name, what it does, and whether only development reads it
    (make, the scripts, the tests) rather than the commands and the language server."""

    name: str
    help: str
    development: bool = False


VARIABLES: dict[str, Variable] = {}


def _declare(name: str, help: str, development: bool = False) -> str:
    VARIABLES[name] = Variable(name, help, development)
    return name


API_KEY = _declare("COPY_AS_DECODE_API_KEY", "the vLLM server's API key (the setting `apiKeyEnv` may name "
                   "another variable)")
SERVER_KEY = _declare("COPY_AS_DECODE_SERVER_KEY", "the bearer key `serve-openai` requires of its clients, when set "
                      "(`--api-key-env` names another variable)")
DOWNLOAD = _declare("COPY_AS_DECODE_DOWNLOAD", "`1` lets a hub id missing from the local Hugging Face cache be "
                    "downloaded (unless `HF_HUB_OFFLINE` is set); unset, such a model fails at once with the "
                    "command that fetches it")
SHARED = _declare("COPY_AS_DECODE_SHARED", "the data folder with the evaluation corpora and tokenizers (`data/`, "
                  "`tokenizers/`), read in place by `analyze`, `bench` and `synth`; default: `shared/` beside "
                  "the repository checkout")
NO_CACHE = _declare("COPY_AS_DECODE_NO_CACHE", "`1` turns off the start-up cache (`$XDG_CACHE_HOME/copy-as-decode/"
                    "startup/`, else `~/.cache/copy-as-decode/startup/`: a GGUF's converted tokenizer, xgrammar's "
                    "tables, compiled grammars, the measured thread count), so every process builds them afresh")
VENV = _declare("COPY_AS_DECODE_VENV", "the virtual environment `make` creates and runs (default `.venv`)",
                development=True)
VLLM_VENV = _declare("COPY_AS_DECODE_VLLM_VENV", "the separate virtual environment of the vLLM server the tests "
                     "start (default `.venv-vllm`)", development=True)
REQUIRE_VLLM = _declare("COPY_AS_DECODE_REQUIRE_VLLM", "`1`: the vLLM tests fail, instead of skipping, when the "
                        "vLLM environment is missing (`make test` sets it)", development=True)
CACHE = _declare("COPY_AS_DECODE_CACHE", "where scripts/vscode-deps.sh installs code-server for the VS Code test "
                 "(default `$XDG_CACHE_HOME/copy-as-decode`, else `~/.cache/copy-as-decode`)", development=True)
