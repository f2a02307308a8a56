"""The settings schema (engine/settings/schema.py ``Settings``) against every copy that cannot import it:
VS Code's ``contributes.configuration`` and src/settings.ts, the engine's own defaults
(``BackendOptions``, ``EditRequest``, the OpenAI endpoint's), the CLI's flags, and the generated
docs/configuration.md; and the one message format of a bad key, wherever it is read."""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import typing
from pathlib import Path

import pytest
from support import ADD as BUGGY

from engine import settings as config
from engine.cli import build_parser, main
from engine.core import choices

ROOT = Path(__file__).resolve().parents[1]
CLIENT = ROOT / "vscode-client"
# The extension's own settings (how it launches the server, its trace): not the server's.
CLIENT_ONLY = {"copyAsDecode.pythonPath", "copyAsDecode.serverArgs", "copyAsDecode.trace.server"}


def _properties() -> dict[str, dict]:
    return json.loads((CLIENT / "package.json").read_text())["contributes"]["configuration"]["properties"]


def _ts_list(source: str, name: str) -> list[str]:
    match = re.search(rf"export const {name} = \[(.*?)\](?: as const)?;", source, re.S)
    assert match, f"src/settings.ts has no `export const {name} = [...] as const;`"
    return re.findall(r'"([^"]*)"', match.group(1))


def test_defaults_are_valid_and_every_setting_has_help():
    assert config.Settings() == config.DEFAULTS  # DEFAULTS skips validation at import (a fast --help)
    assert list(config.Settings().lsp_dict()) == [spec.key for spec in config.SPECS.values()]
    for spec in config.SPECS.values():
        assert spec.help.strip() and "\n" not in spec.help, spec.name
        if spec.choices:
            assert spec.default in spec.choices, spec.name
        if spec.kind == "integer":
            assert spec.low is not None and spec.high is not None, f"{spec.name}: declare its range"
        for choice in spec.editor_choices or ():
            assert config.check_value(spec.name, choice) == choice


def test_package_json_is_the_schema():
    """Every server setting is contributed with the schema's type, default, choices, range and
    pattern; user-only settings have VS Code's "application" scope (user settings only), the rest
    "resource" (per folder, like the config files); nothing else claims the section."""
    props = _properties()
    assert set(props) - CLIENT_ONLY == {f"copyAsDecode.{spec.key}" for spec in config.SPECS.values()}
    for spec in config.SPECS.values():
        prop = props[f"copyAsDecode.{spec.key}"]
        want_default = list(spec.default) if isinstance(spec.default, tuple) else spec.default
        assert prop["type"] == spec.kind, spec.key
        assert prop["default"] == want_default, spec.key
        assert prop["scope"] == ("application" if spec.user_only else "resource"), spec.key
        enum = spec.editor_choices or spec.choices
        assert prop.get("enum") == (list(enum) if enum else None), spec.key
        assert (prop.get("minimum"), prop.get("maximum")) == (spec.low, spec.high), spec.key
        assert prop.get("pattern") == (spec.pattern if not spec.editor_choices else None), spec.key
        if spec.kind == "array":
            assert prop["items"] == {"type": "string"}, spec.key
        if "enumDescriptions" in prop:
            assert len(prop["enumDescriptions"]) == len(prop["enum"]), spec.key


def test_the_extension_sends_the_schemas_keys():
    """src/settings.ts: SERVER_KEYS (sent per folder) are the workspace settings in the schema's
    order, USER_ONLY_KEYS (sent only from user settings) the user-only ones."""
    source = (CLIENT / "src" / "settings.ts").read_text()
    specs = config.SPECS.values()
    assert _ts_list(source, "SERVER_KEYS") == [s.key for s in specs if not s.user_only]
    assert _ts_list(source, "USER_ONLY_KEYS") == [s.key for s in specs if s.user_only]
    assert _ts_list(source, "APPLY_MODES") == list(choices.APPLY_MODES)
    assert _ts_list(source, "SELECTOR_CHOICES") == list(choices.SELECTOR_CHOICES)


