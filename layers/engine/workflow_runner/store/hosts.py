"""Which function version has which definition's code (`workflow_definition_hosts`): the
kept tier of engine/pinning.py reads it, ResumeRun and StepDispatcher write it when a
container starts, the pruning command deletes the rows of versions it deletes."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from psycopg.types.json import Jsonb

from .sql import Sql


@dataclass(frozen=True)
class HostRow:
    """One registration: `function_arn` (a qualified function ARN) of `function_role`
    has the definition (`workflow_name`, `fingerprint`)."""

    workflow_name: str
    fingerprint: str
    function_role: str
    function_arn: str
    registered_at: datetime


class DefinitionHostStore:
    """Register, look up and forget the function versions that have a definition."""

    def __init__(self, sql: Sql) -> None:
        self._sql = sql

    def register(
        self, definitions: Iterable[tuple[str, str]], role: str, arn: str, now: datetime
    ) -> None:
        """`arn` (of function `role`) has these (workflow, fingerprint) definitions; one
        statement, a no-op for those registered before."""
        rows = [{"workflow_name": name, "fingerprint": fp} for name, fp in definitions]
        if rows:
            self._sql.run(
                "register_hosts", {"rows": Jsonb(rows), "role": role, "arn": arn, "now": now}
            )

    def hosts_of(self, workflow_name: str, fingerprint: str, role: str) -> list[str]:
        """The function versions of `role` that registered the definition, newest first."""
        rows = self._sql.all(
            "hosts_of_definition",
            {"workflow_name": workflow_name, "fingerprint": fingerprint, "role": role},
        )
        return [str(r["function_arn"]) for r in rows]

    def all(self) -> list[HostRow]:
        """Every registration, by function version."""
        return [HostRow(**r) for r in self._sql.all("hosts_all", {})]

    def forget(self, arn: str) -> None:
        """The function version `arn` is gone: drop what it registered."""
        self._sql.run("forget_host", {"arn": arn})

    def unsettled_definitions(self) -> set[tuple[str, str]]:
        """(workflow, fingerprint) of every run that is not settled."""
        rows = self._sql.all("unsettled_definitions", {})
        return {(str(r["workflow_name"]), str(r["fingerprint"])) for r in rows}
