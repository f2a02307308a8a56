"""The settings schema: every user-facing setting declared once, read back, and checked.

Every setting is declared once, as a field of one section of :class:`Settings` below (nested by
concern, as jedi-language-server's ``InitializationOptions``: model, backend, edit, apply, editor,
check, http; the backend's section is the runtime's :class:`engine.runtime.backends.BackendOptions`,
which the runtime receives as it is): its flat name (what users write; the camelCase key editors
use is derived from it), type, default, range or choices, scope and one line of help. The language
server's parsing and the config files (:mod:`engine.settings.sources`), the CLI flags and the
engine's load arguments (:mod:`engine.settings.flags`), docs/configuration.md
(scripts/settings_reference.py) and VS Code's ``contributes.configuration`` (tested equal in
tests/test_settings_schema.py) all come from it. The closed choice sets are
:mod:`engine.core.choices`'; the defaults the runtime also reads are :mod:`engine.core.defaults`'.

A problem with one value (unknown key, with the nearest known name; wrong type; out of range) is
answered by one message (:func:`check_value`, :func:`unknown_key_message`), the same wherever it
is read.
"""

from __future__ import annotations

import difflib
import typing
from dataclasses import dataclass
from typing import Any, Literal, Mapping

from pydantic import Field, ValidationError, model_validator

from engine.core.choices import ApplyMode, Backend, Dtype, IdleWork, PromptStyle, UserMode, Verify
from engine.core.setting import SettingsSection, setting
from engine.runtime.backends import BackendOptions

DEVICE_PATTERN = r"^(auto|cpu|mps|cuda(:\d+)?)$"


class ConfigError(ValueError):
    """An invalid settings value or file; the message names the source, the key and the fix."""


class ModelSettings(SettingsSection):
    """Which model runs, where, on which backend, with which span selector, and which models a
    workspace may choose."""

    name: str = setting("default", "The model: `default` (the embedded SmolLM2-135M-Instruct, offline on a CPU), "
                        "a Hugging Face hub id, a local model folder or a `.gguf` file.", flat="model", non_empty=True,
                        values="`default`, a hub id, a folder or a `.gguf` file")
    device: str = setting("auto", "Where the model runs: auto (CUDA when available), cpu, cuda, cuda:N or mps.",
                          pattern=DEVICE_PATTERN, pattern_help="is not a device; use auto, cpu, cuda, cuda:N or mps",
                          editor_choices=("auto", "cpu", "cuda"), values="`auto`, `cpu`, `cuda`, `cuda:N`, `mps`")
    dtype: Dtype = setting(
        "auto", "Weight and activation dtype: auto is float32 on the CPU and bfloat16 on a GPU.",
        editor_choices=("auto", "float32", "bfloat16", "float16"))
    backend: Backend = setting(
        "auto", "What runs the model: auto (llama.cpp for a `.gguf` when installed, else transformers), "
        "transformers, llamacpp or vllm (the server at serverUrl).")
    selector: str = setting("auto", "Program mode's span-selector adapter: auto (the shipped one, with the embedded "
                            "model), none, or an adapter folder (from a workspace: under a path of allowedModels).",
                            non_empty=True, values="`auto`, `none` or an adapter folder")
    trust_remote_code: bool = setting(False, "Run model code from the hub (`trust_remote_code`).", user_only=True)
    allowed_models: tuple[str, ...] = setting(
        ("default", "hub:*"), "Models and adapter folders a workspace may choose: `default`, `hub:<glob>` or a "
        "path glob (`~/models/*`).", user_only=True, lax=True, values="a list of patterns")


class EditSettings(SettingsSection):
    """How one edit is decoded: what every edit request carries."""

    mode: UserMode = setting(
        "auto", "Decoding mode: auto (program when the model has a span selector, else speculative; the CLI's "
        "edit runs a region of 1-2 lines in ar), program, speculative (lossless: the same output as ar) or ar.")
    max_new_tokens: int = setting(1024, "Most tokens the model may generate for one edit.", low=1, high=65536)
    context_lines: int = setting(20, "Read-only lines shown to the model on each side of a selected region.",
                                 low=0, high=10000)
    prompt_style: PromptStyle = setting(
        "auto", "Program mode's prompt: auto (the selector prompt when the model carries a span selector, else "
        "few-shot), few-shot or selector.")
    verify: Verify = setting(
        "auto", "How speculative mode and predicted outputs verify a draft: exact (the output is ar's to the bit; "
        "on llama.cpp's default CPU build nothing is then drafted), argmax (the batched forward's argmax, as "
        "llama.cpp's speculative decoding and vLLM: a near-tie may differ from ar) or auto (the backend's rule: exact).")


