"""Settings: one typed schema, its sources and their precedence, and the command line's flags.

- :mod:`engine.settings.schema`: every setting declared once (:class:`Settings`, one section per
  concern: model, backend, edit, apply, editor, check, http), read back by flat name as
  :data:`SPECS` for the editors, the CLI and the docs, and the one message for a bad value;
- :mod:`engine.settings.sources`: one source's keys (:class:`Layer`), the workspace's config
  files, their precedence and their merge (:func:`merge_layers`);
- :mod:`engine.settings.allow`: which models and adapter folders a workspace may name;
- :mod:`engine.settings.flags`: the CLI flags and the keyword arguments of ``Engine.load``;
- :mod:`engine.settings.toml_lines`: the line of each key in a config file, for messages.

The language server's hot reload of config files is the server's (lsp_server.workspace_config).
The names below are the package's API for the rest of the engine and the front doors.
"""

from engine.settings.allow import model_allowed, selector_allowed
from engine.settings.flags import add_setting_flags, engine_arguments, given_flags, with_flags
from engine.settings.schema import (
    DEFAULTS,
    SECTIONS,
    SPECS,
    ConfigError,
    Settings,
    Spec,
    check_value,
    unknown_key_message,
)
from engine.settings.sources import (
    CONFIG_FILE,
    PYPROJECT,
    PYPROJECT_TABLE,
    SECTION,
    Layer,
    find_config_files,
    load_workspace_settings,
    lsp_section,
    merge_layers,
    parse_layer,
    read_config_file,
)

__all__ = [
    "CONFIG_FILE", "DEFAULTS", "PYPROJECT", "PYPROJECT_TABLE", "SECTION", "SECTIONS", "SPECS", "ConfigError", "Layer",
    "Settings", "Spec", "add_setting_flags", "check_value", "engine_arguments", "find_config_files",
    "given_flags", "load_workspace_settings", "lsp_section", "merge_layers", "model_allowed",
    "parse_layer", "read_config_file", "selector_allowed", "unknown_key_message", "with_flags",
]