def test_the_schemas_choices_are_the_engines():
    """Each closed setting offers exactly its engine.core.choices set."""
    specs = config.SPECS
    assert (specs["mode"].choices, specs["apply_mode"].choices, specs["prompt_style"].choices) == (
        choices.USER_MODES, choices.APPLY_MODES, choices.PROMPT_STYLES)
    assert (specs["verify"].choices, specs["dtype"].choices, specs["backend"].choices) == (
        choices.VERIFY_RULES, choices.DTYPES, choices.BACKENDS)
    assert (specs["flash_attention"].choices, specs["warm_up"].choices) == (choices.FLASH_ATTENTION, choices.IDLE_WORK)
    assert set(choices.USER_MODES) <= set(choices.MODES)


def test_the_engines_defaults_are_the_schemas():
    from engine.api import EditRequest
    from engine.openai_api.app import ServerConfig
    from engine.runtime.backends import BackendOptions

    assert config.Settings().backend == BackendOptions()
    assert choices.PROMPT_STYLES == typing.get_args(typing.get_type_hints(EditRequest)["prompt_style"])
    request = EditRequest(text="", instruction="")
    defaults = config.Settings()
    assert (request.max_new_tokens, request.context_lines, request.prompt_style) == (
        defaults.edit.max_new_tokens, defaults.edit.context_lines, defaults.edit.prompt_style)
    assert ServerConfig(model_id="m").settings == defaults


def _subparser(command: str) -> argparse.ArgumentParser:
    action = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices[command]


@pytest.mark.parametrize("command", ["edit", "serve-openai"])
def test_cli_flags_are_the_schemas(command: str):
    """Each setting flag: the setting's choices (edit's --mode also takes pld, a measurement
    mode), no default of its own (None: the workspace's value, else the schema's)."""
    parser = _subparser(command)
    names = parser.get_default("setting_flags")
    assert {"backend", "threads", "flash_attention", "context_size", "batch_size"} <= set(names)
    for action in parser._actions:
        if action.dest in names:
            spec = config.SPECS[action.dest]
            assert action.option_strings == [spec.flag] and action.default is None
            extra = ("pld",) if (command, spec.name) == ("edit", "mode") else ()
            assert tuple(action.choices or ()) == ((*spec.choices, *extra) if spec.choices else ())


@pytest.mark.parametrize("argv, message", [
    (["--threads", "9999"], "--threads must be between 0 and 512, got 9999"),
    (["--threads", "four"], "--threads must be an integer, got 'four'"),
    (["--device", "tpu"], "--device 'tpu' is not a device; use auto, cpu, cuda, cuda:N or mps"),
    (["--flash-attention", "maybe"], "invalid choice: 'maybe'"),
])
def test_a_bad_flag_gets_the_schemas_message(capsys, tmp_path: Path, argv, message):
    with pytest.raises(SystemExit) as exit_:
        main(["edit", str(tmp_path / "f.py"), "-i", "Fix it", *argv])
    assert exit_.value.code == 2 and message in capsys.readouterr().err


def test_flags_over_settings_make_the_load_arguments():
    """The one path from settings and flags to ``Engine.load``: flags win, None flags do not
    count, and the backend options carry the merged values."""
    from engine.runtime.backends import BackendOptions

    settings = config.Settings(model="a.gguf", threads=2, flash_attention="on", mode="ar")
    args = config.engine_arguments(settings, {"threads": 4, "model": None, "server_url": "http://h:1"})
    assert args["model"] == "a.gguf" and args["options"].threads == 4
    assert args["options"].flash_attention == "on" and args["options"].server_url == "http://h:1"
    assert set(args) == {"model", "device", "dtype", "trust_remote_code", "selector", "backend", "options"}
    assert type(args["options"]) is BackendOptions  # the backend section itself: what the runtime receives


