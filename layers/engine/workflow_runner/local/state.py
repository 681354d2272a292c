"""The local runtime's stand-ins for the resume queue and SES, kept in the database.

Their state (tables of migration 0002_local_runtime, reached through `store.local`)
lives with the data, so that separate `wfr local ...` invocations continue where the
last one stopped; drop the database, and the clock and queue go with it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from ..engine.enqueue import MAX_DELAY_SECONDS
from ..ports import ResumeRequest
from ..store import QueuedMessage, Store


class LocalResumeQueue:
    """The SQS resume queue's local stand-in: delays count in local business time."""

    def __init__(self, store: Store, now: Callable[[], datetime]) -> None:
        self._store = store
        self._now = now

    def send(self, requests: Sequence[ResumeRequest]) -> list[ResumeRequest]:
        """Enqueue requests (each visible `delay_seconds` from now, at most 900 s as in
        SQS); none ever fails."""
        now = self._now()
        for request in requests:
            self._store.local.enqueue(
                request.tenant_id,
                request.run_id,
                request.step_index,
                request.wake_at,
                request.force,
                now + timedelta(seconds=max(0, min(MAX_DELAY_SECONDS, request.delay_seconds))),
                now,
            )
        return []

    def receive(self, now: datetime, limit: int = 10) -> list[QueuedMessage]:
        """Take up to `limit` messages visible at `now` off the queue."""
        return self._store.local.receive(now, limit)

    def pending(self) -> list[QueuedMessage]:
        """Every queued message, soonest first."""
        return self._store.local.queued()


def as_request(message: QueuedMessage) -> ResumeRequest:
    """A queued message as the resume request it carries."""
    return ResumeRequest(
        message.tenant_id,
        message.run_id,
        message.step_index,
        wake_at=message.wake_at,
        force=message.force,
    )


class CapturedMailer:
    """A Mailer that keeps mail in the local mailbox instead of sending it."""

    def __init__(self, store: Store, now: Callable[[], datetime]) -> None:
        self._store = store
        self._now = now

    def send_mail(
        self, request_id: str, sender: str, to: Sequence[str], subject: str, body: str
    ) -> str:
        self._store.local.capture_mail(request_id, sender, to, subject, body, self._now())
        return f"local-{request_id}"
