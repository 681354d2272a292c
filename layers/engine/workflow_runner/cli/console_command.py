"""`wfr console`: serve the operator console on this machine until Ctrl-C."""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Any

from ..callback_tokens import callback_base_url
from ..console import ConsoleConfig, make_console_server
from ..console.app import LOOPBACK
from ..definition import WorkflowRegistry
from ..local.routes import find_template
from .context import Context, UsageError


def database_label(dsn: str) -> str:
    """`dbname on host` from a connection's parameters (never the password)."""
    params = dict(part.split("=", 1) for part in dsn.split() if "=" in part)
    host = params.get("host") or "localhost"
    return f"{params.get('dbname', '?')} on {host}"


def serve_console(
    out: Any,
    database_url: str,
    label: str,
    registry: WorkflowRegistry,
    host: str,
    port: int,
    allow_actions: bool,
    template: Path | None,
) -> int:
    """Bind and serve the console until interrupted; return the exit code.

    Raises:
        UsageError: the address cannot be bound.
    """
    config = ConsoleConfig(
        database_url=database_url,
        registry=registry,
        allow_actions=allow_actions,
        template=template,
        database_label=label,
        callback_base_url=callback_base_url(),  # what `wfr` was started with
    )
    try:
        server, app = make_console_server(config, host, port)
    except OSError as error:
        raise UsageError(f"cannot listen on {host}:{port}: {error.strerror or error}") from None
    bound = int(server.server_address[1])
    shown = f"[{host}]" if ":" in host else host
    mode = "actions enabled" if allow_actions else "read-only (--allow-actions enables actions)"
    if host not in LOOPBACK:
        out.warn(
            f"listening on {host}: anyone who can reach this address can read every run"
            + (" and act on it" if allow_actions else "")
        )
    out.line(f"wfr console: http://{shown}:{bound}/  database {label}, {mode}")
    out.line("Ctrl-C stops it.")
    out.out.flush()
    previous = _stop_on_sigterm()
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        out.line("console stopped")
    finally:
        server.server_close()
        app.pool.close()
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    return 0


def _stop_on_sigterm() -> Any:
    """SIGTERM stops the console as Ctrl-C does, so what the caller started (the demo's
    embedded PostgreSQL) is cleaned up; returns the handler it replaced (None: not the
    main thread, where signals cannot be handled)."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    return signal.signal(signal.SIGTERM, stop)


def cmd_console(ctx: Context) -> int:
    """Serve the console against DATABASE_URL."""
    store = ctx.store()
    store.ping()
    if ctx.args.port < 0 or ctx.args.port > 65535:
        raise UsageError(f"--port must be between 0 and 65535, got {ctx.args.port}")
    template = Path(ctx.args.template) if ctx.args.template else find_template()
    if template is not None and not template.is_file():
        raise UsageError(f"--template {template}: no such file")
    return serve_console(
        ctx.output,
        ctx.database_url,
        database_label(store.dsn),
        ctx.registry(),
        ctx.args.host,
        ctx.args.port,
        ctx.args.allow_actions,
        template,
    )
