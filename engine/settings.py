"""Settings: one typed schema, its sources and their precedence, and hot reload of config files.

Every user-facing setting is declared once, in :class:`Settings` below: its name (the camelCase
key editors use is derived from it), type, default, range or choices, scope and one line of help.
The language server's parsing, the config files, the CLI flags (:func:`add_setting_flags`), the
engine's load arguments (:func:`engine_arguments`), docs/configuration.md
(scripts/settings_reference.py) and VS Code's ``contributes.configuration`` (tested equal in
tests/test_settings_schema.py) all come from it.

Sources, lowest precedence first (a later source overrides the keys it sets)::

    1. built-in defaults                       (Settings() below)
    2. [tool.copy-as-decode] in pyproject.toml (the nearest one from the file's folder upwards)
    3. .copy-as-decode.toml                    (every one from the workspace root down to the
                                                file's folder; nearer files override farther)
    4. LSP settings, section "copyAsDecode":
       a. initializationOptions                (user level)
       b. workspace/didChangeConfiguration     (pushed settings, e.g. Neovim's `settings`)
       c. workspace/configuration              (pulled per workspace folder, e.g. VS Code)

Editor settings win over workspace files ("editor first"); a key that is absent or null in a
source is not set by it, so clients should send only the keys the user set. Keys may be written
camelCase (``maxNewTokens``), snake_case or kebab-case. A problem with one key (unknown, with the
nearest known name; wrong type; out of range) skips that key with one message, the same wherever
it is read, naming the source (a file and its line); the source's other keys still apply. A file
that is not valid TOML cannot be read at all: the last good version of it stays in force.

Security: user-only settings (``trustRemoteCode``, ``allowedModels``, ``serverUrl``,
``servedModel``, ``apiKeyEnv``) are honoured ONLY from initializationOptions (user-level
settings) and command-line flags; anywhere else they are ignored with a warning. A model (or a
``selector`` adapter folder, which is weights too) named by any other source (workspace files,
pulled or pushed settings, which may come from a workspace's ``.vscode/settings.json``) must match
the user's ``allowedModels`` patterns: ``"default"`` (the embedded model), ``"hub:<glob>"``
(Hugging Face hub ids, e.g. ``"hub:Qwen/*"``) or a path glob for local folders / GGUF files
(``"~/models/*"``). The default allows the embedded model and any hub id (weights are loaded as
safetensors; remote code is never run unless the user allows it).
"""

from __future__ import annotations

import argparse
import difflib
import fnmatch
import logging
import re
import sys
import threading
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Literal, Mapping

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from engine.runtime.backends import BackendOptions

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

log = logging.getLogger(__name__)

SECTION = "copyAsDecode"
CONFIG_FILE = ".copy-as-decode.toml"
PYPROJECT = "pyproject.toml"
PYPROJECT_TABLE = "copy-as-decode"  # [tool.copy-as-decode]
SELECTOR_CHOICES = ("auto", "none")  # or an adapter folder
DEVICE_PATTERN = r"^(auto|cpu|mps|cuda(:\d+)?)$"
URL_PATTERN = r"^$|^https?://[^\s/]+(/\S*)?$"
ENV_NAME_PATTERN = r"^$|^[A-Za-z_][A-Za-z0-9_]*$"


class ConfigError(ValueError):
    """An invalid settings value or file; the message names the source, the key and the fix."""


def setting(default: Any, help: str, *, user_only: bool = False, low: int | None = None, high: int | None = None,
            pattern: str | None = None, pattern_help: str = "", editor_choices: tuple[str, ...] | None = None,
            non_empty: bool = False, lax: bool = False, values: str = "") -> Any:
    """One setting's declaration: the pydantic field plus what the editors, the CLI and the docs
    need (``user_only``: never from a workspace; ``editor_choices``: the values editors offer in
    a list when the setting takes more than a closed set; ``pattern_help``: why a value does not
    match ``pattern``; ``values``: what an open-ended setting takes, for the reference)."""
    extra = {"user_only": user_only, "help": help, "low": low, "high": high, "pattern": pattern,
             "pattern_help": pattern_help, "editor_choices": editor_choices, "values": values}
    constraints: dict[str, Any] = {"ge": low, "le": high, "pattern": pattern}
    if non_empty:
        constraints["min_length"] = 1
    if lax:
        constraints["strict"] = False  # a list from JSON or TOML becomes the tuple
    return Field(default, description=help, json_schema_extra=extra,  # type: ignore[arg-type]
                 **{k: v for k, v in constraints.items() if v is not None})


