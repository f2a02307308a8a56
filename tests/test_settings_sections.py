"""The settings nested by concern (engine/settings/schema.py): each setting is one section's field,
every key users write flat is read as that field, a section may also be written whole, and the
runtime's ``BackendOptions`` is the backend section itself."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from engine import settings as config
from engine.runtime.backends import BackendOptions
from engine.settings.schema import lookup


def test_each_setting_is_one_sections_field():
    assert list(config.SECTIONS) == ["model", "backend", "edit", "apply", "editor", "check", "http"]
    fields = {(spec.section, spec.field) for spec in config.SPECS.values()}
    assert len(fields) == len(config.SPECS) == 34
    for spec in config.SPECS.values():
        assert spec.field in config.SECTIONS[spec.section].model_fields, spec.path
        assert config.DEFAULTS.value(spec.name) == spec.default
    paths = {spec.name: spec.path for spec in config.SPECS.values()}
    assert (paths["model"], paths["max_new_tokens"], paths["apply_window_lines"], paths["check_command"]) == (
        "model.name", "edit.max_new_tokens", "apply.window_lines", "check.command")


def test_flat_names_build_the_sections():
    settings = config.Settings(model="a.gguf", backend="llamacpp", threads=2, max_new_tokens=5,
                               apply_window_lines=7, check_command="true", chat_max_tokens=9)
    assert (settings.model.name, settings.model.backend, settings.backend.threads) == ("a.gguf", "llamacpp", 2)
    assert (settings.edit.max_new_tokens, settings.apply.window_lines) == (5, 7)
    assert (settings.check.command, settings.http.chat_max_tokens) == ("true", 9)
    assert settings == config.Settings(model={"name": "a.gguf", "backend": "llamacpp"}, backend={"threads": 2},
                                       edit={"max_new_tokens": 5}, apply={"window_lines": 7},
                                       check={"command": "true"}, http={"chat_max_tokens": 9})
    both = config.Settings(edit={"mode": "ar"}, max_new_tokens=3)  # a section whole, and a flat name of it
    assert (both.edit.mode, both.edit.max_new_tokens) == ("ar", 3)
    with pytest.raises(ValueError, match="mdoe"):
        config.Settings(mdoe="ar")


def test_with_values_and_value_read_flat_names():
    settings = config.Settings().with_values({"threads": 4, "mode": "ar", "check_timeout": 5})
    assert (settings.backend.threads, settings.edit.mode, settings.check.timeout) == (4, "ar", 5)
    assert settings.value("check_timeout") == 5 and settings.value("model") == "default"
    assert config.Settings().edit.mode == "auto"  # the original is unchanged (frozen)
    assert settings.lsp_dict()["checkTimeout"] == 5 and list(settings.lsp_dict()) == [
        spec.key for spec in config.SPECS.values()]


def test_backend_options_is_the_backend_section():
    """One declaration: the settings nest the runtime's class, and what the CLI and the server
    load with is that section, as it is."""
    assert config.Settings.model_fields["backend"].annotation is BackendOptions
    declared = [name for name, info in BackendOptions.model_fields.items() if info.description]
    assert declared == [spec.field for spec in config.SPECS.values() if spec.section == "backend"]
    chosen = config.Settings(context_size=2048, batch_size=64)
    options = config.engine_arguments(chosen)["options"]
    assert options is chosen.backend and (options.context_size, options.batch_size) == (2048, 64)
    assert BackendOptions(threads=None, server_url=None) == BackendOptions()  # None: not given
    assert BackendOptions(timeout_s=3).timeout_s == 3.0 and "timeoutS" not in config.Settings().lsp_dict()


def test_backend_options_documents_only_its_fields():
    """Every ``name`` its docstring writes is one of its fields (it once documented a
    ``concurrent`` it did not have)."""
    named = set(re.findall(r"``([a-z][a-z0-9_]*)``", BackendOptions.__doc__ or ""))
    assert named and named <= set(BackendOptions.model_fields), named - set(BackendOptions.model_fields)
    undocumented = [name for name, info in BackendOptions.model_fields.items()
                    if not info.description and name not in named]
    assert not undocumented, f"say what {undocumented} are"


@pytest.mark.parametrize("key, section, name", [
    ("maxNewTokens", None, "max_new_tokens"), ("edit.maxNewTokens", None, "max_new_tokens"),
    ("apply.window-lines", None, "apply_window_lines"), ("windowLines", "apply", "apply_window_lines"),
    ("apply_window_lines", "apply", "apply_window_lines"), ("name", "model", "model"),
    ("command", "check", "check_command"), ("mode", "apply", None), ("threads", "edit", None),
    ("windowLines", None, None),
])
def test_a_key_names_its_setting_flat_or_in_its_section(key, section, name):
    assert lookup(key, section) == name


def test_a_section_may_be_written_whole_in_editor_settings():
    layer = config.parse_layer({"edit": {"maxNewTokens": 5, "mdoe": "ar", "threads": 2}, "apply.windowLines": 9,
                                "backend": {"serverUrl": "http://h:1"}, "check": {"command": "x"},
                                "model": "m"}, "pushed settings")
    assert layer.values == {"max_new_tokens": 5, "apply_window_lines": 9, "model": "m"}
    assert layer.warnings == [
        "pushed settings: unknown setting 'edit.mdoe' ignored; did you mean 'edit.mode'?",
        "pushed settings: unknown setting 'edit.threads' ignored; did you mean 'backend.threads'?",
        "pushed settings: backend.serverUrl is only read from user-level settings (the client's "
        "initializationOptions); ignored here",
        "pushed settings: check.command is only read from user-level settings (the client's "
        "initializationOptions); ignored here"]
    user = config.parse_layer({"backend": {"serverUrl": "http://h:1"}, "model": {"name": "m"}}, "user", user_level=True)
    assert user.values == {"server_url": "http://h:1", "model": "m"} and not user.warnings


def test_a_files_section_tables_are_read_with_their_lines(tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text('[tool.copy-as-decode]\nmode = "ar"\n\n'
                                             '[tool.copy-as-decode.apply]\nwindow_lines = 4\nmax_lines = 0\n')
    path = tmp_path / ".copy-as-decode.toml"
    path.write_text('context_lines = 3\n\n[edit]\nmax_new_tokens = 7\nprompt_style = "long"\n\n'
                    '[editor]\nwarm_up = "off"\n')
    settings, warnings = config.load_workspace_settings(tmp_path / "f.py")
    assert (settings.edit.mode, settings.apply.window_lines, settings.apply.max_lines) == ("ar", 4, 5000)
    assert (settings.edit.context_lines, settings.edit.max_new_tokens, settings.editor.warm_up) == (3, 7, "off")
    assert warnings == [
        f"{tmp_path / 'pyproject.toml'}:6: apply.max_lines must be between 1 and 5000, got 0; ignored",
        f"{path}:5: edit.prompt_style 'long' is not valid; choose one of auto, few-shot, selector; ignored"]


def test_a_pyproject_with_only_a_sections_table_is_read(tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n\n[tool."copy-as-decode".edit]\nmode = "ar"\n')
    settings, warnings = config.load_workspace_settings(tmp_path / "f.py")
    assert settings.edit.mode == "ar" and not warnings


def test_the_reference_shows_the_flat_key_and_the_section_field():
    text = (Path(__file__).resolve().parents[1] / "docs" / "configuration.md").read_text()
    for spec in config.SPECS.values():
        assert f"| `{spec.key}` | `{spec.path}` |" in text, spec.name
