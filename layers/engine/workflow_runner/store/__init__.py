"""PostgreSQL storage: the only package that talks to the database driver."""

from __future__ import annotations

from .database import (
    NewEvent,
    Store,
    StoredEvent,
    connect,
    is_transient,
)
from .migrate import apply_migrations, pending_migrations, schema_sql

__all__ = [
    "NewEvent",
    "Store",
    "StoredEvent",
    "apply_migrations",
    "connect",
    "is_transient",
    "pending_migrations",
    "schema_sql",
]