class Settings(BaseModel):
    """Every user-facing setting, declared once; an instance is the effective settings of one
    document (validated here, read-only everywhere else)."""

    model_config = ConfigDict(frozen=True, strict=True, extra="forbid", defer_build=True)

    model: str = setting("default", "The model: `default` (the embedded SmolLM2-135M-Instruct, offline on a CPU), "
                         "a Hugging Face hub id, a local model folder or a `.gguf` file.", non_empty=True,
                         values="`default`, a hub id, a folder or a `.gguf` file")
    device: str = setting("auto", "Where the model runs: auto (CUDA when available), cpu, cuda, cuda:N or mps.",
                          pattern=DEVICE_PATTERN, pattern_help="is not a device; use auto, cpu, cuda, cuda:N or mps",
                          editor_choices=("auto", "cpu", "cuda"), values="`auto`, `cpu`, `cuda`, `cuda:N`, `mps`")
    dtype: Literal["auto", "float32", "fp32", "bfloat16", "bf16", "float16", "fp16"] = setting(
        "auto", "Weight and activation dtype: auto is float32 on the CPU and bfloat16 on a GPU.",
        editor_choices=("auto", "float32", "bfloat16", "float16"))
    mode: Literal["auto", "program", "speculative", "ar"] = setting(
        "auto", "Decoding mode: auto (program when the model has a span selector, else speculative), program, "
        "speculative (lossless: the same output as ar) or ar.")
    apply_mode: Literal["stream", "final", "preview"] = setting(
        "stream", "When an edit reaches the document: as it is decoded, once at the end, or after you confirm "
        "it in a preview.")
    max_new_tokens: int = setting(1024, "Most tokens the model may generate for one edit.", low=1, high=65536)
    context_lines: int = setting(20, "Read-only lines shown to the model on each side of a selected region.",
                                 low=0, high=10000)
    prompt_style: Literal["auto", "few-shot", "selector"] = setting(
        "auto", "Program mode's prompt: auto (the selector prompt when the model carries a span selector, else "
        "few-shot), few-shot or selector.")
    verify: Literal["auto", "exact", "argmax"] = setting(
        "auto", "How speculative mode and predicted outputs verify a draft: exact (the output is ar's to the bit; "
        "on llama.cpp's default CPU build nothing is then drafted), argmax (the batched forward's argmax, as "
        "llama.cpp's speculative decoding and vLLM: a near-tie may differ from ar) or auto (the backend's rule: exact).")
    selector: str = setting("auto", "Program mode's span-selector adapter: auto (the shipped one, with the embedded "
                            "model), none, or an adapter folder (from a workspace: under a path of allowedModels).",
                            non_empty=True, values="`auto`, `none` or an adapter folder")
    whole_document_lines: int = setting(200, "With no selection, documents up to this many lines are edited whole; "
                                        "longer ones in the top-level block around the cursor.", low=1, high=100000)
    trust_remote_code: bool = setting(False, "Run model code from the hub (`trust_remote_code`).", user_only=True)
    allowed_models: tuple[str, ...] = setting(
        ("default", "hub:*"), "Models and adapter folders a workspace may choose: `default`, `hub:<glob>` or a "
        "path glob (`~/models/*`).", user_only=True, lax=True, values="a list of patterns")
    backend: Literal["auto", "transformers", "llamacpp", "vllm"] = setting(
        "auto", "What runs the model: auto (llama.cpp for a `.gguf` when installed, else transformers), "
        "transformers, llamacpp or vllm (the server at serverUrl).")
    threads: int = setting(0, "llama.cpp CPU threads; 0: the CPUs available.", low=0, high=512)
    context_size: int = setting(4096, "llama.cpp context size in tokens (prompt plus generated text).",
                                low=256, high=1 << 20)
    batch_size: int = setting(512, "llama.cpp batch size: tokens per decode call.", low=1, high=1 << 16)
    gpu_layers: int = setting(0, "Layers llama.cpp offloads to a GPU (Metal or CUDA builds); -1: all.",
                              low=-1, high=4096)
    flash_attention: Literal["auto", "on", "off"] = setting(
        "auto", "llama.cpp's flash attention: auto (off on the CPU, where decoding is faster without it), on or off.")
    prefix_cache_tokens: int = setting(8192, "Tokens of recent prompts whose KV cache is kept so the next edit "
                                       "prefills only what changed; 0: off.", low=0, high=1 << 22)
    warm_up: Literal["fix", "prompt", "off"] = setting(
        "fix", "What the server does while a buffer is idle (warmUpDelayMs without a change): fix decodes the AI fix "
        "the lightbulb would run now, so asking for it gives the answer at once; prompt only reads that fix's prompt, "
        "so it starts where a repeated fix would; off. On a vLLM server both send the prompt ahead.")
    warm_up_delay_ms: int = setting(1500, "Milliseconds an open document must stay unchanged before its AI fix is "
                                    "read ahead (warmUp).", low=100, high=600_000)
    warm_up_max_tokens: int = setting(4096, "Most prompt tokens one warm-up may read (a longer prompt is not "
                                      "read ahead).", low=1, high=1 << 20)
    server_url: str = setting("", "The vLLM server that `backend: vllm` edits with, e.g. http://127.0.0.1:8000 "
                              "(its API key: in the variable apiKeyEnv names).",
                              user_only=True, pattern=URL_PATTERN,
                              pattern_help="is not an http(s) URL like http://127.0.0.1:8000",
                              values="an http(s) URL, or empty")
    served_model: str = setting("", "The model name the vLLM server serves; empty: the only one it serves.",
                                user_only=True, values="a model name, or empty")
    api_key_env: str = setting("COPY_AS_DECODE_API_KEY", "The environment variable that holds the vLLM server's "
                               "API key (the key itself is never a setting).", user_only=True,
                               pattern=ENV_NAME_PATTERN, pattern_help="is not an environment variable name",
                               values="an environment variable name")

    @field_validator("*", mode="before")
    @classmethod
    def _strip(cls, value: Any) -> Any:
        return value.strip() if isinstance(value, str) else value

    def backend_options(self) -> BackendOptions:
        """The engine's :class:`engine.runtime.backends.BackendOptions` for these settings (the API key
        itself is read from the environment variable when the backend connects, never stored)."""
        return BackendOptions(threads=self.threads or None, context=self.context_size, batch=self.batch_size,
                              server_url=self.server_url or None, served_model=self.served_model or None,
                              api_key_env=self.api_key_env, gpu_layers=self.gpu_layers,
                              prefix_cache_tokens=self.prefix_cache_tokens, flash_attention=self.flash_attention)

    def lsp_dict(self) -> dict[str, Any]:
        """The settings as camelCase JSON (what ``copyAsDecode.server.settings`` returns)."""
        return {camel(name): value for name, value in self.model_dump(mode="json").items()}


