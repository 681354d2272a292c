"""The test kit's PostgreSQL: one server per process, one fresh database per environment.

The server is `DATABASE_URL` when set (a server on which the kit may create and drop
databases), else an embedded PostgreSQL started on first use and stopped when the
process exits. Each environment gets its own database, a file copy of a template
database migrated once per process (~0.1 s instead of running the migrations again).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
import uuid
from typing import Any

from ..embedded import create_database, create_migrated_database, drop_database

_lock = threading.Lock()
_embedded: dict[str, Any] = {}  # "server" -> handle, "url" -> admin URL
_templates: dict[str, str] = {}  # admin URL -> template database name


def server_url(explicit: str | None = None) -> str:
    """The admin URL databases are created on: `explicit`, else DATABASE_URL, else the
    process's embedded server (started now if it is not running yet)."""
    if explicit:
        return explicit
    configured = os.environ.get("DATABASE_URL")
    if configured:
        return configured
    with _lock:
        if "url" not in _embedded:
            from ..embedded import start_embedded_postgres

            server, url = start_embedded_postgres(fast=True)
            _embedded.update(server=server, url=url)
            atexit.register(server.cleanup)
        return str(_embedded["url"])


def _template(admin_url: str) -> str:
    with _lock:
        name = _templates.get(admin_url)
        if name is None:
            name = f"wfr_testkit_template_{os.getpid()}_{uuid.uuid4().hex[:6]}"
            create_migrated_database(admin_url, name)
            _templates[admin_url] = name
            atexit.register(_drop_quietly, admin_url, name)
        return name


def _drop_quietly(admin_url: str, name: str) -> None:
    # At exit the server may be gone already (a test session stopped it), and the
    # database with it.
    with contextlib.suppress(Exception):
        drop_database(admin_url, name)


def fresh_database(admin_url: str) -> tuple[str, str]:
    """Create a migrated database for one environment; return (name, URL)."""
    name = f"wfr_testkit_{uuid.uuid4().hex[:16]}"
    return name, create_database(admin_url, name, template=_template(admin_url))
