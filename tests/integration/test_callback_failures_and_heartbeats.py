"""A wait_for_callback's token on real PostgreSQL: an answer without a payload is a
success, a failure fails the run (or is caught) without its message being stored, and
heartbeats keep a wait open that times out, saying so, when they stop."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from workflow_runner import ManualClock, on_event
from workflow_runner import engine as ops
from workflow_runner import stream as ev
from workflow_runner.callback_tokens import callback_links
from workflow_runner.definition import WorkflowRegistry
from workflow_runner.engine.callbacks import (
    CallbackAlreadyCompleted,
    CallbackExpired,
    NoHeartbeat,
    complete_callback,
    fail_callback,
    heartbeat_callback,
    run_callbacks,
)
from workflow_runner.errors import InvalidInput
from workflow_runner.store import Store

from tests.integration.callback_support import (
    callback_events,
    count_rows,
    mail_tokens,
    resume_open,
    start_run,
)
from tests.support import TENANT_A, TENANT_B, register, stream, stream_types

MESSAGE = "card of jane@example.com declined at 10.1.2.3"


@pytest.fixture(autouse=True)
def links() -> Iterator[None]:
    with callback_links("https://callbacks.example.com/"):
        yield


def _flow(registry: WorkflowRegistry, name: str, **wait: Any) -> None:
    register(
        registry,
        name=name,
        trigger=on_event(f"{name}.go"),
        idempotency_key=lambda e: e.payload["id"],
        steps=lambda s: [
            s.mail_send(to="ops@example.com", subject="Pay?", body=lambda ctx: ctx.callback.url),
            s.wait_for_callback("answer", **wait),
            s.return_(lambda ctx: {"answer": ctx.steps["answer"]}),
        ],
    )


@pytest.fixture
def flows(registry: WorkflowRegistry) -> WorkflowRegistry:
    _flow(registry, "plain", timeout="P2D")
    _flow(registry, "caught", timeout="P2D", catch=True)
    _flow(registry, "beating", timeout="P1D", heartbeat="PT5M")
    _flow(registry, "short", timeout="PT20M", heartbeat="PT5M")
    return registry


def _waiting(
    store: Store, flows: WorkflowRegistry, clock: ManualClock, name: str
) -> tuple[str, str]:
    run_id = start_run(store, flows, clock.now(), type=f"{name}.go")
    (token,) = mail_tokens(store, run_id)
    return run_id, token


def _resumed_by(store: Store, run_id: str) -> str:
    (resumed,) = [e.fact for e in stream(store, run_id) if e.type == ev.STEP_RESUMED]
    return str(resumed.resumed_by)


# --- answers without a payload ----------------------------------------------------------


@pytest.mark.parametrize("payload", [None, {}])
def test_a_completion_without_a_payload_is_a_success_not_a_timeout(
    store: Store, flows: WorkflowRegistry, clock: ManualClock, payload: Any
) -> None:
    run_id, token = _waiting(store, flows, clock, "plain")

    completion = complete_callback(store, token, payload, clock.now())
    assert resume_open(store, flows, run_id, clock.now()).outcome == "completed"

    stored = store.inbox.get(TENANT_A, completion.event_id)
    assert stored is not None and stored.detail == payload and stored.erased_at is None
    assert stream(store, run_id)[-1].fact.result == {"answer": payload}
    assert _resumed_by(store, run_id) == "callback"
    assert [c.status for c in run_callbacks(store, TENANT_A, run_id, clock.now())] == ["completed"]


# --- failures ------------------------------------------------------------------------------


def test_a_failure_fails_the_run_and_its_message_is_only_logged_redacted(
    store: Store, flows: WorkflowRegistry, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    run_id, token = _waiting(store, flows, clock, "plain")

    with caplog.at_level(logging.INFO, logger="workflow_runner"):
        failed = fail_callback(store, token, "PaymentDeclined", MESSAGE, clock.now(), "tests")
    result = resume_open(store, flows, run_id, clock.now())

    assert (result.outcome, result.reason) == ("failed", "callback_failed")
    events = stream(store, run_id)
    answer = next(e.fact for e in events if e.type == ev.CALLBACK_FAILED)
    assert (answer.error, answer.event_id, answer.run_due) == (
        "PaymentDeclined",
        failed.event_id,
        True,
    )
    assert answer.message.startswith("PaymentDeclined (text hash ")
    assert events[-1].payload["error"] == "workflow step failed (PaymentDeclined)"
    assert _resumed_by(store, run_id) == "callback"
    for table in ("wf_events", "inbox", "callbacks", "run_results", "workflow_run_pending"):
        assert (
            count_rows(
                store, f"SELECT count(*) AS n FROM {table} t WHERE t::text LIKE %s", "%jane@%"
            )
            == 0
        ), table
    logged = [r for r in caplog.records if r.getMessage() == "callback failed"]
    assert [r.detail for r in logged] == [answer.message]  # type: ignore[attr-defined]
    (row,) = run_callbacks(store, TENANT_A, run_id, clock.now())
    assert (row.status, row.row.failed_error) == ("failed", "PaymentDeclined")


def test_a_caught_failure_lands_under_the_result_key(
    store: Store, flows: WorkflowRegistry, clock: ManualClock
) -> None:
    run_id, token = _waiting(store, flows, clock, "caught")
    fail_callback(store, token, "card.declined", None, clock.now())
    assert resume_open(store, flows, run_id, clock.now()).outcome == "completed"
    assert stream(store, run_id)[-1].fact.result == {
        "answer": {"failed": True, "error": "card.declined"}
    }


def test_a_token_answers_once_whether_it_completes_or_fails(
    store: Store, flows: WorkflowRegistry, clock: ManualClock
) -> None:
    run_id, token = _waiting(store, flows, clock, "plain")
    fail_callback(store, token, "Declined", "no", clock.now())
    for answer in (
        lambda: complete_callback(store, token, {"ok": True}, clock.now()),
        lambda: fail_callback(store, token, "Declined", "again", clock.now()),
    ):
        with pytest.raises(CallbackAlreadyCompleted):
            answer()
    assert stream_types(store, run_id).count(ev.CALLBACK_FAILED) == 1
    assert ev.CALLBACK_COMPLETED not in stream_types(store, run_id)
    assert callback_events(store) == 1


@pytest.mark.parametrize(
    ("error", "message", "why"),
    [
        ("", None, "is not an error name"),
        ("has space", None, "is not an error name"),
        ("jane@example.com", None, "is not an error name"),
        ("9Lives", None, "is not an error name"),
        ("E" * 65, None, "is not an error name"),
        (7, None, "is not an error name"),
        ("Declined", "x" * 2001, "2001 characters, over the 2000-character limit"),
        ("Declined", "bell\x07", "control characters"),
        ("Declined", {"why": "no"}, "message is a dict, not text"),
    ],
)
def test_a_failure_with_a_bad_name_or_message_is_refused_and_writes_nothing(
    store: Store, flows: WorkflowRegistry, clock: ManualClock, error: Any, message: Any, why: str
) -> None:
    run_id, token = _waiting(store, flows, clock, "plain")
    before = stream_types(store, run_id)
    with pytest.raises(InvalidInput, match=why):
        fail_callback(store, token, error, message, clock.now())
    assert stream_types(store, run_id) == before and callback_events(store) == 0
    fail_callback(store, token, "E" * 64, "line one\nline\ttwo", clock.now())


def test_a_failure_before_the_projection_caught_up_still_wakes_the_run(
    store: Store, flows: WorkflowRegistry, clock: ManualClock
) -> None:
    run_id = start_run(store, flows, clock.now(), type="plain.go", project=False)
    (token,) = mail_tokens(store, run_id)
    failed = fail_callback(store, token, "Declined", None, clock.now())
    ops.project_pending(store, clock.now())
    (row,) = store.pending.for_tenant(TENANT_A)
    assert (row.awaited_event_id, row.wake_at) == (failed.event_id, clock.now())


# --- heartbeats ------------------------------------------------------------------------------


def test_heartbeats_keep_the_wait_open_and_move_its_pending_row(
    store: Store, flows: WorkflowRegistry, clock: ManualClock
) -> None:
    run_id, token = _waiting(store, flows, clock, "beating")
    start = clock.now()
    (row,) = store.pending.for_tenant(TENANT_A)
    assert row.wake_at == start + timedelta(minutes=5)

    for _ in range(3):
        clock.advance(timedelta(minutes=4))
        beat = heartbeat_callback(store, token, clock.now())
        assert beat.deadline == clock.now() + timedelta(minutes=5)
        (row,) = store.pending.for_tenant(TENANT_A)
        assert row.wake_at == beat.deadline
        ops.project_pending(store, clock.now())  # the projection agrees
        assert store.pending.for_tenant(TENANT_A)[0].wake_at == beat.deadline

    state = ops.load_run(store, TENANT_A, run_id)
    assert state.wake_at == clock.now() + timedelta(minutes=5)
    early = ops.resume_run(store, TENANT_A, run_id, 1, start + timedelta(minutes=6), registry=flows)
    assert (early.outcome, early.wake_at) == ("not-due", state.wake_at)
    assert stream_types(store, run_id).count(ev.CALLBACK_HEARTBEAT) == 3

    complete_callback(store, token, {"paid": True}, clock.now())
    assert resume_open(store, flows, run_id, clock.now()).outcome == "completed"
    assert stream(store, run_id)[-1].fact.result == {"answer": {"paid": True}}


def test_a_wait_whose_heartbeats_stop_times_out_saying_which_timer_ran_out(
    store: Store, flows: WorkflowRegistry, clock: ManualClock
) -> None:
    run_id, token = _waiting(store, flows, clock, "beating")
    clock.advance(timedelta(minutes=4))
    heartbeat_callback(store, token, clock.now())
    clock.advance(timedelta(minutes=5))

    with pytest.raises(CallbackExpired, match="no heartbeat came within its interval"):
        heartbeat_callback(store, token, clock.now())
    with pytest.raises(CallbackExpired):
        complete_callback(store, token, {"late": True}, clock.now())
    (state,) = run_callbacks(store, TENANT_A, run_id, clock.now())
    assert (state.status, state.deadline) == ("expired", clock.now())
    assert resume_open(store, flows, run_id, clock.now()).outcome == "completed"

    assert _resumed_by(store, run_id) == "heartbeat_timeout"
    assert stream(store, run_id)[-1].fact.result == {"answer": None}


def test_the_wait_s_own_timeout_ends_it_however_many_heartbeats_come(
    store: Store, flows: WorkflowRegistry, clock: ManualClock
) -> None:
    run_id, token = _waiting(store, flows, clock, "short")
    timeout = clock.now() + timedelta(minutes=20)
    for _ in range(4):
        clock.advance(timedelta(minutes=4))
        beat = heartbeat_callback(store, token, clock.now())
    clock.advance(timedelta(minutes=2))
    beat = heartbeat_callback(store, token, clock.now())
    assert beat.deadline == timeout  # never past the timeout
    clock.advance(timedelta(minutes=2))
    assert resume_open(store, flows, run_id, clock.now()).outcome == "completed"
    assert _resumed_by(store, run_id) == "timeout"


def test_a_heartbeat_to_a_wait_without_an_interval_is_refused(
    store: Store, flows: WorkflowRegistry, clock: ManualClock
) -> None:
    run_id, token = _waiting(store, flows, clock, "plain")
    with pytest.raises(NoHeartbeat):
        heartbeat_callback(store, token, clock.now())
    assert ev.CALLBACK_HEARTBEAT not in stream_types(store, run_id)


def test_a_heartbeat_is_no_answer_and_none_comes_after_the_answer(
    store: Store, flows: WorkflowRegistry, clock: ManualClock
) -> None:
    run_id, token = _waiting(store, flows, clock, "beating")
    heartbeat_callback(store, token, clock.now())
    assert [c.status for c in run_callbacks(store, TENANT_A, run_id, clock.now())] == ["waiting"]
    complete_callback(store, token, {"done": 1}, clock.now())
    with pytest.raises(CallbackAlreadyCompleted):
        heartbeat_callback(store, token, clock.now())


def test_a_heartbeat_before_the_projection_caught_up_still_moves_the_row(
    store: Store, flows: WorkflowRegistry, clock: ManualClock
) -> None:
    run_id = start_run(store, flows, clock.now(), type="beating.go", project=False)
    (token,) = mail_tokens(store, run_id)
    clock.advance(timedelta(minutes=3))
    beat = heartbeat_callback(store, token, clock.now())
    ops.project_pending(store, clock.now())
    (row,) = store.pending.for_tenant(TENANT_A)
    assert row.wake_at == beat.deadline


def test_answers_and_heartbeats_reach_only_their_own_tenants_run(
    store: Store, flows: WorkflowRegistry, clock: ManualClock
) -> None:
    """Both tenants' runs share a run id (run ids derive from workflow and key only)."""
    run_a = start_run(store, flows, clock.now(), type="beating.go", tenant=TENANT_A)
    run_b = start_run(store, flows, clock.now(), type="beating.go", tenant=TENANT_B)
    assert run_a == run_b
    (token_a,) = mail_tokens(store, run_a, TENANT_A)
    (row_b,) = store.pending.for_tenant(TENANT_B)

    clock.advance(timedelta(minutes=3))
    heartbeat_callback(store, token_a, clock.now())
    fail_callback(store, token_a, "Declined", None, clock.now())

    assert stream_types(store, run_b, TENANT_B) == [ev.RUN_STARTED, ev.STEP_WAITING_FOR_CALLBACK]
    assert store.pending.for_tenant(TENANT_B) == [row_b]
    assert stream_types(store, run_a, TENANT_A)[-2:] == [ev.CALLBACK_HEARTBEAT, ev.CALLBACK_FAILED]