DEFAULTS = Settings.model_construct()  # the defaults, without building the validator (a fast --help)


# --- the schema, read back ---------------------------------------------------------------------

@dataclass(frozen=True)
class Spec:
    """One setting as the editors, the CLI and the docs see it."""

    name: str                      # snake_case: the Python field, the CLI flag (--kebab-case)
    key: str                       # camelCase: what editors send
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


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _kind(annotation: Any) -> tuple[str, tuple[str, ...] | None]:
    if typing.get_origin(annotation) is Literal:
        return "string", typing.get_args(annotation)
    return {str: "string", int: "integer", bool: "boolean"}.get(annotation, "array"), None


def _specs() -> dict[str, Spec]:
    out = {}
    for name, info in Settings.model_fields.items():
        extra = dict(info.json_schema_extra or {})  # type: ignore[arg-type]
        kind, choices = _kind(info.annotation)
        out[name] = Spec(name=name, key=camel(name), kind=kind, default=info.default, help=extra["help"],
                         user_only=extra["user_only"], choices=choices, editor_choices=extra["editor_choices"],
                         low=extra["low"], high=extra["high"], pattern=extra["pattern"],
                         pattern_help=extra["pattern_help"], values=extra["values"])
    return out


SPECS: dict[str, Spec] = _specs()
USER_ONLY = tuple(name for name, spec in SPECS.items() if spec.user_only)
MODES = SPECS["mode"].choices
APPLY_MODES = SPECS["apply_mode"].choices
PROMPT_STYLES = SPECS["prompt_style"].choices
DTYPES = SPECS["dtype"].choices
BACKENDS = SPECS["backend"].choices


