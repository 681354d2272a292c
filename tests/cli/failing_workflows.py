"""Workflows that fail the way a new user's do, for the local loop's tests (named in
WORKFLOW_MODULES): a task whose result is not JSON, a step whose exception carries
personal data. Not registered at import: test_cli_local_errors.py puts them in the
default registry while its tests run, so that other tests of the process (the doctor's
template check) see the registry without them."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from workflow_runner import Event, define_workflow, on_event

SECRET = "the partner said no to ada@example.com"


def paid(ctx: Any) -> dict[str, Any]:
    return {"status": "paid", "paidAt": datetime(2030, 1, 1, tzinfo=UTC)}


def refuse(ctx: Any) -> None:
    raise ValueError(SECRET)


charge = define_workflow(
    name="charge",
    trigger=on_event("charge.requested"),
    idempotency_key=Event.payload["orderId"],
    register=False,
    steps=lambda s: [s.task("charge", paid), s.return_({"isSuccess": True})],
)

refusal = define_workflow(
    name="refusal",
    trigger=on_event("refusal.requested"),
    idempotency_key=Event.payload["orderId"],
    register=False,
    steps=lambda s: [s.compute("answer", refuse), s.return_({"isSuccess": True})],
)
