"""The local runtime's state (`wfr local`, `wfr demo`, the test kit): clock, resume
queue, mailbox, and its log of what went wrong in runs.

Tables of migrations 0002_local_runtime and 0012_local_run_log; unused in AWS.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg.types.json import Jsonb

from .sql import Sql
from .streams import StoredEvent


@dataclass(frozen=True)
class QueuedMessage:
    """A resume request in the local queue."""

    message_id: int
    tenant_id: str
    run_id: str
    step_index: int
    wake_at: datetime | None
    force: bool
    visible_at: datetime
    sent_at: datetime | None = None


@dataclass(frozen=True)
class KeptModule:
    """The source of a workflow module as an earlier `wfr local` command ran it."""

    module: str
    source_sha: str
    source: str
    kept_at: datetime


@dataclass(frozen=True)
class CapturedMail:
    """A mail the local dispatcher captured instead of sending."""

    position: int
    request_id: str
    sender: str
    recipients: list[str]
    subject: str
    body: str
    sent_at: datetime


@dataclass(frozen=True)
class LoggedLine:
    """One line of the local runtime's log about a run: the engine's warning (`message`,
    with the task it concerns) and the exception text behind it (`detail`), which stored
    events never carry. Business time."""

    position: int
    tenant_id: str
    run_id: str
    logged_at: datetime
    message: str
    task_key: str | None
    detail: str | None

    @property
    def text(self) -> str:
        """`message: detail`, as one line."""
        return f"{self.message}: {self.detail}" if self.detail else self.message


class LocalStore:
    """The local clock, queue, mailbox and activity reads."""

    def __init__(self, sql: Sql) -> None:
        self._sql = sql

    def clock(self) -> datetime | None:
        """The local business time, or None (no local tables or never set)."""
        present = self._sql.one("local_clock_exists", {})
        if not present or not present["present"]:
            return None
        row = self._sql.one("local_clock_get", {})
        return row["now"] if row else None

    def set_clock(self, now: datetime) -> None:
        self._sql.run("local_clock_set", {"now": now})

    def enqueue(
        self,
        tenant_id: str,
        run_id: str,
        step_index: int,
        wake_at: datetime | None,
        force: bool,
        visible_at: datetime,
        sent_at: datetime,
    ) -> None:
        self._sql.run(
            "local_queue_send",
            {
                "tenant_id": tenant_id,
                "run_id": run_id,
                "step_index": step_index,
                "wake_at": wake_at,
                "force": force,
                "visible_at": visible_at,
                "sent_at": sent_at,
            },
        )

    def receive(self, now: datetime, limit: int) -> list[QueuedMessage]:
        """Take (delete) up to `limit` messages visible at `now`, soonest first."""
        rows = self._sql.all("local_queue_receive", {"now": now, "limit": limit})
        return [_message(r) for r in rows]

    def queued(self) -> list[QueuedMessage]:
        """Every queued message, soonest first."""
        return [_message(r) for r in self._sql.all("local_queue_list", {})]

    def capture_mail(
        self,
        request_id: str,
        sender: str,
        recipients: Sequence[str],
        subject: str,
        body: str,
        sent_at: datetime,
    ) -> None:
        """Keep one mail (a repeated delivery of one request is kept once)."""
        self._sql.run(
            "local_mail_capture",
            {
                "request_id": request_id,
                "sender": sender,
                "recipients": Jsonb(list(recipients)),
                "subject": subject,
                "body": body,
                "sent_at": sent_at,
            },
        )

    def mail(self, after: int = 0) -> list[CapturedMail]:
        """Mail captured after mailbox position `after`, oldest first."""
        return [
            CapturedMail(
                r["position"],
                r["request_id"],
                r["sender"],
                list(r["recipients"]),
                r["subject"],
                r["body"],
                r["sent_at"],
            )
            for r in self._sql.all("local_mail_list", {"after": after})
        ]

    def log(self, lines: Sequence[LoggedLine]) -> None:
        """Keep lines of the local log (their positions are assigned here)."""
        for line in lines:
            self._sql.run(
                "local_log_append",
                {
                    "tenant_id": line.tenant_id,
                    "run_id": line.run_id,
                    "logged_at": line.logged_at,
                    "message": line.message,
                    "task_key": line.task_key,
                    "detail": line.detail,
                },
            )

    def log_since(self, after: int) -> list[LoggedLine]:
        """Lines of the local log after position `after`, oldest first."""
        return [LoggedLine(**r) for r in self._sql.all("local_log_since", {"after": after})]

    def log_of_run(self, tenant_id: str, run_id: str) -> list[LoggedLine]:
        """A run's lines of the local log, oldest first (none on a database that never
        ran the local runtime)."""
        rows = self._sql.all("local_log_of_run", {"tenant_id": tenant_id, "run_id": run_id})
        return [LoggedLine(**r) for r in rows]

    def activity_mark(self) -> tuple[int, int, int]:
        """(newest stream event, mailbox and local log positions)."""
        row = self._sql.one("local_activity_mark", {})
        assert row is not None
        return int(row["events"]), int(row["mail"]), int(row["log"])

    def events_since(self, after_position: int) -> list[StoredEvent]:
        """Stream events appended after a position, in order."""
        rows = self._sql.all("local_activity_since", {"after": after_position})
        return [StoredEvent.from_row({**r, "metadata": {}}) for r in rows]

    def keep_module(
        self,
        module: str,
        source_sha: str,
        source: str,
        definitions: Sequence[tuple[str, str]],
        now: datetime,
    ) -> None:
        """Keep a module's source and the (workflow, fingerprint) definitions it made
        (once per content)."""
        self._sql.run(
            "local_keep_module",
            {
                "module": module,
                "source_sha": source_sha,
                "source": source,
                "definitions": Jsonb(
                    [{"workflow_name": n, "fingerprint": f} for n, f in definitions]
                ),
                "now": now,
            },
        )

    def kept_modules_with(self, workflow_name: str, fingerprint: str) -> list[KeptModule]:
        """The kept module sources that made this definition, newest first."""
        rows = self._sql.all(
            "local_kept_modules_with", {"workflow_name": workflow_name, "fingerprint": fingerprint}
        )
        return [KeptModule(**r) for r in rows]

    def next_due(self, now: datetime) -> datetime | None:
        """The first instant after `now` at which a row, a queued resume or a dispatch
        retry becomes due."""
        row = self._sql.one("local_next_due", {"now": now})
        return None if row is None else row["next_due"]


def _message(r: dict[str, Any]) -> QueuedMessage:
    return QueuedMessage(
        r["message_id"],
        r["tenant_id"],
        r["run_id"],
        r["step_index"],
        r["wake_at"],
        r["force"],
        r["visible_at"],
        r.get("sent_at"),
    )