def _norm(key: str) -> str:
    return key.replace("_", "").replace("-", "").lower()


_FIELDS = {_norm(name): name for name in SPECS}


def lookup(key: str) -> str | None:
    """The setting a key names, however it is written (camelCase, snake_case, kebab-case)."""
    return _FIELDS.get(_norm(str(key)))


def nearest(key: str, snake: bool = False) -> str | None:
    """The known key closest to an unknown one, written as ``key`` is: kebab-case, snake_case,
    camelCase, else snake_case in files (``snake``) and camelCase in editor settings."""
    match = difflib.get_close_matches(_norm(key), list(_FIELDS), n=1, cutoff=0.6)
    if not match:
        return None
    name = _FIELDS[match[0]]
    if "-" in key:
        return name.replace("_", "-")
    if "_" in key or (snake and key == key.lower()):
        return name
    return camel(name)


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
        return getattr(Settings.model_validate({name: value}), name)
    except ValidationError as exc:
        raise ConfigError(_explain(spec, value, exc.errors()[0], key or spec.key)) from None


# --- one source ---------------------------------------------------------------------------------

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
        where = f"{source}:{lines[key]}" if lines and key in lines else source
        name = lookup(key)
        if name is None:
            layer.warnings.append(f"{where}: {unknown_key_message(str(key), snake=lines is not None)}")
            continue
        if value is None:
            continue
        if name in USER_ONLY and not user_level:
            layer.warnings.append(f"{where}: {key} is only read from user-level settings "
                                  "(the client's initializationOptions); ignored here")
            continue
        try:
            layer.values[name] = check_value(name, value, str(key))
        except ConfigError as exc:
            layer.warnings.append(f"{where}: {exc}; ignored")
    return layer


def lsp_section(raw: Any) -> Any:
    """The ``copyAsDecode`` section of pushed/initial settings (which may also be flat)."""
    if isinstance(raw, Mapping) and SECTION in raw:
        return raw[SECTION]
    return raw


# --- which models a source may name ------------------------------------------------------------

def model_kind(model: str) -> str:
    """'default', 'path' (local folder / GGUF file) or 'hub' (a hub id), as engine.runtime.models reads it."""
    if model in ("default", ""):
        return "default"
    path = Path(model).expanduser()
    if model.startswith((".", "/", "~")) or path.suffix == ".gguf" or path.exists():
        return "path"
    return "hub"


def model_allowed(model: str, patterns: Iterable[str], base: Path | None = None) -> bool:
    """Does ``model`` match one of the user's ``allowedModels`` patterns (module docstring)?"""
    kind = model_kind(model)
    for pattern in patterns:
        if pattern == "default" and kind == "default":
            return True
        if pattern.startswith("hub:") and kind == "hub" and fnmatch.fnmatchcase(model, pattern[4:]):
            return True
        if kind == "path" and not pattern.startswith("hub:") and pattern != "default":
            path = Path(model).expanduser()
            if not path.is_absolute() and base is not None:
                path = base / path
            resolved = str(path.resolve())
            if fnmatch.fnmatchcase(resolved, str(Path(pattern).expanduser())):
                return True
    return False


def selector_allowed(selector: str, patterns: Iterable[str]) -> bool:
    """``auto``/``none`` always; an adapter folder only under a path pattern of ``allowedModels``
    (the same rule as a model folder: an adapter is weights a workspace must not slip in)."""
    if selector in SELECTOR_CHOICES:
        return True
    return model_allowed(selector if selector.startswith((".", "/", "~")) else f"./{selector}",
                         [p for p in patterns if p != "default" and not p.startswith("hub:")])


def resolve(layers: list[Layer], user: Layer) -> tuple[Settings, list[str]]:
    """Merge ``layers`` (lowest precedence first) into Settings. The model (and a selector
    folder) must be allowed: one set by a non-user layer that the user's ``allowedModels`` does
    not match is refused (the next lower choice stays, finally the default) with a warning."""
    merged: dict[str, Any] = {}
    warnings: list[str] = []
    model_source = "defaults"
    patterns = user.values.get("allowed_models", DEFAULTS.allowed_models)
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
        log.debug("model %r from %s", settings.model, model_source)
    return settings, warnings


