"""Settings: one typed object, its sources and their precedence, and hot reload of config files.

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
camelCase (``maxNewTokens``), snake_case or kebab-case. Unknown keys are warned about and
ignored; an invalid value in a workspace file rejects that file as a whole (the last good
version of it stays in force) and in LSP settings skips that key, each with a message that
says how to fix it.

Security: ``trustRemoteCode`` and ``allowedModels`` are honoured ONLY from initializationOptions
(user-level settings); anywhere else they are ignored with a warning. A model (or a ``selector``
adapter folder, which is weights too) named by any other source (workspace files, pulled or pushed settings, which may come from a workspace's
``.vscode/settings.json``) must match the user's ``allowedModels`` patterns: ``"default"`` (the
embedded model), ``"hub:<glob>"`` (Hugging Face hub ids, e.g. ``"hub:Qwen/*"``) or a path glob
for local folders / GGUF files (``"~/models/*"``). The default allows the embedded model and any
hub id (weights are loaded as safetensors; remote code is never run unless the user allows it).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import logging
import re
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

log = logging.getLogger(__name__)

SECTION = "copyAsDecode"
CONFIG_FILE = ".copy-as-decode.toml"
PYPROJECT = "pyproject.toml"
PYPROJECT_TABLE = "copy-as-decode"  # [tool.copy-as-decode]
MODES = ("auto", "program", "speculative", "ar")
APPLY_MODES = ("stream", "final", "preview")
SELECTOR_CHOICES = ("auto", "none")  # or an adapter folder
# Program mode's prompt (EditRequest.program_prompt): auto = the selector prompt when the model carries
# a span selector, the few-shot prompt otherwise. The text modes have one prompt.
PROMPT_STYLES = ("auto", "few-shot", "selector")
DEVICES_RE = re.compile(r"^(auto|cpu|mps|cuda(:\d+)?)$")
DTYPES = ("auto", "float32", "fp32", "bfloat16", "bf16", "float16", "fp16")
USER_ONLY = ("trust_remote_code", "allowed_models", "server_url", "served_model", "api_key_env")
BACKENDS = ("auto", "transformers", "llamacpp", "vllm")


class ConfigError(ValueError):
    """An invalid settings value or file; the message names the source, the key and the fix."""


@dataclass(frozen=True)
class Settings:
    """Effective settings for one document. Validated once here; the rest of the server only
    reads these fields."""

    model: str = "default"
    device: str = "auto"
    dtype: str = "auto"
    mode: str = "auto"  # program with a span selector (the embedded model), else speculative (lossless)
    apply_mode: str = "stream"  # stream | final | preview (every edit waits for the user's confirmation)
    max_new_tokens: int = 1024
    context_lines: int = 20
    prompt_style: str = "auto"
    selector: str = "auto"  # program mode's span-selector adapter: auto | none | a folder
    whole_document_lines: int = 200
    trust_remote_code: bool = False
    allowed_models: tuple[str, ...] = ("default", "hub:*")
    # What runs the model (engine.runtime.backends): auto = llama.cpp for a .gguf when installed, else transformers.
    backend: str = "auto"
    threads: int = 0  # llama.cpp CPU threads (0: the CPUs available, engine.runtime.backends.llamacpp.available_cpus)
    context_size: int = 4096  # llama.cpp context (tokens)
    batch_size: int = 512  # llama.cpp batch (tokens per decode call)
    gpu_layers: int = 0  # layers llama.cpp offloads to a GPU (Metal/CUDA builds; -1: all)
    # KV of recent prompts kept to reuse their common prefix in the next edit (engine.runtime.prefix_cache); 0: off.
    prefix_cache_tokens: int = 8192
    # The vLLM server (user-level only, like trustRemoteCode: a workspace cannot redirect edits).
    server_url: str = ""
    served_model: str = ""  # the name the server serves ("": the only one it serves)
    api_key_env: str = "COPY_AS_DECODE_API_KEY"  # environment variable holding the server's API key
    # Reading the prompt ahead (lsp_server/warmup.py): "idle" reads an AI fix's prompt once the open
    # document has not changed for warm_up_delay seconds (at most warm_up_max_tokens tokens); "off".
    warm_up: str = "idle"
    warm_up_delay: float = 1.5
    warm_up_max_tokens: int = 4096

    def backend_options(self) -> Any:
        """The engine's :class:`engine.runtime.backends.BackendOptions` for these settings (the API key
        itself is read from the environment variable when the backend connects, never stored)."""
        from engine.runtime.backends import BackendOptions

        return BackendOptions(threads=self.threads or None, context=self.context_size, batch=self.batch_size,
                              server_url=self.server_url or None, served_model=self.served_model or None,
                              api_key_env=self.api_key_env, gpu_layers=self.gpu_layers,
                              prefix_cache_tokens=self.prefix_cache_tokens)

    def lsp_dict(self) -> dict[str, Any]:
        """The settings as camelCase JSON (what ``copyAsDecode.server.settings`` returns)."""
        out = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            out[_camel(f.name)] = list(value) if isinstance(value, tuple) else value
        return out


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _norm(key: str) -> str:
    return key.replace("_", "").replace("-", "").lower()


_FIELDS = {_norm(f.name): f.name for f in dataclasses.fields(Settings)}


def _check(name: str, value: Any) -> Any:
    """Validate one value; returns it normalised or raises ConfigError (message without source)."""
    key = _camel(name)
    if name in ("server_url", "served_model", "api_key_env"):
        if not isinstance(value, str):
            raise ConfigError(f"{key} must be a string, got {value!r}")
        value = value.strip()
        if name == "server_url" and value and not re.match(r"^https?://[^\s/]+(/\S*)?$", value):
            raise ConfigError(f"{key} {value!r} is not an http(s) URL like http://127.0.0.1:8000")
        if name == "api_key_env" and value and not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", value):
            raise ConfigError(f"{key} {value!r} is not an environment variable name")
    if name in ("model", "device", "dtype", "mode", "apply_mode", "prompt_style", "selector", "backend"):
        if not isinstance(value, str) or not value.strip():
            raise ConfigError(f"{key} must be a non-empty string, got {value!r}")
        value = value.strip()
    if name == "mode" and value not in MODES:
        raise ConfigError(f"{key} {value!r} is not a mode; choose one of {', '.join(MODES)}")
    if name == "backend" and value not in BACKENDS:
        raise ConfigError(f"{key} {value!r} is not a backend; choose one of {', '.join(BACKENDS)}")
    if name == "apply_mode" and value not in APPLY_MODES:
        raise ConfigError(f"{key} {value!r} is not valid; choose stream, final or preview")
    if name == "prompt_style" and value not in PROMPT_STYLES:
        raise ConfigError(f"{key} {value!r} is not valid; choose one of {', '.join(PROMPT_STYLES)}")
    if name == "device" and not DEVICES_RE.match(value):
        raise ConfigError(f"{key} {value!r} is not a device; use auto, cpu, cuda, cuda:N or mps")
    if name == "dtype" and value not in DTYPES:
        raise ConfigError(f"{key} {value!r} is not a dtype; use auto, float32, bfloat16 or float16")
    if name in ("max_new_tokens", "context_lines", "whole_document_lines", "threads", "context_size", "batch_size",
                "gpu_layers", "prefix_cache_tokens"):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{key} must be an integer, got {value!r}")
        low, high = {"max_new_tokens": (1, 65536), "context_lines": (0, 10000),
                     "whole_document_lines": (1, 100000), "threads": (0, 512), "context_size": (256, 1 << 20),
                     "batch_size": (1, 1 << 16), "gpu_layers": (-1, 4096),
                     "prefix_cache_tokens": (0, 1 << 22)}[name]
        if not low <= value <= high:
            raise ConfigError(f"{key} must be between {low} and {high}, got {value}")
    if name == "warm_up" and value not in ("idle", "off"):
        raise ConfigError(f"{key} {value!r} is not valid; choose idle or off")
    if name == "warm_up_delay" and (isinstance(value, bool) or not isinstance(value, (int, float))
                                    or not 0.1 <= value <= 600):
        raise ConfigError(f"{key} must be a number of seconds between 0.1 and 600, got {value!r}")
    if name == "warm_up_max_tokens" and (isinstance(value, bool) or not isinstance(value, int)
                                         or not 0 <= value <= 1 << 20):
        raise ConfigError(f"{key} must be an integer between 0 and {1 << 20}, got {value!r}")
    if name == "trust_remote_code" and not isinstance(value, bool):
        raise ConfigError(f"{key} must be true or false, got {value!r}")
    if name == "allowed_models":
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{key} must be a list of strings, got {value!r}")
        value = tuple(value)
    return value


@dataclass
class Layer:
    """The validated keys one source sets, plus what it had to say about the rest."""

    source: str
    values: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def parse_layer(raw: Mapping[str, Any] | None, source: str, *, user_level: bool = False,
                strict: bool = False) -> Layer:
    """Validate one source's raw mapping. ``strict`` (workspace files): any invalid value raises
    ConfigError for the whole source; otherwise invalid keys are skipped with a warning.
    Security keys are kept only when ``user_level``."""
    layer = Layer(source)
    if raw is None:
        return layer
    if not isinstance(raw, Mapping):
        message = f"{source}: settings must be a table/object, got {type(raw).__name__}"
        if strict:
            raise ConfigError(message)
        layer.warnings.append(message)
        return layer
    for key, value in raw.items():
        name = _FIELDS.get(_norm(str(key)))
        if name is None:
            known = ", ".join(_camel(f.name) for f in dataclasses.fields(Settings))
            layer.warnings.append(f"{source}: unknown setting {key!r} ignored (known: {known})")
            continue
        if value is None:
            continue
        if name in USER_ONLY and not user_level:
            layer.warnings.append(f"{source}: {_camel(name)} is only read from user-level settings "
                                  "(the client's initializationOptions); ignored here")
            continue
        try:
            layer.values[name] = _check(name, value)
        except ConfigError as exc:
            if strict:
                raise ConfigError(f"{source}: {exc}") from None
            layer.warnings.append(f"{source}: {exc}; ignored")
    return layer


def lsp_section(raw: Any) -> Any:
    """The ``copyAsDecode`` section of pushed/initial settings (which may also be flat)."""
    if isinstance(raw, Mapping) and SECTION in raw:
        return raw[SECTION]
    return raw


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
    patterns = user.values.get("allowed_models", Settings.allowed_models)
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


# --- workspace files -------------------------------------------------------------------------

def read_config_file(path: Path) -> Layer:
    """Parse ``.copy-as-decode.toml`` (the whole file is the table) or the
    ``[tool.copy-as-decode]`` table of a pyproject.toml. Raises ConfigError on invalid TOML or
    values (strict), naming the file and the line where TOML says it broke."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return Layer(str(path))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    if path.name == PYPROJECT:
        table = data.get("tool", {}).get(PYPROJECT_TABLE)
        return parse_layer(table, f"{path} [tool.{PYPROJECT_TABLE}]", strict=True)
    return parse_layer(data, str(path), strict=True)


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
    layers = [read_config_file(p) for p in find_config_files(folder)]
    user_layer = parse_layer(lsp_section(user), "user settings", user_level=True)
    settings, warnings = resolve([*layers, user_layer], user_layer)
    return settings, [w for layer in (*layers, user_layer) for w in layer.warnings] + warnings


