"""Registered definitions (`workflow_definitions`): each definition a run started on,
with its shape, so that code that no longer has it can tell where the run may resume."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg.types.json import Jsonb

from .sql import Sql


@dataclass(frozen=True)
class StoredDefinition:
    workflow_name: str
    fingerprint: str
    version: int
    shape: dict[str, Any]
    shape_hash: str
    pinning: str
    registered_at: datetime


@dataclass(frozen=True)
class NewDefinition:
    workflow_name: str
    fingerprint: str
    version: int
    shape: dict[str, Any]
    shape_hash: str
    pinning: str


class DefinitionStore:
    """Register definitions (once per fingerprint) and read them back."""

    def __init__(self, sql: Sql) -> None:
        self._sql = sql
        # Definitions this connection registered, committed: registering again is a
        # no-op, so each is written once per connection, not once per pass. Those of the
        # open transaction count once it commits (Store.transaction says when).
        self._known: set[tuple[str, str, str]] = set()
        self._in_transaction: set[tuple[str, str, str]] | None = None

    def register(
        self, definitions: Sequence[NewDefinition], now: datetime, *, again: bool = False
    ) -> None:
        """Store the definitions not stored yet (inside `pipeline()` it rides the next
        round trip); `again`: also those this connection stored before (a deploy)."""
        held = self._in_transaction or set()
        new = [
            d
            for d in definitions
            if again
            or (
                (d.workflow_name, d.fingerprint, d.pinning) not in self._known
                and (d.workflow_name, d.fingerprint, d.pinning) not in held
            )
        ]
        if not new:
            return
        rows = [d.__dict__ for d in new]
        self._sql.run("register_definitions", {"rows": Jsonb(rows), "now": now})
        keys = {(d.workflow_name, d.fingerprint, d.pinning) for d in new}
        if self._in_transaction is None:
            self._known |= keys
        else:
            self._in_transaction |= keys

    def knows(self, workflow_name: str, fingerprint: str, pinning: str) -> bool:
        """Whether this connection registered the definition already (a set lookup)."""
        key = (workflow_name, fingerprint, pinning)
        return key in self._known or key in (self._in_transaction or ())

    def transaction_began(self) -> None:
        if self._in_transaction is None:
            self._in_transaction = set()

    def transaction_ended(self, committed: bool) -> None:
        """The outermost transaction ended: what it registered is known if it committed,
        written again next time if it rolled back."""
        if committed and self._in_transaction:
            self._known |= self._in_transaction
        self._in_transaction = None

    def get(self, workflow_name: str, fingerprint: str) -> StoredDefinition | None:
        """The stored definition (its pinning: the latest registration's)."""
        row = self._sql.one(
            "stored_definition", {"workflow_name": workflow_name, "fingerprint": fingerprint}
        )
        return StoredDefinition(**row) if row else None