# --- command-line flags and the engine's load arguments ----------------------------------------

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
    return settings.model_copy(update=given)


def engine_arguments(settings: Settings, flags: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The keyword arguments of ``Engine.load`` for these settings with ``flags`` over them: the
    one place the CLI commands and the language server turn settings into a loaded model."""
    effective = with_flags(settings, flags)
    return {"model": effective.model, "device": effective.device, "dtype": effective.dtype,
            "trust_remote_code": effective.trust_remote_code, "selector": effective.selector,
            "backend": effective.backend, "options": effective.backend_options()}


# --- workspace files -------------------------------------------------------------------------

_HEADER = re.compile(r"^\s*(\[\[?)\s*(.+?)\s*\]\]?\s*(#.*)?$")
_KEY = re.compile(r"""^\s*(?:"([^"]*)"|'([^']*)'|([A-Za-z0-9_-]+))\s*=""")


def _dotted(header: str) -> tuple[str, ...]:
    parts = re.findall(r"""\s*("[^"]*"|'[^']*'|[^.]+)\s*(?:\.|$)""", header)
    return tuple(p.strip().strip("\"'") for p in parts)


def key_lines(text: str, table: tuple[str, ...] = ()) -> dict[str, int]:
    """The 1-based line of each key of ``table`` (``()``: the top level) in a TOML text (tomllib
    gives values, not lines; a message that names the line tells the user where to look)."""
    current: tuple[str, ...] | None = ()
    out: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), 1):
        header = _HEADER.match(line)
        if header and not _KEY.match(line):
            current = _dotted(header.group(2)) if header.group(1) == "[" else None
            continue
        match = _KEY.match(line)
        if match and current == table:
            key = next(group for group in match.groups() if group is not None)
            out.setdefault(key, number)
    return out


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
    if path.name == PYPROJECT:
        table = ("tool", PYPROJECT_TABLE)
        layer = parse_layer(data.get("tool", {}).get(PYPROJECT_TABLE), str(path), lines=key_lines(text, table))
    else:
        layer = parse_layer(data, str(path), lines=key_lines(text))
    return layer


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
    try:
        text = pyproject.read_text(encoding="utf-8")
    except OSError:
        return False
    return f"[tool.{PYPROJECT_TABLE}]" in text or f'[tool."{PYPROJECT_TABLE}"]' in text


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
    settings, more = resolve([*layers, user_layer], user_layer)
    return settings, warnings + [w for layer in (*layers, user_layer) for w in layer.warnings] + more


class FileLayers:
    """The workspace config files seen so far, each with its last good parse.

    ``get(path)`` parses a file the first time; ``reload(path)`` re-parses it after a change and
    keeps the previous good layer when the new content cannot be read as TOML (returning the
    error). A readable file's bad keys are in its layer's warnings; its other keys apply."""

    def __init__(self) -> None:
        self._good: dict[Path, Layer] = {}
        self._errors: dict[Path, str] = {}  # why the file's current content is not in force
        self._lock = threading.Lock()

    def get(self, path: Path) -> tuple[Layer, str | None]:
        with self._lock:
            if path in self._good:
                return self._good[path], self._errors.get(path)
        return self.reload(path)

    def reload(self, path: Path) -> tuple[Layer, str | None]:
        try:
            layer = read_config_file(path)
        except ConfigError as exc:
            with self._lock:
                previous = self._good.get(path)
                kept = "the last good configuration stays in force" if previous else "its settings are not used"
                self._errors[path] = error = f"{exc} ({kept})"
            return previous or Layer(str(path)), error
        with self._lock:
            self._good[path] = layer
            self._errors.pop(path, None)
        return layer, None

    def forget(self, path: Path) -> None:
        with self._lock:
            self._good.pop(path, None)
            self._errors.pop(path, None)


