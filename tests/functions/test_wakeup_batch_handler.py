"""EventWakeup with an SQS batch: one engine call for its awaited events, a bad record
failing alone, and one record at a time when the batch call fails."""

from __future__ import annotations

import inspect
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from workflow_runner import Event, ManualClock, define_workflow, on_event, run_id_for
from workflow_runner.aws.inprocess import FakeLambdaContext, build_inprocess_runtime
from workflow_runner.aws.template import Handler
from workflow_runner.definition import WorkflowRegistry
from workflow_runner.errors import TransientStoreError
from workflow_runner.match import eq
from workflow_runner.ports import Runtime, set_runtime
from workflow_runner.settings import Settings
from workflow_runner.store import Store

from tests.support import TENANT_A, eventbridge, trigger

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
PAID = T0 + timedelta(minutes=5)


@pytest.fixture
def paying(
    store: Store, registry: WorkflowRegistry, clock: ManualClock, db_url: str
) -> Iterator[Runtime]:
    """Runs o1 and o2 waiting for their payment; the runtime installed for the handlers."""
    registry.register(
        define_workflow(
            name="pay",
            trigger=on_event("order.placed"),
            idempotency_key=lambda e: e.payload["order"],
            awaits={"paid": "order.paid"},
            register=False,
            steps=lambda s: [
                s.wait_for_event(
                    "order.paid", match=eq("order", Event.payload["order"]), timeout="P1D"
                )
            ],
        )
    )
    for order in ("o1", "o2"):
        trigger(store, registry, "order.placed", {"order": order}, T0)
    clock.set(PAID)
    rt = build_inprocess_runtime(
        store,
        clock,
        settings=Settings(database_url=db_url, mail_sender="noreply@example.com"),
        registry=registry,
    )
    set_runtime(rt)
    try:
        yield rt
    finally:
        set_runtime(None)


def _paid(order: str) -> dict[str, str]:
    body = eventbridge("order.paid", {"tenantId": TENANT_A, "order": order}, f"paid-{order}", PAID)
    return {"messageId": f"m-{order}", "body": json.dumps(body)}


def _spy(handlers: dict[str, Handler], monkeypatch: pytest.MonkeyPatch, fail: bool) -> list[int]:
    """Count the engine calls' batch sizes; the batch calls (more than one event) fail
    transiently when `fail`."""
    app = inspect.unwrap(handlers["EventWakeupFunction"]).__globals__
    real = app["wake_and_enqueue_many"]
    sizes: list[int] = []

    def spy(store: Store, queue: Any, events: Any, *args: Any, **kwargs: Any) -> Any:
        sizes.append(len(events))
        if fail and len(events) > 1:
            raise TransientStoreError("the database failed over")
        return real(store, queue, events, *args, **kwargs)

    monkeypatch.setitem(app, "wake_and_enqueue_many", spy)
    return sizes


@pytest.mark.parametrize("batch_call", ["succeeds", "fails"])
def test_an_sqs_batch_is_woken_in_one_call_and_a_bad_record_fails_alone(
    handlers: dict[str, Handler],
    paying: Runtime,
    monkeypatch: pytest.MonkeyPatch,
    batch_call: str,
) -> None:
    sizes = _spy(handlers, monkeypatch, fail=batch_call == "fails")
    records = [_paid("o1"), {"messageId": "m-bad", "body": "{not json"}, _paid("o2")]

    answer = handlers["EventWakeupFunction"]({"Records": records}, FakeLambdaContext())

    assert answer == {"batchItemFailures": [{"itemIdentifier": "m-bad"}]}
    # One call for both good records; when it fails (and its retry on a fresh
    # connection, lambda_support.with_store), one call per record.
    assert sizes == ([2] if batch_call == "succeeds" else [2, 2, 1, 1])
    sent = paying.resume_queue.sent  # type: ignore[attr-defined]
    assert sorted(r.run_id for r in sent) == sorted(run_id_for("pay", o) for o in ("o1", "o2"))