def test_the_reference_is_generated_from_the_schema():
    spec = importlib.util.spec_from_file_location("settings_reference", ROOT / "scripts" / "settings_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    text = module.render()
    assert (ROOT / "docs" / "configuration.md").read_text() == text, (
        "docs/configuration.md is stale: run python scripts/settings_reference.py")
    for item in config.SPECS.values():
        assert f"| `{item.key}` |" in text


# --- one message per bad key, wherever it is read -------------------------------------------------

BAD_FILE = 'mdoe = "program"\ncontext_lines = 7\nmax_new_tokens = "many"\n\nthreads = 9999\n'


def _expected(path: Path) -> list[str]:
    return [f"{path}:1: unknown setting 'mdoe' ignored; did you mean 'mode'?",
            f"{path}:3: max_new_tokens must be an integer, got 'many'; ignored",
            f"{path}:5: threads must be between 0 and 512, got 9999; ignored"]


def test_a_file_names_the_line_of_each_bad_key_and_keeps_the_others(tmp_path: Path):
    path = tmp_path / ".copy-as-decode.toml"
    path.write_text(BAD_FILE)
    settings, warnings = config.load_workspace_settings(tmp_path / "f.py")
    assert warnings == _expected(path)
    assert settings.edit.context_lines == 7 and settings.edit.max_new_tokens == 1024


def test_pyproject_lines_are_the_tables(tmp_path: Path):
    """The key's line inside [tool.copy-as-decode], not a same-named key of another table."""
    path = tmp_path / "pyproject.toml"
    path.write_text('[project]\nname = "x"\nmode = 1\n\n[tool.copy-as-decode]\n# comment\nmode = "fats"\n'
                    '"context-lines" = 3\n\n[tool.other]\nmode = 2\n')
    settings, warnings = config.load_workspace_settings(tmp_path / "f.py")
    assert warnings == [f"{path}:7: mode 'fats' is not valid; choose one of auto, program, speculative, ar; ignored"]
    assert settings.edit.context_lines == 3


def test_unknown_keys_are_answered_in_their_own_spelling():
    assert config.unknown_key_message("maxNewTokenz").endswith("did you mean 'maxNewTokens'?")
    assert config.unknown_key_message("max_new_tokenz").endswith("did you mean 'max_new_tokens'?")
    assert config.unknown_key_message("flash-atention").endswith("did you mean 'flash-attention'?")
    assert config.unknown_key_message("contextlines", snake=True).endswith("did you mean 'context_lines'?")
    assert "known settings: model, device" in config.unknown_key_message("colour")


def test_invalid_toml_names_its_line(tmp_path: Path):
    path = tmp_path / ".copy-as-decode.toml"
    path.write_text('mode = "ar"\ncontext_lines = \n')
    settings, warnings = config.load_workspace_settings(tmp_path / "f.py")
    assert len(warnings) == 1 and warnings[0].startswith(f"{path}:2: invalid TOML")
    assert "its settings are not used" in warnings[0] and settings.edit.mode == "auto"


def test_the_cli_prints_the_same_messages_on_stderr(capsys, tmp_path: Path):
    """`copy-as-decode edit` reads the file as the server does; it fails later here for want of a
    vLLM server URL (a real refusal, before any model loads)."""
    (tmp_path / ".copy-as-decode.toml").write_text(BAD_FILE)
    path = tmp_path / "f.py"
    path.write_text(BUGGY)
    code = main(["edit", str(path), "-i", "Fix it", "--backend", "vllm"])
    err = capsys.readouterr().err
    assert code == 2 and "needs the server's URL" in " ".join(err.split())
    for message in _expected(tmp_path / ".copy-as-decode.toml"):
        assert f"warning: {message}\n" in err


def test_serve_openai_prints_the_same_messages_on_stderr(capsys, tmp_path: Path):
    (tmp_path / ".copy-as-decode.toml").write_text(BAD_FILE)
    code = main(["serve-openai", "--workspace", str(tmp_path), "--backend", "vllm"])
    err = capsys.readouterr().err
    assert code == 2 and "needs the server's URL" in err
    for message in _expected(tmp_path / ".copy-as-decode.toml"):
        assert f"warning: {message}\n" in err


# --- declared once ------------------------------------------------------------------------------

# The closed sets of the settings (engine.core.choices) and the defaults the runtime shares with the
# schema (engine.core.defaults): nowhere else in the engine or the language server may write them out.
SETTING_CHOICES = ("USER_MODES", "APPLY_MODES", "PROMPT_STYLES", "VERIFY_RULES", "DTYPES", "BACKENDS",
                   "FLASH_ATTENTION", "IDLE_WORK", "SELECTOR_CHOICES")
# The names a setting's value goes by in the runtime (or a part of them: DEFAULT_PREFIX_TOKENS), where
# a literal default would be a second copy.
RUNTIME_NAMES = {"threads": ("threads",), "context_size": ("context", "context_size", "n_ctx"),
                 "batch_size": ("batch", "batch_size", "n_batch"), "gpu_layers": ("gpu_layers",),
                 "flash_attention": ("flash_attention",), "api_key_env": ("api_key_env",),
                 "prefix_cache_tokens": ("prefix_cache_tokens", "prefix_tokens", "max_tokens")}
OWNERS = {"engine/core/choices.py", "engine/core/defaults.py", "engine/core/environment.py"}


def _copies(source: str) -> list[tuple[int, str]]:
    """(line, what) for each choice set and shared default ``source`` writes out itself."""
    import ast

    sets = {frozenset(getattr(choices, name)): name for name in SETTING_CHOICES}
    defaults = [(alias, config.SPECS[name].default) for name, aliases in RUNTIME_NAMES.items() for alias in aliases]
    found = []

    def strings(nodes: list[ast.expr]) -> frozenset[str] | None:
        values = [n.value for n in nodes if isinstance(n, ast.Constant) and isinstance(n.value, str)]
        return frozenset(values) if len(nodes) > 1 and len(values) == len(nodes) else None

    def default(name: str, value: ast.expr | None, line: int) -> None:
        if isinstance(value, ast.Constant) and any(
                alias in name.lower() and type(value.value) is type(want) and value.value == want
                for alias, want in defaults):
            found.append((line, f"{name} = {value.value!r}"))

    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)) and strings(node.elts) in sets:  # Literal[...] too
            found.append((node.lineno, sets[strings(node.elts)]))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            default(node.target.id, node.value, node.lineno)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    default(target.id, node.value, node.lineno)
        elif isinstance(node, ast.arguments):
            positional = [*node.posonlyargs, *node.args]
            for arg, value in zip(positional[len(positional) - len(node.defaults):], node.defaults):
                default(arg.arg, value, arg.lineno)
            for arg, value in zip(node.kwonlyargs, node.kw_defaults):
                default(arg.arg, value, arg.lineno)
        elif isinstance(node, ast.Constant) and node.value == config.DEFAULTS.backend.api_key_env:
            found.append((node.lineno, repr(node.value)))
    return found