class ApplySettings(SettingsSection):
    """How an update written elsewhere is merged into a file."""

    window_lines: int = setting(
        20, "Apply: file lines the model reads on each side of a change (with the whole update); the rest of the "
        "file is copied without being read.", flat="apply_window_lines", low=1, high=1000)
    max_lines: int = setting(5000, "Apply: the longest file (in lines) an update may be merged into; a longer "
                             "one is refused and nothing is written.", flat="apply_max_lines", low=1, high=5000)


class EditorSettings(SettingsSection):
    """What the language server does in the editor: how an edit reaches the document, which region
    an edit without a selection takes, and the read-ahead of idle buffers."""

    apply_mode: ApplyMode = setting(
        "stream", "When an edit reaches the document: as it is decoded, once at the end, or after you confirm "
        "it in a preview.")
    whole_document_lines: int = setting(200, "With no selection, documents up to this many lines are edited whole; "
                                        "longer ones in the top-level block around the cursor.", low=1, high=100000)
    warm_up: IdleWork = setting(
        "fix", "What the server does while a buffer is idle (warmUpDelayMs without a change): fix decodes the AI fix "
        "the lightbulb would run now, so asking for it gives the answer at once; prompt only reads that fix's prompt, "
        "so it starts where a repeated fix would; off. On a vLLM server both send the prompt ahead.")
    warm_up_delay_ms: int = setting(1500, "Milliseconds an open document must stay unchanged before its AI fix is "
                                    "read ahead (warmUp).", low=100, high=600_000)
    warm_up_max_tokens: int = setting(4096, "Most prompt tokens one warm-up may read (a longer prompt is not "
                                      "read ahead).", low=1, high=1 << 20)


class CheckSettings(SettingsSection):
    """Verified fixes: the command that must accept an AI fix, and how many candidates it sees."""

    command: str = setting(
        "", "A command that must accept an AI fix before it is written, e.g. `python -m pytest -q -x` or "
        "`node {file}`: `{file}` is a temporary copy of the file holding the candidate, exit status 0 passes; "
        "empty: no check (the AI fix is written as it comes). It runs code, so only your user settings set it.",
        flat="check_command", user_only=True, values="a shell command with `{file}`, or empty")
    timeout: int = setting(60, "Seconds one run of checkCommand may take; a run that takes longer is killed "
                           "and fails.", flat="check_timeout", low=1, high=3600)
    candidates: int = setting(4, "With checkCommand: most candidate fixes one AI fix decodes and checks; the first "
                              "that passes is written, the others are offered as \"AI fix: next candidate\" "
                              "(each checked before it is written).", low=1, high=16)
    max_rounds: int = setting(1, "With checkCommand: rounds of candidates; when none passes, the first failing "
                              "check's output joins the instruction for the next round.", low=1, high=5)


class HttpSettings(SettingsSection):
    """The OpenAI-compatible HTTP server (serve-openai)."""

    chat_max_tokens: int = setting(1024, "Most tokens a chat completion to serve-openai generates when the request "
                                   "sets no max_tokens (as many as maxNewTokens allows one edit; at most what the "
                                   "context leaves).", low=1, high=65536)


def section(kind: type[SettingsSection]) -> Any:
    """A section field of :class:`Settings`: its defaults, built without the validator (a fast --help)."""
    return Field(default_factory=kind.model_construct)


