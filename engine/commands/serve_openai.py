"""``copy-as-decode serve-openai``: an OpenAI-compatible HTTP server on the engine, with
Predicted Outputs (``prediction`` on chat completions) and the engine's own edit request.

    copy-as-decode serve-openai [--port 8000] [--model default] [--backend auto]
    # then: base URL http://127.0.0.1:8000/v1, model "default" (see docs/openai-endpoint.md)

It loads the model with the same settings as ``edit`` (workspace configuration found from
``--workspace``, default the current folder; flags override it) and listens on loopback unless
``--host`` says otherwise, which needs an API key. When the environment variable named by
``--api-key-env`` is set, every request needs ``Authorization: Bearer <its value>``; the key is
never logged.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import sys
from pathlib import Path

from engine.commands.edit import add_flash_attention_argument, add_verify_argument

DEFAULT_KEY_ENV = "COPY_AS_DECODE_SERVER_KEY"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve-openai", help="serve an OpenAI-compatible API (chat completions with predicted "
                       "outputs, and edits) on 127.0.0.1", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1; any other needs "
                   "an API key)")
    p.add_argument("--port", type=int, default=8000, help="TCP port (default 8000)")
    p.add_argument("--workspace", type=Path, default=None, help="folder whose .copy-as-decode.toml / pyproject.toml "
                   "settings apply (default: the current folder)")
    p.add_argument("--model", default=None, help="'default' (embedded SmolLM2-135M), a hub id, a folder or a .gguf "
                   "(default: the workspace configuration, else 'default')")
    p.add_argument("--served-name", default=None, help="the model id clients send and /v1/models lists "
                   "(default: the --model value)")
    p.add_argument("--backend", default=None, choices=("auto", "transformers", "llamacpp", "vllm"),
                   help="what runs the model (default: the workspace configuration, else auto)")
    p.add_argument("--selector", default=None, metavar="auto|none|PATH", help="span-selector adapter for program "
                   "mode on the edit endpoint (default: the workspace configuration)")
    p.add_argument("--device", default=None)
    p.add_argument("--dtype", default=None)
    p.add_argument("--threads", type=int, default=None, help="torch intra-op threads and llama.cpp's")
    p.add_argument("--gpu-layers", type=int, default=None, help="layers llama.cpp offloads to a GPU (Metal/CUDA "
                   "builds; -1: all; default: the gpuLayers setting, 0)")
    add_flash_attention_argument(p)
    add_verify_argument(p)
    p.add_argument("--server-url", default=None, help="vLLM server (--backend vllm); its key is read from "
                   "$COPY_AS_DECODE_API_KEY")
    p.add_argument("--served-model", default=None, help="model name on the vLLM server (default: the only one)")
    p.add_argument("--prefix-cache-tokens", type=int, default=None, help="tokens of recent prompts whose KV is kept "
                   "to reuse a common prefix in the next request (default: the engine's; 0: off)")
    p.add_argument("--max-waiting", type=int, default=8, help="requests that may wait while one decodes "
                   "(in-process backends; one more is answered 429; default 8)")
    p.add_argument("--max-body-kb", type=int, default=4096, help="largest request body (default 4096 KiB; larger: 413)")
    p.add_argument("--api-key-env", default=DEFAULT_KEY_ENV, help="environment variable holding the key clients "
                   f"must send as a bearer token (default {DEFAULT_KEY_ENV}; unset: no key needed)")
    p.add_argument("--log-level", default="warning", choices=("debug", "info", "warning", "error"))
    p.set_defaults(func=run)


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _options(args: argparse.Namespace, settings: object) -> object:
    """``edit``'s backend options (flags over the workspace settings), plus the prefix cache size."""
    import dataclasses

    from engine.commands.edit import _backend_options

    options = _backend_options(args, settings)
    if args.prefix_cache_tokens is not None:
        options = dataclasses.replace(options, prefix_cache_tokens=max(0, args.prefix_cache_tokens))
    return options


def run(args: argparse.Namespace) -> int:
    import uvicorn

    from engine.api import EditError, Engine
    from engine.openai_api.app import ServerConfig, create_app
    from engine.runtime.models import ModelLoadError
    from engine.runtime.selector.adapter import resolve_selector
    from engine.runtime.threads import set_threads
    from engine.settings import load_workspace_settings

    api_key = os.environ.get(args.api_key_env) or None
    if not _loopback(args.host) and api_key is None:
        print(f"serve-openai: --host {args.host} is not loopback: set ${args.api_key_env} so requests need a key",
              file=sys.stderr)
        return 2
    if not 0 < args.port < 65536 or args.max_waiting < 0 or args.max_body_kb < 1:
        print("serve-openai: --port must be 1-65535, --max-waiting >= 0, --max-body-kb >= 1", file=sys.stderr)
        return 2
    settings, warnings = load_workspace_settings((args.workspace or Path.cwd()).resolve())
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    model = args.model or settings.model
    selector = args.selector or settings.selector
    set_threads(args.threads)
    try:
        resolve_selector(selector, model)
        engine = Engine.load(model, device=args.device or settings.device, dtype=args.dtype or settings.dtype,
                             progress=lambda m: print(m, file=sys.stderr),
                             trust_remote_code=settings.trust_remote_code, selector=selector,
                             backend=args.backend or settings.backend, options=_options(args, settings))
    except (EditError, ModelLoadError, ValueError) as exc:
        print(f"serve-openai: {exc}", file=sys.stderr)
        return 2
    config = ServerConfig(model_id=args.served_name or model, max_waiting=args.max_waiting,
                          max_body_bytes=args.max_body_kb * 1024, api_key=api_key,
                          max_new_tokens=settings.max_new_tokens, context_lines=settings.context_lines,
                          verify=args.verify or settings.verify)
    app = create_app(engine, config)
    print(f"serving {config.model_id} ({engine.loaded.runtime.describe()}) at http://{args.host}:{args.port}/v1"
          + (" (bearer key required)" if api_key else ""), file=sys.stderr, flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level, access_log=False)
    return 0
