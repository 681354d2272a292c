"""The local runtime's persistent state: its business clock, resume queue and mailbox.

Kept in the database (tables of migration 0002_local_runtime), so that separate
`wfr local ...` invocations continue where the last one stopped and the state goes
wherever the data goes (drop the database, and the clock and queue go with it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from psycopg.types.json import Jsonb

from ..ports import ResumeRequest
from ..store import Store


def local_clock(store: Store) -> datetime | None:
    """The local runtime's business time, or None when this database has none."""
    present = store.fetch_one("local_clock_exists", {})
    if not present or not present["present"]:
        return None
    row = store.fetch_one("local_clock_get", {})
    return row["now"] if row else None


def set_local_clock(store: Store, now: datetime) -> None:
    """Move the local runtime's business time (forwards or backwards: it is a dev tool)."""
    store.execute("local_clock_set", {"now": now})


@dataclass(frozen=True)
class QueuedResume:
    """A resume request as the local queue holds it."""

    message_id: int
    request: ResumeRequest
    visible_at: datetime


class LocalResumeQueue:
    """The SQS resume queue's local stand-in: delays count in local business time."""

    def __init__(self, store: Store, now: Any) -> None:
        self._store = store
        self._now = now  # a callable returning the business time

    def send(self, requests: Sequence[ResumeRequest]) -> list[ResumeRequest]:
        """Enqueue requests (each visible `delay_seconds` from now); none ever fails."""
        now: datetime = self._now()
        for request in requests:
            self._store.execute(
                "local_queue_send",
                {
                    "tenant_id": request.tenant_id,
                    "run_id": request.run_id,
                    "step_index": request.step_index,
                    "wake_at": request.wake_at,
                    "force": request.force,
                    "visible_at": now + timedelta(seconds=max(0, request.delay_seconds)),
                    "sent_at": now,
                },
            )
        return []

    def receive(self, now: datetime, limit: int = 10) -> list[QueuedResume]:
        """Take up to `limit` messages visible at `now` off the queue."""
        rows = self._store.fetch_all("local_queue_receive", {"now": now, "limit": limit})
        return [
            QueuedResume(
                r["message_id"],
                ResumeRequest(
                    r["tenant_id"],
                    r["run_id"],
                    r["step_index"],
                    wake_at=r["wake_at"],
                    force=r["force"],
                ),
                r["visible_at"],
            )
            for r in rows
        ]

    def pending(self) -> list[dict[str, Any]]:
        """Every queued message, soonest first."""
        return self._store.fetch_all("local_queue_list", {})


class CapturedMailer:
    """A Mailer that keeps mail in the local mailbox instead of sending it."""

    def __init__(self, store: Store, now: Any) -> None:
        self._store = store
        self._now = now

    def send_mail(
        self, request_id: str, sender: str, to: Sequence[str], subject: str, body: str
    ) -> str:
        self._store.execute(
            "local_mail_capture",
            {
                "request_id": request_id,
                "sender": sender,
                "recipients": Jsonb(list(to)),
                "subject": subject,
                "body": body,
                "sent_at": self._now(),
            },
        )
        return f"local-{request_id}"


def captured_mail(store: Store, after: int = 0) -> list[dict[str, Any]]:
    """Mail captured after mailbox position `after`, oldest first."""
    return store.fetch_all("local_mail_list", {"after": after})