class ConfigWatcher:
    """watchdog observer on the folders that hold config files; calls ``on_change(path)`` (from
    the observer thread) for changes to ``.copy-as-decode.toml`` / ``pyproject.toml``, debounced."""

    def __init__(self, on_change: Callable[[Path], None], debounce_s: float = 0.15):
        self._on_change = on_change
        self._debounce_s = debounce_s
        self._observer = None
        self._watched: set[Path] = set()
        self._timers: dict[Path, threading.Timer] = {}
        self._lock = threading.Lock()

    def watch(self, folder: Path) -> None:
        folder = folder.resolve()
        with self._lock:
            if folder in self._watched or not folder.is_dir():
                return
            self._watched.add(folder)
            try:
                observer = self._ensure_observer()
                observer.schedule(_Handler(self._fire), str(folder), recursive=False)
            except Exception as exc:  # noqa: BLE001 - a missing watch only costs hot reload
                log.warning("cannot watch %s for config changes: %s", folder, exc)

    def _ensure_observer(self):
        if self._observer is None:
            from watchdog.observers import Observer

            self._observer = Observer()
            self._observer.daemon = True
            self._observer.start()
        return self._observer

    def _fire(self, path: Path) -> None:
        if path.name not in (CONFIG_FILE, PYPROJECT):
            return
        with self._lock:
            old = self._timers.pop(path, None)
            if old is not None:
                old.cancel()
            timer = threading.Timer(self._debounce_s, self._on_change, args=(path,))
            timer.daemon = True
            self._timers[path] = timer
            timer.start()

    def stop(self) -> None:
        with self._lock:
            for timer in self._timers.values():
                timer.cancel()
            self._timers.clear()
            observer, self._observer = self._observer, None
        if observer is not None:
            observer.stop()
            observer.join(timeout=2)


def _handler_base():
    from watchdog.events import FileSystemEventHandler

    return FileSystemEventHandler


class _Handler(_handler_base()):  # type: ignore[misc]
    def __init__(self, fire: Callable[[Path], None]):
        super().__init__()
        self._fire = fire

    def on_any_event(self, event) -> None:  # noqa: D401 - watchdog callback
        if event.event_type in ("opened", "closed_no_write"):
            return
        for attr in ("src_path", "dest_path"):
            value = getattr(event, attr, None)
            if value:
                self._fire(Path(value.decode() if isinstance(value, bytes) else value))


class WorkspaceConfig:
    """All settings sources of one server, and the effective Settings of a document.

    The server feeds it (initialization options, pushed and pulled settings, file changes) and
    asks :meth:`settings_for`; it never talks to the client itself."""

    def __init__(self, roots: Iterable[Path] = ()):
        self.roots = [root.resolve() for root in roots]
        self.user = Layer("initializationOptions")
        self.pushed = Layer("workspace/didChangeConfiguration")
        self.pulled: dict[str, Layer] = {}
        self.files = FileLayers()

    def set_user(self, raw: Any) -> list[str]:
        self.user = parse_layer(lsp_section(raw), "initializationOptions", user_level=True)
        return self.user.warnings

    def set_pushed(self, raw: Any) -> list[str]:
        self.pushed = parse_layer(lsp_section(raw), "workspace/didChangeConfiguration")
        return self.pushed.warnings

    def set_pulled(self, scope: str, raw: Any) -> list[str]:
        self.pulled[scope] = parse_layer(raw, f"workspace/configuration [{scope or 'global'}]")
        return self.pulled[scope].warnings

    def root_for(self, path: Path) -> Path | None:
        candidates = [r for r in self.roots if r == path or r in path.parents]
        return max(candidates, key=lambda r: len(r.parts)) if candidates else None

    def config_files(self, path: Path) -> list[Path]:
        """The config files that apply to a document at ``path``, lowest precedence first."""
        return find_config_files(path.parent, self.root_for(path))

    def settings_for(self, path: Path | None, scope: str | None = None) -> tuple[Settings, list[str]]:
        """Effective settings for the document at ``path`` (None: an unsaved/untitled buffer,
        which sees only LSP settings); the warnings are its files' (a bad key, with its line; a file
        that is not TOML, whose last good version is kept) and the model rules'."""
        warnings: list[str] = []
        layers: list[Layer] = []
        if path is not None:
            for file in self.config_files(path):
                layer, error = self.files.get(file)
                warnings.extend([error] if error else layer.warnings)
                layers.append(layer)
        layers.append(self.user)
        layers.append(self.pushed)
        if "" in self.pulled:
            layers.append(self.pulled[""])
        if scope and scope in self.pulled:
            layers.append(self.pulled[scope])
        settings, more = resolve(layers, self.user)
        return settings, warnings + more