class FileLayers:
    """The workspace config files seen so far, each with its last good parse.

    ``get(path)`` parses a file the first time; ``reload(path)`` re-parses it after a change and
    keeps the previous good layer when the new content is invalid (returning the error)."""

    def __init__(self) -> None:
        self._good: dict[Path, Layer] = {}
        self._lock = threading.Lock()

    def get(self, path: Path) -> tuple[Layer, str | None]:
        with self._lock:
            if path in self._good:
                return self._good[path], None
        return self.reload(path)

    def reload(self, path: Path) -> tuple[Layer, str | None]:
        try:
            layer = read_config_file(path)
        except ConfigError as exc:
            with self._lock:
                previous = self._good.get(path)
            kept = "the last good configuration stays in force" if previous else "its settings are not used"
            return previous or Layer(str(path)), f"{exc} ({kept})"
        with self._lock:
            self._good[path] = layer
        return layer, None

    def forget(self, path: Path) -> None:
        with self._lock:
            self._good.pop(path, None)


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
        which sees only LSP settings); warnings include file errors (last good config kept)."""
        warnings: list[str] = []
        layers: list[Layer] = []
        if path is not None:
            for file in self.config_files(path):
                layer, error = self.files.get(file)
                if error:
                    warnings.append(error)
                layers.append(layer)
        layers.append(self.user)
        layers.append(self.pushed)
        if "" in self.pulled:
            layers.append(self.pulled[""])
        if scope and scope in self.pulled:
            layers.append(self.pulled[scope])
        settings, more = resolve(layers, self.user)
        return settings, warnings + more