def test_the_settings_choices_and_shared_defaults_are_declared_once():
    copies = [f"{path.relative_to(ROOT)}:{line}: {what}"
              for path in sorted([*(ROOT / "engine").rglob("*.py"), *(ROOT / "lsp_server").rglob("*.py")])
              if path.relative_to(ROOT).as_posix() not in OWNERS
              for line, what in _copies(path.read_text(encoding="utf-8"))]
    assert not copies, "use engine.core.choices / engine.core.defaults instead of:\n" + "\n".join(copies)


@pytest.mark.parametrize("source, copy", [
    ('flash: tuple[str, ...] = ("auto", "on", "off")', "FLASH_ATTENTION"),
    ('def f(verify: Literal["auto", "argmax", "exact"] = "auto"): ...', "VERIFY_RULES"),
    ("class Options:\n    context: int = 4096\n", "context = 4096"),
    ("def load(path, batch_size=512): ...", "batch_size = 512"),
    ("DEFAULT_PREFIX_TOKENS = 8192", "DEFAULT_PREFIX_TOKENS = 8192"),
    ('KEY = "COPY_AS_DECODE_API_KEY"', "'COPY_AS_DECODE_API_KEY'"),
])
def test_a_second_copy_is_found(source: str, copy: str):
    assert [what for _, what in _copies(source)] == [copy]


@pytest.mark.parametrize("module", ["engine.settings", *sorted(
    f"engine.settings.{path.stem}" for path in (ROOT / "engine" / "settings").glob("*.py") if path.stem != "__init__")])
def test_each_settings_module_imports_first_without_watchdog(module: str):
    """watchdog is the language server's (hot reload); the engine's settings never need it. Each
    module also imports first, in a fresh process (its siblings never import the package's names)."""
    import subprocess
    import sys

    code = f"import sys, {module}; assert 'watchdog' not in sys.modules, 'watchdog was imported'"
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
