"""How one setting is declared: the field factory and the base of every settings section.

The settings schema (:mod:`engine.settings.schema`) nests the settings by concern, one pydantic
model per section; the backend's section is the runtime's own
:class:`engine.runtime.backends.BackendOptions`, which cannot import the schema (a higher layer).
Both declare their fields with :func:`setting` on a :class:`SettingsSection`, so the schema reads
every section back the same way (its editors' keys, CLI flags and reference).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

URL_PATTERN = r"^$|^https?://[^\s/]+(/\S*)?$"
ENV_NAME_PATTERN = r"^$|^[A-Za-z_][A-Za-z0-9_]*$"


def setting(default: Any, help: str, *, flat: str | None = None, user_only: bool = False,
            low: int | None = None, high: int | None = None, pattern: str | None = None,
            pattern_help: str = "", editor_choices: tuple[str, ...] | None = None, non_empty: bool = False,
            lax: bool = False, values: str = "") -> Any:
    """One setting's declaration: the pydantic field plus what the editors, the CLI and the docs
    need. ``flat``: the setting's name outside its section (its editor key, file key and flag),
    when it is not the field's (``check.command`` is ``checkCommand``); ``user_only``: never from
    a workspace; ``editor_choices``: the values editors offer in a list when the setting takes
    more than a closed set; ``pattern_help``: why a value does not match ``pattern``; ``values``:
    what an open-ended setting takes, for the reference."""
    extra = {"flat": flat, "user_only": user_only, "help": help, "low": low, "high": high, "pattern": pattern,
             "pattern_help": pattern_help, "editor_choices": editor_choices, "values": values}
    constraints: dict[str, Any] = {"ge": low, "le": high, "pattern": pattern}
    if non_empty:
        constraints["min_length"] = 1
    if lax:
        constraints["strict"] = False  # a list from JSON or TOML becomes the tuple
    return Field(default, description=help, json_schema_extra=extra,  # type: ignore[arg-type]
                 **{k: v for k, v in constraints.items() if v is not None})


class SettingsSection(BaseModel):
    """One section of the settings: frozen, strict, no unknown keys; strings are stripped. A field
    declared with :func:`setting` is a setting; any other field is the section's own (not read
    from a settings source)."""

    model_config = ConfigDict(frozen=True, strict=True, extra="forbid", defer_build=True)

    @field_validator("*", mode="before")
    @classmethod
    def _strip(cls, value: Any) -> Any:
        return value.strip() if isinstance(value, str) else value