class Settings(SettingsSection):
    """Every user-facing setting, declared once, nested by concern as jedi-language-server's
    ``InitializationOptions`` is; an instance is the effective settings of one document
    (validated here, read-only everywhere else): ``settings.edit.max_new_tokens``.

    Each setting also has a flat name (:attr:`Spec.name`: ``max_new_tokens``, editor key
    ``maxNewTokens``), which is what users write: validating a mapping reads a flat name as its
    section's field, and a section given whole (``{"edit": {...}}``) as it is."""

    model: ModelSettings = section(ModelSettings)
    backend: BackendOptions = section(BackendOptions)
    edit: EditSettings = section(EditSettings)
    apply: ApplySettings = section(ApplySettings)
    editor: EditorSettings = section(EditorSettings)
    check: CheckSettings = section(CheckSettings)
    http: HttpSettings = section(HttpSettings)

    @model_validator(mode="before")
    @classmethod
    def _flat_names(cls, data: Any) -> Any:
        """A flat name goes to its section's field; a section's key with a mapping is that section
        (``model`` and ``backend`` are both: a string is the setting, a mapping the section)."""
        if not isinstance(data, Mapping):
            return data
        out: dict[str, Any] = {}
        for key, value in data.items():
            spec = SPECS.get(key)
            if key in SECTIONS and (isinstance(value, (Mapping, SettingsSection)) or spec is None):
                out[key] = _merged(out.get(key), value)
            elif spec is not None:
                out[spec.section] = _merged(out.get(spec.section), {spec.field: value})
            else:
                out[key] = value  # an unknown key: the model's own error
        return out

    def value(self, name: str) -> Any:
        """The value of the setting whose flat name (:attr:`Spec.name`) is ``name``."""
        spec = SPECS[name]
        return getattr(getattr(self, spec.section), spec.field)

    def with_values(self, values: Mapping[str, Any]) -> Settings:
        """These settings with ``values`` (flat names, values already checked) over them."""
        update: dict[str, dict[str, Any]] = {}
        for name, value in values.items():
            spec = SPECS[name]
            update.setdefault(spec.section, {})[spec.field] = value
        return self.model_copy(update={name: getattr(self, name).model_copy(update=fields)
                                       for name, fields in update.items()})

    def lsp_dict(self) -> dict[str, Any]:
        """The settings as flat camelCase JSON (what ``copyAsDecode.server.settings`` returns)."""
        dumped = self.model_dump(mode="json")
        return {spec.key: dumped[spec.section][spec.field] for spec in SPECS.values()}


def _merged(old: Any, new: Any) -> Any:
    """A section given twice (whole and by flat names): the later keys over the earlier."""
    whole = (Mapping, SettingsSection)
    if not isinstance(old, whole) or not isinstance(new, whole):
        return new
    return {**dict(old), **dict(new)}


SECTIONS: dict[str, type[SettingsSection]] = {
    name: info.annotation for name, info in Settings.model_fields.items()}  # type: ignore[misc]
DEFAULTS = Settings.model_construct()  # the defaults, without building the validator (a fast --help)


# --- the schema, read back ---------------------------------------------------------------------

@dataclass(frozen=True)
class Spec:
    """One setting as the editors, the CLI and the docs see it."""

    name: str                      # snake_case flat name: the file key, the CLI flag (--kebab-case)
    key: str                       # camelCase flat name: what editors send
    section: str                   # the section of Settings that holds it (``edit``)
    field: str                     # its field in that section (``max_new_tokens``)
    kind: str                      # JSON type: string | integer | boolean | array
    default: Any
    help: str
    user_only: bool
    choices: tuple[str, ...] | None = None
    editor_choices: tuple[str, ...] | None = None
    low: int | None = None
    high: int | None = None
    pattern: str | None = None
    pattern_help: str = ""
    values: str = ""  # what an open-ended setting takes, in words

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def path(self) -> str:
        """Where it lives in :class:`Settings`: ``section.field`` (``apply.window_lines``)."""
        return f"{self.section}.{self.field}"


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _kind(annotation: Any) -> tuple[str, tuple[str, ...] | None]:
    if typing.get_origin(annotation) is Literal:
        return "string", typing.get_args(annotation)
    return {str: "string", int: "integer", bool: "boolean"}.get(annotation, "array"), None


