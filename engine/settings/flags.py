"""Command-line flags from the schema, and the engine's load arguments from settings and flags.

Each setting a command offers is one ``--kebab-case`` flag of its flat name with the schema's choices, check and
help; a flag the command line gives wins over every settings source (flags are the user's own, so
user-only settings may come from them).
"""

from __future__ import annotations

import argparse
from typing import Any, Callable, Mapping

from engine.settings.schema import SPECS, ConfigError, Settings, Spec, check_value


def _flag_type(spec: Spec) -> Callable[[str], Any]:
    """argparse ``type=`` for a setting's flag: the schema's check, with its message."""

    def parse(text: str) -> Any:
        value: Any = text
        if spec.kind == "integer":
            try:
                value = int(text)
            except ValueError:
                raise argparse.ArgumentTypeError(f"{spec.flag} must be an integer, got {text!r}") from None
        try:
            return check_value(spec.name, value, spec.flag)
        except ConfigError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    parse.__name__ = spec.kind  # argparse names the type in its own messages
    return parse


def add_setting_flags(parser: argparse.ArgumentParser, names: list[str] | tuple[str, ...],
                      extra_choices: Mapping[str, tuple[str, ...]] | None = None,
                      extra_help: Mapping[str, str] | None = None) -> None:
    """One ``--kebab-case`` flag per setting, its choices, check and help from the schema. The
    default is None: :func:`engine_arguments` then takes the setting's value (the workspace's,
    else the schema's default). ``extra_choices``: values a command takes beyond the setting's
    (``edit --mode pld``, a measurement mode)."""
    for name in names:
        spec = SPECS[name]
        more = (extra_choices or {}).get(name, ())
        default = spec.default if spec.default != "" else "none"
        where = "" if spec.user_only else "the workspace configuration, else "
        text = f"{spec.help} {(extra_help or {}).get(name, '')}".strip()
        kwargs: dict[str, Any] = {"default": None, "dest": name,
                                  "help": f"{text} (default: {where}{default})".replace("%", "%%")}
        if spec.choices:
            kwargs["choices"] = (*spec.choices, *more)
        else:
            kwargs["type"] = _flag_type(spec)
            kwargs["metavar"] = spec.name.upper()
        parser.add_argument(spec.flag, **kwargs)
    parser.set_defaults(setting_flags=[*(parser.get_default("setting_flags") or []), *names])


def given_flags(args: argparse.Namespace) -> dict[str, Any]:
    """The setting flags a command line gave (those :func:`add_setting_flags` added; not given: None)."""
    return {name: getattr(args, name) for name in getattr(args, "setting_flags", ())}


def with_flags(settings: Settings, flags: Mapping[str, Any] | None) -> Settings:
    """``settings`` with the given flags over them (a None flag was not given). Flags are the
    user's own: user-only settings may come from them."""
    given = {name: value for name, value in (flags or {}).items() if value is not None and name in SPECS}
    return settings.with_values(given)


def engine_arguments(settings: Settings, flags: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The keyword arguments of ``Engine.load`` for these settings with ``flags`` over them: the
    one place the CLI commands and the language server turn settings into a loaded model."""
    chosen = with_flags(settings, flags)
    model = chosen.model
    return {"model": model.name, "device": model.device, "dtype": model.dtype,
            "trust_remote_code": model.trust_remote_code, "selector": model.selector,
            "backend": model.backend, "options": chosen.backend}  # the backend section is the runtime's options
