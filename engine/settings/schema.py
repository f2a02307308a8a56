"""The settings schema: every user-facing setting declared once, read back, and checked.

Every setting is declared once, in :class:`Settings` below: its name (the camelCase key editors
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

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from engine.core import defaults
from engine.core.choices import ApplyMode, Backend, Dtype, FlashAttention, IdleWork, PromptStyle, UserMode, Verify
from engine.runtime.backends import BackendOptions

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
    dtype: Dtype = setting(
        "auto", "Weight and activation dtype: auto is float32 on the CPU and bfloat16 on a GPU.",
        editor_choices=("auto", "float32", "bfloat16", "float16"))
    mode: UserMode = setting(
        "auto", "Decoding mode: auto (program when the model has a span selector, else speculative), program, "
        "speculative (lossless: the same output as ar) or ar.")
    apply_mode: ApplyMode = setting(
        "stream", "When an edit reaches the document: as it is decoded, once at the end, or after you confirm "
        "it in a preview.")
    max_new_tokens: int = setting(1024, "Most tokens the model may generate for one edit.", low=1, high=65536)
    chat_max_tokens: int = setting(1024, "Most tokens a chat completion to serve-openai generates when the request "
                                   "sets no max_tokens (as many as maxNewTokens allows one edit; at most what the "
                                   "context leaves).", low=1, high=65536)
    context_lines: int = setting(20, "Read-only lines shown to the model on each side of a selected region.",
                                 low=0, high=10000)
    apply_window_lines: int = setting(
        20, "Apply: file lines the model reads on each side of a change (with the whole update); the rest of the "
        "file is copied without being read.", low=1, high=1000)
    apply_max_lines: int = setting(5000, "Apply: the longest file (in lines) an update may be merged into; a longer "
                                   "one is refused and nothing is written.", low=1, high=5000)
    prompt_style: PromptStyle = setting(
        "auto", "Program mode's prompt: auto (the selector prompt when the model carries a span selector, else "
        "few-shot), few-shot or selector.")
    verify: Verify = setting(
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
    backend: Backend = setting(
        "auto", "What runs the model: auto (llama.cpp for a `.gguf` when installed, else transformers), "
        "transformers, llamacpp or vllm (the server at serverUrl).")
    threads: int = setting(defaults.THREADS, "llama.cpp CPU threads; 0 (auto): chosen at load from a short measurement "
                          "(1 up to the physical cores the load leaves free; `copy-as-decode doctor` shows it).", low=0, high=512)
    context_size: int = setting(defaults.CONTEXT_TOKENS, "llama.cpp context size in tokens (prompt plus generated text).",
                                low=256, high=1 << 20)
    batch_size: int = setting(defaults.BATCH_TOKENS, "llama.cpp batch size: tokens per decode call.", low=1, high=1 << 16)
    gpu_layers: int = setting(defaults.GPU_LAYERS, "Layers llama.cpp offloads to a GPU (Metal or CUDA builds); -1: all.",
                              low=-1, high=4096)
    flash_attention: FlashAttention = setting(
        defaults.FLASH_ATTENTION, "llama.cpp's flash attention: auto (off on the CPU, where decoding is faster without it), on or off.")
    prefix_cache_tokens: int = setting(defaults.PREFIX_CACHE_TOKENS, "Tokens of recent prompts whose KV cache is kept so the next edit "
                                       "prefills only what changed; 0: off.", low=0, high=1 << 22)
    warm_up: IdleWork = setting(
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
    api_key_env: str = setting(defaults.API_KEY_ENV, "The environment variable that holds the vLLM server's "
                               "API key (the key itself is never a setting).", user_only=True,
                               pattern=ENV_NAME_PATTERN, pattern_help="is not an environment variable name",
                               values="an environment variable name")
    check_command: str = setting(
        "", "A command that must accept an AI fix before it is written, e.g. `python -m pytest -q -x` or "
        "`node {file}`: `{file}` is a temporary copy of the file holding the candidate, exit status 0 passes; "
        "empty: no check (the AI fix is written as it comes). It runs code, so only your user settings set it.",
        user_only=True, values="a shell command with `{file}`, or empty")
    check_timeout: int = setting(60, "Seconds one run of checkCommand may take; a run that takes longer is killed "
                                 "and fails.", low=1, high=3600)
    candidates: int = setting(4, "With checkCommand: most candidate fixes one AI fix decodes and checks; the first "
                              "that passes is written, the others are offered as \"AI fix: next candidate\" "
                              "(each checked before it is written).", low=1, high=16)
    max_rounds: int = setting(1, "With checkCommand: rounds of candidates; when none passes, the first failing "
                              "check's output joins the instruction for the next round.", low=1, high=5)

    @field_validator("*", mode="before")
    @classmethod
    def _strip(cls, value: Any) -> Any:
        return value.strip() if isinstance(value, str) else value

    def backend_options(self) -> BackendOptions:
        """The engine's :class:`engine.runtime.backends.BackendOptions` for these settings (the API key
        itself is read from the environment variable when the backend connects, never stored)."""
        return BackendOptions(threads=self.threads, context=self.context_size, batch=self.batch_size,
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

