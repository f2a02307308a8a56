"""``copy-as-decode serve-openai``: an OpenAI-compatible HTTP server on the engine
(engine.openai_api). What it serves, how it loads its model and when it needs a key are in
:data:`DESCRIPTION` (its ``--help``)."""

from __future__ import annotations

import argparse
import ipaddress
import os
import socket
import sys
from pathlib import Path

from engine.commands.files import ENGINE_FLAGS, workspace_settings
from engine.core import environment
from engine.settings import add_setting_flags, engine_arguments, given_flags, with_flags

DEFAULT_KEY_ENV = environment.SERVER_KEY


DESCRIPTION = f"""\
Serve an OpenAI-compatible HTTP API on the engine: chat completions with
Predicted Outputs (the server drafts from the request's "prediction"),
GET /v1/models, and POST /v1/edits/copy-as-decode for the engine's own edit
request (program mode included).

example:
  copy-as-decode serve-openai --port 8000
  # base URL http://127.0.0.1:8000/v1, model id "default"
  # (clients' settings: docs/openai-endpoint.md)

The model loads with the same settings as `edit` (the .copy-as-decode.toml and
pyproject.toml files found from --workspace; flags override them). It listens on
127.0.0.1 unless --host says otherwise, which needs an API key: when the
variable --api-key-env names (default {DEFAULT_KEY_ENV}) is set, every
request must send "Authorization: Bearer <its value>". The key is never logged.
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve-openai", help="serve an OpenAI-compatible HTTP API on 127.0.0.1",
                       description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1; any other needs "
                   "an API key)")
    p.add_argument("--port", type=int, default=8000, help="TCP port (default 8000)")
    p.add_argument("--workspace", type=Path, default=None, help="folder whose .copy-as-decode.toml / pyproject.toml "
                   "settings apply (default: the current folder)")
    p.add_argument("--served-name", default=None, help="the model id clients send and /v1/models lists "
                   "(default: the --model value)")
    add_setting_flags(p, (*ENGINE_FLAGS, "verify", "chat_max_tokens"),
                      extra_help={"threads": "Also torch's intra-op threads."})
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


def run(args: argparse.Namespace) -> int:
    import uvicorn

    from engine.api import EditError, Engine
    from engine.core.errors import ModelLoadError
    from engine.openai_api.app import ServerConfig, create_app
    from engine.runtime.selector.adapter import resolve_selector
    from engine.runtime.threads import set_threads

    api_key = os.environ.get(args.api_key_env) or None
    if not _loopback(args.host) and api_key is None:
        print(f"serve-openai: --host {args.host} is not loopback: set ${args.api_key_env} so requests need a key",
              file=sys.stderr)
        return 2
    if not 0 < args.port < 65536 or args.max_waiting < 0 or args.max_body_kb < 1:
        print("serve-openai: --port must be 1-65535, --max-waiting >= 0, --max-body-kb >= 1", file=sys.stderr)
        return 2
    try:
        sock = listen_socket(args.host, args.port)  # a busy port fails here, before the model loads
    except OSError as exc:
        print(f"serve-openai: cannot listen on {args.host}:{args.port}: {exc.strerror or exc} "
              "(is another server using this port? choose another with --port)", file=sys.stderr)
        return 2
    settings = with_flags(workspace_settings(args.workspace or Path.cwd()), given_flags(args))
    set_threads(args.threads)
    try:
        resolve_selector(settings.model.selector, settings.model.name)
        engine = Engine.load(**engine_arguments(settings), progress=lambda m: print(m, file=sys.stderr))
    except (EditError, ModelLoadError, ValueError) as exc:
        sock.close()
        print(f"serve-openai: {exc}", file=sys.stderr)
        return 2
    config = ServerConfig(model_id=args.served_name or settings.model.name, max_waiting=args.max_waiting,
                          max_body_bytes=args.max_body_kb * 1024, api_key=api_key,
                          settings=settings)
    app = create_app(engine, config)
    ready = (f"serving {config.model_id} ({engine.loaded.runtime.describe()}) at http://{args.host}:{args.port}/v1"
             + (" (bearer key required)" if api_key else ""))
    server = _announcing_server()(uvicorn.Config(app, log_level=args.log_level, access_log=False), ready)
    server.run(sockets=[sock])
    return 0 if server.started else 2


def listen_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` (IPv4 or IPv6, as the address says), for uvicorn to
    serve on. Binding here, first, turns a busy port into one clear error before the model loads."""
    family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn's own sockets
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def _announcing_server():
    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn's server that says it is serving once it is: after its startup (the lifespan and
        the listening socket) completed, not before."""

        def __init__(self, config: "uvicorn.Config", ready: str):
            super().__init__(config)
            self.ready = ready

        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets=sockets)
            if self.started and not self.should_exit:
                print(self.ready, file=sys.stderr, flush=True)

    return Server

