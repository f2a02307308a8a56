"""Settings sources: one source's keys (a layer), the workspace's config files, and their merge.

Sources, lowest precedence first (a later source overrides the keys it sets)::

    1. built-in defaults                       (engine.settings.schema.Settings())
    2. [tool.copy-as-decode] in pyproject.toml (the nearest one from the file's folder upwards)
    3. .copy-as-decode.toml                    (every one from the workspace root down to the
                                                file's folder; nearer files override farther)
    4. LSP settings, section "copyAsDecode":
       a. initializationOptions                (user level)
       b. workspace/didChangeConfiguration     (pushed settings, e.g. Neovim's `settings`)
       c. workspace/configuration              (pulled per workspace folder, e.g. VS Code)

Editor settings win over workspace files ("editor first"); a key that is absent or null in a
source is not set by it, so clients should send only the keys the user set. Keys may be written
camelCase (``maxNewTokens``), snake_case or kebab-case, each flat (``maxNewTokens``, as the editors
send them) or inside its section (``edit.maxNewTokens``, a ``[edit]`` table). A problem with one key (unknown, with the
nearest known name; wrong type; out of range) skips that key with one message, the same wherever
it is read, naming the source (a file and its line); the source's other keys still apply. A file
that is not valid TOML cannot be read at all: the last good version of it stays in force (the
language server keeps it: lsp_server.workspace_config).

User-only settings (``trustRemoteCode``, ``allowedModels``, ``serverUrl``, ``servedModel``,
``apiKeyEnv``, ``checkCommand``: each runs code, widens what may load, or sends code elsewhere)
are honoured ONLY from initializationOptions (user-level settings) and command-line flags;
anywhere else they are ignored with a warning. A model or selector folder named by a source other
than the user's must be allowed (:mod:`engine.settings.allow`).
"""

from __future__ import annotations

import logging
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from engine.settings.allow import model_allowed, selector_allowed
from engine.settings.schema import (
    DEFAULTS,
    SECTIONS,
    USER_ONLY,
    ConfigError,
    Settings,
    check_value,
    lookup,
    unknown_key_message,
)
from engine.settings.toml_lines import key_lines

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

log = logging.getLogger(__name__)

SECTION = "copyAsDecode"
CONFIG_FILE = ".copy-as-decode.toml"
PYPROJECT = "pyproject.toml"
PYPROJECT_TABLE = "copy-as-decode"  # [tool.copy-as-decode]


@dataclass
class Layer:
    """The validated keys one source sets, plus what it had to say about the rest."""

    source: str
    values: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def parse_layer(raw: Mapping[str, Any] | None, source: str, *, user_level: bool = False,
                lines: Mapping[str, int] | None = None) -> Layer:
    """Validate one source's raw mapping: each bad key is skipped with a message
    ``"<source>[:<line>]: <problem>"`` (``lines``: the line of each key in a file) and the other
    keys apply. User-only keys are kept only when ``user_level``."""
    layer = Layer(source)
    if raw is None:
        return layer
    if not isinstance(raw, Mapping):
        layer.warnings.append(f"{source}: settings must be a table/object, got {type(raw).__name__}")
        return layer
    for key, value in raw.items():
        if key in SECTIONS and isinstance(value, Mapping):  # a section's table: [edit], "edit": {...}
            for inner, item in value.items():
                path = f"{key}.{inner}"
                line = (lines or {}).get(path, (lines or {}).get(key))
                _read(layer, path, lookup(str(inner), key), item, f"{source}:{line}" if line else source,
                      user_level, lines is not None)
            continue
        where = f"{source}:{lines[key]}" if lines and key in lines else source
        _read(layer, str(key), lookup(key), value, where, user_level, lines is not None)
    return layer


def _read(layer: Layer, key: str, name: str | None, value: Any, where: str, user_level: bool, snake: bool) -> None:
    """One key of a source into ``layer`` (``name``: the setting it names, None: unknown)."""
    if name is None:
        layer.warnings.append(f"{where}: {unknown_key_message(key, snake=snake)}")
        return
    if value is None:
        return
    if name in USER_ONLY and not user_level:
        layer.warnings.append(f"{where}: {key} is only read from user-level settings "
                              "(the client's initializationOptions); ignored here")
        return
    try:
        layer.values[name] = check_value(name, value, key)
    except ConfigError as exc:
        layer.warnings.append(f"{where}: {exc}; ignored")


def lsp_section(raw: Any) -> Any:
    """The ``copyAsDecode`` section of pushed/initial settings (which may also be flat)."""
    if isinstance(raw, Mapping) and SECTION in raw:
        return raw[SECTION]
    return raw


# --- the workspace's config files ------------------------------------------------------------

