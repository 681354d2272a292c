"""`wfr console`: serve the operator console on this machine until Ctrl-C.

Who may use it (console/access.py): the Host names it answers are those of its bind
plus `--allow-host` and WFR_CONSOLE_ALLOW_HOSTS; the operator token comes from
WFR_CONSOLE_TOKEN, or is made up and printed in the link it starts with.
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Any

from ..callback_tokens import callback_base_url
from ..console import ConsoleConfig, make_console_server
from ..console.access import (
    TOKEN_ENV,
    check_token,
    host_name,
    is_loopback,
    is_wildcard,
    machine_addresses,
)
from ..definition import WorkflowRegistry
from ..errors import InvalidInput
from ..local.application import find_template
from .context import Context, UsageError

ALLOW_HOSTS_ENV = "WFR_CONSOLE_ALLOW_HOSTS"


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
    *,
    allow_host_names: tuple[str, ...] = (),
    token: str | None = None,
    require_token: bool = False,
) -> int:
    """Bind and serve the console until interrupted; return the exit code.

    `token` (from WFR_CONSOLE_TOKEN) is never printed; one the console makes up is, in
    the link it prints.

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
        allow_host_names=allow_host_names,
        token=token,
        require_token=require_token,
    )
    try:
        server, app = make_console_server(config, host, port)
    except OSError as error:
        raise UsageError(f"cannot listen on {host}:{port}: {error.strerror or error}") from None
    address, bound = str(server.server_address[0]), int(server.server_address[1])
    mode = "actions enabled" if allow_actions else "read-only (--allow-actions enables actions)"
    if not is_loopback(address):
        everywhere = " (every address of this machine)" if is_wildcard(address) else ""
        out.warn(
            f"listening on {_shown(host or address)}{everywhere}: anyone who can reach it and "
            "has the operator token can read every run"
            + (" and act on it" if allow_actions else "")
        )
    if is_wildcard(address):
        out.warn(
            "it answers only the hosts listed below; --allow-host NAME adds the name or "
            "address you browse to"
        )
    link = f"http://{_browse_host(host, address)}:{bound}/"
    made_up = token is None and config.token is not None
    if made_up:
        link += f"?token={config.token}"
    out.line(f"wfr console: {link}  database {label}, {mode}")
    if config.token is not None:
        source = "made up for this process: open the link above" if made_up else TOKEN_ENV
        out.line(f"operator token required for every page ({source})")
    if not is_loopback(address):
        out.line(f"answers requests for {', '.join(sorted(config.allowed_hosts or ()))}")
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


def _browse_host(host: str, address: str) -> str:
    """The host of the link to print: the one given, or for a wildcard bind the first
    network address of this machine found (127.0.0.1 when none is)."""
    if not is_wildcard(address):
        return host_name(host)[0]
    found = machine_addresses(ipv6=":" in address)
    return found[0] if found else "127.0.0.1"


def _shown(address: str) -> str:
    return f"[{address}]" if ":" in address else address


def _host_names(ctx: Context) -> tuple[str, ...]:
    """`--allow-host` values, then WFR_CONSOLE_ALLOW_HOSTS' (comma-separated), checked."""
    from_env = [n.strip() for n in ctx.environ.get(ALLOW_HOSTS_ENV, "").split(",") if n.strip()]
    sources = [("--allow-host", name) for name in ctx.args.allow_host or []]
    sources += [(ALLOW_HOSTS_ENV, name) for name in from_env]
    for source, name in sources:
        try:
            host_name(name)
        except InvalidInput as error:
            raise UsageError(f"{source} {error}") from None
    return tuple(name for _, name in sources)


def _token(ctx: Context) -> str | None:
    token = ctx.environ.get(TOKEN_ENV, "").strip() or None
    if token is not None:
        try:
            check_token(token)
        except InvalidInput as error:
            raise UsageError(f"{TOKEN_ENV}: {error}") from None
    return token


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
    if ctx.args.port < 0 or ctx.args.port > 65535:
        raise UsageError(f"--port must be between 0 and 65535, got {ctx.args.port}")
    names, token = _host_names(ctx), _token(ctx)
    store = ctx.store()
    store.ping()
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
        allow_host_names=names,
        token=token,
        require_token=ctx.args.require_token,
    )