def _specs() -> dict[str, Spec]:
    """Every section's settings (the fields declared with ``setting``), by flat name, in order."""
    out = {}
    for section_name, kind in SECTIONS.items():
        for field_name, info in kind.model_fields.items():
            extra = dict(info.json_schema_extra or {})  # type: ignore[arg-type]
            if "help" not in extra:
                continue  # the section's own field, not a setting
            name = extra["flat"] or field_name
            kind_name, choices = _kind(info.annotation)
            out[name] = Spec(name=name, key=camel(name), section=section_name, field=field_name, kind=kind_name,
                             default=info.default, help=extra["help"], user_only=extra["user_only"],
                             choices=choices, editor_choices=extra["editor_choices"], low=extra["low"],
                             high=extra["high"], pattern=extra["pattern"], pattern_help=extra["pattern_help"],
                             values=extra["values"])
    assert not set(out) & set(SECTIONS) - {"model", "backend"}, "a flat name that is a section's"
    return out


SPECS: dict[str, Spec] = _specs()
USER_ONLY = tuple(name for name, spec in SPECS.items() if spec.user_only)


def _norm(key: str) -> str:
    return key.replace("_", "").replace("-", "").lower()


_FIELDS = {_norm(name): name for name in SPECS}
_PATHS = {_norm(spec.path): name for name, spec in SPECS.items()}


def lookup(key: str, section: str | None = None) -> str | None:
    """The setting (its flat name) a key names, however it is written (camelCase, snake_case,
    kebab-case): a flat name or ``section.field``; inside a ``section`` table, the field's name
    or the flat name of a setting of that section."""
    if section is not None:
        name = _PATHS.get(_norm(f"{section}.{key}")) or _FIELDS.get(_norm(str(key)))
        return name if name is not None and SPECS[name].section == section else None
    return _FIELDS.get(_norm(str(key))) or _PATHS.get(_norm(str(key)))


def nearest(key: str, snake: bool = False) -> str | None:
    """The known key closest to an unknown one, written as ``key`` is: kebab-case, snake_case,
    camelCase, else snake_case in files (``snake``) and camelCase in editor settings; a key
    written in a section (``edit.mdoe``) is answered as ``section.field`` (``edit.mode``)."""
    known = _PATHS if "." in key else _FIELDS
    match = difflib.get_close_matches(_norm(key), list(known), n=1, cutoff=0.6)
    if not match:
        return None
    spec = SPECS[known[match[0]]]
    name = spec.field if "." in key else spec.name
    if "-" in key:
        name = name.replace("_", "-")
    elif not ("_" in key or (snake and key == key.lower())):
        name = camel(name)
    return f"{spec.section}.{name}" if "." in key else name


def unknown_key_message(key: str, snake: bool = False) -> str:
    guess = nearest(str(key), snake)
    hint = f"did you mean {guess!r}?" if guess else f"known settings: {', '.join(s.key for s in SPECS.values())}"
    return f"unknown setting {key!r} ignored; {hint}"


def _explain(spec: Spec, value: Any, error: Mapping[str, Any], key: str) -> str:
    """One validation error as a message that says how to fix it."""
    kind = error["type"]
    if spec.kind == "string" and not isinstance(value, str):
        return f"{key} must be a string, got {value!r}"
    if kind == "literal_error":
        return f"{key} {value!r} is not valid; choose one of {', '.join(spec.choices or ())}"
    if kind in ("greater_than_equal", "less_than_equal"):
        return f"{key} must be between {spec.low} and {spec.high}, got {value!r}"
    if kind == "string_pattern_mismatch":
        return f"{key} {value!r} {spec.pattern_help}"
    if kind == "string_too_short":
        return f"{key} must not be empty"
    what = {"integer": "an integer", "boolean": "true or false", "array": "a list of strings"}.get(spec.kind)
    if what:
        return f"{key} must be {what}, got {value!r}"
    return f"{key}: {error['msg']}"  # pragma: no cover - every kind above has its message


def check_value(name: str, value: Any, key: str | None = None) -> Any:
    """Validate one value of setting ``name`` (snake_case); returns it normalised or raises
    ConfigError with a message that names the key (as ``key`` writes it; default camelCase) and
    the fix, without the source."""
    spec = SPECS[name]
    try:
        return getattr(SECTIONS[spec.section].model_validate({spec.field: value}), spec.field)
    except ValidationError as exc:
        raise ConfigError(_explain(spec, value, exc.errors()[0], key or spec.key)) from None