def read_config_file(path: Path) -> Layer:
    """Parse ``.copy-as-decode.toml`` (the whole file is the table) or the
    ``[tool.copy-as-decode]`` table of a pyproject.toml. A bad key is skipped with a message
    naming the file and its line (the other keys apply); a file that cannot be read or is not
    TOML raises ConfigError (with TOML's line)."""
    try:
        text = path.read_text(encoding="utf-8")
        data = tomllib.loads(text)
    except FileNotFoundError:
        return Layer(str(path))
    except tomllib.TOMLDecodeError as exc:
        line = re.search(r"at line (\d+)", str(exc))
        raise ConfigError(f"{path}{':' + line.group(1) if line else ''}: invalid TOML: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    table: tuple[str, ...] = ("tool", PYPROJECT_TABLE) if path.name == PYPROJECT else ()
    raw = data.get("tool", {}).get(PYPROJECT_TABLE) if table else data
    lines = key_lines(text, table)
    for name in SECTIONS:  # a section's own table: [edit] (or [tool.copy-as-decode.edit])
        if isinstance(raw, dict) and isinstance(raw.get(name), dict):
            lines.update({f"{name}.{key}": line for key, line in key_lines(text, (*table, name)).items()})
    return parse_layer(raw, str(path), lines=lines)


def find_config_files(folder: Path, stop: Path | None = None) -> list[Path]:
    """The config files that apply to documents in ``folder``, lowest precedence first: the
    nearest pyproject.toml with a ``[tool.copy-as-decode]`` table, then every
    ``.copy-as-decode.toml`` from the top down to ``folder`` (they cascade: nearer files override
    farther ones). The search goes upwards from ``folder`` and stops at ``stop`` (the workspace
    root) when ``stop`` contains ``folder``."""
    folder = folder.resolve()
    stop = stop.resolve() if stop is not None else None
    if stop is not None and folder != stop and stop not in folder.parents:
        stop = None
    own: list[Path] = []
    project = None
    for directory in (folder, *folder.parents):
        if (directory / CONFIG_FILE).is_file():
            own.append(directory / CONFIG_FILE)
        if project is None and (directory / PYPROJECT).is_file() and _has_table(directory / PYPROJECT):
            project = directory / PYPROJECT
        if directory == stop:
            break
    return ([project] if project else []) + own[::-1]


def _has_table(pyproject: Path) -> bool:
    """Does the file have a ``[tool.copy-as-decode]`` table, or a section's (``[tool.copy-as-decode.edit]``)?"""
    try:
        text = pyproject.read_text(encoding="utf-8")
    except OSError:
        return False
    name = re.escape(PYPROJECT_TABLE)
    return re.search(rf'^\s*\[\s*tool\s*\.\s*(?:{name}|"{name}")\s*[\].]', text, re.M) is not None


def load_workspace_settings(file: Path, user: Mapping[str, Any] | None = None) -> tuple[Settings, list[str]]:
    """Settings for ``file`` from its workspace files (nearest upwards) and ``user`` settings;
    the headless ``copy-as-decode edit`` uses this so it reads what the server reads."""
    folder = file.parent if not file.is_dir() else file
    layers, warnings = [], []
    for path in find_config_files(folder):
        try:
            layers.append(read_config_file(path))
        except ConfigError as exc:
            warnings.append(f"{exc} (its settings are not used)")
    user_layer = parse_layer(lsp_section(user), "user settings", user_level=True)
    settings, more = merge_layers([*layers, user_layer], user_layer)
    return settings, warnings + [w for layer in (*layers, user_layer) for w in layer.warnings] + more


# --- the merge ---------------------------------------------------------------------------------

def merge_layers(layers: list[Layer], user: Layer) -> tuple[Settings, list[str]]:
    """Merge ``layers`` (lowest precedence first) into Settings. The model (and a selector
    folder) must be allowed: one set by a non-user layer that the user's ``allowedModels`` does
    not match is refused (the next lower choice stays, finally the default) with a warning."""
    merged: dict[str, Any] = {}
    warnings: list[str] = []
    model_source = "defaults"
    patterns = user.values.get("allowed_models", DEFAULTS.model.allowed_models)
    for layer in layers:
        for name, value in layer.values.items():
            if name == "model" and layer is not user and not model_allowed(value, patterns):
                warnings.append(
                    f"{layer.source}: model {value!r} is not in your allowedModels {list(patterns)}; "
                    "add a matching pattern to your user settings (initializationOptions) to use it")
                continue
            if name == "selector" and layer is not user and not selector_allowed(value, patterns):
                warnings.append(
                    f"{layer.source}: selector {value!r} is not under a path of your allowedModels "
                    f"{list(patterns)}; add a matching path pattern to your user settings "
                    "(initializationOptions) to use it, or set selector to auto or none")
                continue
            merged[name] = value
            if name == "model":
                model_source = layer.source
    settings = Settings(**merged)
    if model_source != "defaults":
        log.debug("model %r from %s", settings.model.name, model_source)
    return settings, warnings
