"""wait_for_callback on real PostgreSQL: a token completes its own wait once, never
another tenant's or another step's, and a completion is never lost, also when it races
another completion or the timeout's resume."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from workflow_runner import ManualClock, on_event
from workflow_runner import engine as ops
from workflow_runner import stream as ev
from workflow_runner.aws.inprocess import InMemoryResumeQueue
from workflow_runner.callback_tokens import callback_links, token_hash
from workflow_runner.definition import WorkflowRegistry
from workflow_runner.engine.callbacks import (
    CallbackAlreadyCompleted,
    CallbackCompletion,
    CallbackExpired,
    CallbackNotWaiting,
    UnknownCallback,
    complete_callback,
    enqueue_resume,
    run_callbacks,
)
from workflow_runner.engine.erase import erase_event
from workflow_runner.engine.redrive import redrive_run
from workflow_runner.errors import InvalidInput
from workflow_runner.store import Store, connect

from tests.integration.callback_support import (
    BUDGET_DOWN,
    budget_check,
    callback_events,
    count_rows,
    mail_tokens,
    resume_open,
    start_run,
)
from tests.support import TENANT_A, TENANT_B, register, stream, stream_types

BASE = "https://callbacks.example.com/"
APPROVAL = "approval"


def _approval(s: Any) -> list[Any]:
    return [
        s.mail_send(
            to="boss@example.com", subject="Approve?", body=lambda ctx: f"Yes: {ctx.callback.url}"
        ),
        s.wait_for_callback("decision", timeout="P2D"),
        s.return_(lambda ctx: ctx.steps["decision"]),
    ]


@pytest.fixture(autouse=True)
def links() -> Iterator[None]:
    """Passes in these tests make links to the callback endpoint, as deployed."""
    with callback_links(BASE):
        yield


@pytest.fixture
def flows(registry: WorkflowRegistry) -> WorkflowRegistry:
    register(
        registry,
        name=APPROVAL,
        trigger=on_event("expense.filed"),
        idempotency_key=lambda e: e.payload["id"],
        steps=_approval,
    )
    return registry


def test_a_completed_callback_resumes_the_run_at_once_with_its_payload(
    store: Store, flows: WorkflowRegistry, clock: ManualClock
) -> None:
    run_id = start_run(store, flows, clock.now())
    (token,) = mail_tokens(store, run_id)
    queue = InMemoryResumeQueue(clock)
    clock.advance(timedelta(hours=1))

    completion = complete_callback(store, token, {"approved": True}, clock.now(), "tests")
    assert enqueue_resume(store, queue, completion, clock.now())

    (request,) = queue.receive()
    assert (request.tenant_id, request.run_id, request.step_index) == (TENANT_A, run_id, 1)
    result = ops.resume_run(store, TENANT_A, run_id, 1, clock.now(), registry=flows)
    assert result.outcome == "completed"
    state = ops.load_run(store, TENANT_A, run_id)
    assert state.status == "completed"
    assert stream_types(store, run_id) == [
        ev.RUN_STARTED,
        ev.STEP_WAITING_FOR_CALLBACK,
        ev.CALLBACK_COMPLETED,
        ev.STEP_RESUMED,
        ev.RUN_COMPLETED,
    ]
    events = stream(store, run_id)
    assert events[-1].fact.result == {"approved": True}
    assert events[3].fact.resumed_by == "callback"
    assert events[3].fact.awaited_event_id == completion.event_id
    stored = store.inbox.get(TENANT_A, completion.event_id)
    assert stored is not None
    assert (stored.type, stored.source, stored.detail) == (
        "workflow.callback",
        "tests",
        {"approved": True},
    )
    (row,) = store.callbacks.of_run(TENANT_A, run_id)
    assert row.token_hash == token_hash(token) and row.completed_at == clock.now()
    assert row.completion_event_id == completion.event_id


def test_only_the_hash_of_a_token_is_stored(
    store: Store, flows: WorkflowRegistry, clock: ManualClock
) -> None:
    run_id = start_run(store, flows, clock.now())
    (token,) = mail_tokens(store, run_id)
    for table in ("wf_events", "callbacks", "workflow_run_pending", "run_results"):
        assert (
            count_rows(
                store, f"SELECT count(*) AS n FROM {table} t WHERE t::text LIKE %s", f"%{token}%"
            )
            == 0
        )
    assert (
        count_rows(
            store, "SELECT count(*) AS n FROM callbacks WHERE token_hash = %s", token_hash(token)
        )
        == 1
    )


def test_unknown_and_malformed_tokens_are_refused_and_write_nothing(
    store: Store, flows: WorkflowRegistry, clock: ManualClock
) -> None:
    run_id = start_run(store, flows, clock.now())
    (token,) = mail_tokens(store, run_id)
    forged = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
    for wrong in (forged, "wfrcb_short", "", token + "x", f"{token} "):
        with pytest.raises(UnknownCallback):
            complete_callback(store, wrong, {"ok": True}, clock.now())
    assert stream_types(store, run_id) == [ev.RUN_STARTED, ev.STEP_WAITING_FOR_CALLBACK]
    assert callback_events(store) == 0


def test_a_token_reaches_only_the_run_of_its_own_tenant(
    store: Store, flows: WorkflowRegistry, clock: ManualClock
) -> None:
    """Run ids derive from the workflow and the key only: both tenants' runs share one."""
    run_a = start_run(store, flows, clock.now(), tenant=TENANT_A)
    run_b = start_run(store, flows, clock.now(), tenant=TENANT_B)
    assert run_a == run_b
    (token_a,) = mail_tokens(store, run_a, TENANT_A)
    (token_b,) = mail_tokens(store, run_b, TENANT_B)
    assert token_a != token_b

    completion = complete_callback(store, token_a, {"tenant": "a"}, clock.now())

    assert completion.tenant_id == TENANT_A
    assert ev.CALLBACK_COMPLETED in stream_types(store, run_a, TENANT_A)
    assert stream_types(store, run_b, TENANT_B) == [ev.RUN_STARTED, ev.STEP_WAITING_FOR_CALLBACK]
    assert store.inbox.get(TENANT_B, completion.event_id) is None
    ops.resume_run(store, TENANT_A, run_a, 1, clock.now(), registry=flows)
    with pytest.raises(CallbackAlreadyCompleted):
        complete_callback(store, token_a, {"tenant": "a"}, clock.now())
    assert ops.load_run(store, TENANT_B, run_b).status == "waiting"
    complete_callback(store, token_b, {"tenant": "b"}, clock.now())
    ops.resume_run(store, TENANT_B, run_b, 1, clock.now(), registry=flows)
    assert stream(store, run_a, TENANT_A)[-1].fact.result == {"tenant": "a"}
    assert stream(store, run_b, TENANT_B)[-1].fact.result == {"tenant": "b"}


def _two_waits(s: Any) -> list[Any]:
    return [
        s.mail_send(to="a@example.com", subject="first", body=lambda ctx: ctx.callback.url),
        s.wait_for_callback("first", timeout="P1D"),
        s.mail_send(to="a@example.com", subject="second", body=lambda ctx: ctx.callback.url),
        s.wait_for_callback("second", timeout="P1D"),
        s.return_(lambda ctx: [ctx.steps["first"], ctx.steps["second"]]),
    ]


@pytest.fixture
def two_waits(registry: WorkflowRegistry) -> WorkflowRegistry:
    register(
        registry,
        name="two-waits",
        trigger=on_event("two.go"),
        idempotency_key=lambda e: e.payload["id"],
        steps=_two_waits,
    )
    return registry


def test_the_token_of_a_completed_wait_cannot_complete_the_next_one(
    store: Store, two_waits: WorkflowRegistry, clock: ManualClock
) -> None:
    run_id = start_run(store, two_waits, clock.now(), type="two.go")
    (first,) = mail_tokens(store, run_id)
    complete_callback(store, first, "one", clock.now())
    resume_open(store, two_waits, run_id, clock.now())
    assert ops.load_run(store, TENANT_A, run_id).suspension.step_index == 3  # type: ignore[union-attr]
    before = stream_types(store, run_id)

    with pytest.raises(CallbackAlreadyCompleted):
        complete_callback(store, first, "two?", clock.now())

    assert stream_types(store, run_id) == before
    _, second = mail_tokens(store, run_id)
    complete_callback(store, second, "two", clock.now())
    resume_open(store, two_waits, run_id, clock.now())
    assert stream(store, run_id)[-1].fact.result == ["one", "two"]


def test_the_token_of_a_wait_an_operator_resumed_cannot_complete_the_next_one(
    store: Store, two_waits: WorkflowRegistry, clock: ManualClock
) -> None:
    run_id = start_run(store, two_waits, clock.now(), type="two.go")
    (first,) = mail_tokens(store, run_id)
    forced = ops.resume_run(store, TENANT_A, run_id, 1, clock.now(), force=True, registry=two_waits)
    assert (forced.outcome, forced.suspended_at) == ("suspended", 3)

    with pytest.raises(CallbackNotWaiting):
        complete_callback(store, first, "late", clock.now())

    state = ops.load_run(store, TENANT_A, run_id)
    assert (state.suspension.step_index, state.matched_event_id) == (3, None)  # type: ignore[union-attr]
    assert callback_events(store) == 0
    statuses = [c.status for c in run_callbacks(store, TENANT_A, run_id, clock.now())]
    assert statuses == ["waiting", "closed"]


def test_a_second_completion_is_refused_and_the_first_payload_kept(
    store: Store, flows: WorkflowRegistry, clock: ManualClock
) -> None:
    run_id = start_run(store, flows, clock.now())
    (token,) = mail_tokens(store, run_id)
    first = complete_callback(store, token, {"n": 1}, clock.now())
    with pytest.raises(CallbackAlreadyCompleted):
        complete_callback(store, token, {"n": 2}, clock.now())
    assert stream_types(store, run_id).count(ev.CALLBACK_COMPLETED) == 1
    stored = store.inbox.get(TENANT_A, first.event_id)
    assert stored is not None and stored.detail == {"n": 1}


def _in_parallel(db_url: str, n: int, work: Callable[[Store, int], Any]) -> list[Any]:
    """Run `work` on n threads, each with its own connection, released together."""
    barrier = threading.Barrier(n)
    results: list[Any] = [None] * n

    def run(i: int) -> None:
        own = connect(db_url)
        try:
            barrier.wait()
            results[i] = work(own, i)
        except BaseException as error:
            results[i] = error
        finally:
            own.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def test_ten_racing_completions_of_one_token_record_exactly_one(
    store: Store, db_url: str, flows: WorkflowRegistry, clock: ManualClock
) -> None:
    run_id = start_run(store, flows, clock.now())
    (token,) = mail_tokens(store, run_id)

    results = _in_parallel(
        db_url, 10, lambda s, i: complete_callback(s, token, {"racer": i}, clock.now())
    )

    won = [r for r in results if isinstance(r, CallbackCompletion)]
    lost = [r for r in results if isinstance(r, CallbackAlreadyCompleted)]
    assert (len(won), len(lost)) == (1, 9), results
    assert stream_types(store, run_id).count(ev.CALLBACK_COMPLETED) == 1
    assert callback_events(store) == 1
    resume_open(store, flows, run_id, clock.now())
    assert stream(store, run_id)[-1].fact.result == {"racer": results.index(won[0])}


def test_a_completion_from_the_timeout_on_is_refused_and_the_run_goes_on_without_it(
    store: Store, flows: WorkflowRegistry, clock: ManualClock
) -> None:
    run_id = start_run(store, flows, clock.now())
    (token,) = mail_tokens(store, run_id)
    clock.advance(timedelta(days=2))

    with pytest.raises(CallbackExpired):
        complete_callback(store, token, {"late": True}, clock.now())
    assert [c.status for c in run_callbacks(store, TENANT_A, run_id, clock.now())] == ["expired"]

    result = resume_open(store, flows, run_id, clock.now())
    assert result.outcome == "completed"
    events = stream(store, run_id)
    assert events[-2].fact.resumed_by == "timeout"
    assert events[-1].fact.result is None
    assert callback_events(store) == 0


def test_before_its_timeout_an_uncompleted_callback_is_not_due(
    store: Store, flows: WorkflowRegistry, clock: ManualClock
) -> None:
    run_id = start_run(store, flows, clock.now())
    result = ops.resume_run(store, TENANT_A, run_id, 1, clock.now(), registry=flows)
    assert (result.outcome, result.wake_at) == ("not-due", clock.now() + timedelta(days=2))
    (row,) = store.pending.for_tenant(TENANT_A)
    assert (row.suspension_event_type, row.wake_at) == (
        ev.STEP_WAITING_FOR_CALLBACK,
        clock.now() + timedelta(days=2),
    )


@pytest.fixture
def second(db_url: str) -> Iterator[Store]:
    own = connect(db_url)
    try:
        yield own
    finally:
        own.close()


def _wait_until_blocked(observer: Store, pid: int) -> None:
    """Until the backend `pid` waits for a lock another transaction holds."""
    for _ in range(3000):
        row = observer.conn.execute(
            "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (pid,)
        ).fetchone()
        if row is not None and row["wait_event_type"] == "Lock":
            return
        time.sleep(0.01)
    raise AssertionError(f"backend {pid} never waited for a lock")


def _in_background(work: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    box: list[Any] = []

    def run() -> None:
        try:
            box.append(work())
        except BaseException as error:
            box.append(error)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, box


def test_a_completion_that_commits_first_beats_the_timeout_resume_racing_it(
    store: Store,
    second: Store,
    db_url: str,
    flows: WorkflowRegistry,
    clock: ManualClock,
) -> None:
    run_id = start_run(store, flows, clock.now())
    (token,) = mail_tokens(store, run_id)
    timeout = clock.now() + timedelta(days=2)
    observer = connect(db_url)
    try:
        with store.transaction():
            completion = complete_callback(
                store, token, {"just": "in time"}, timeout - timedelta(seconds=1)
            )
            thread, box = _in_background(
                lambda: ops.resume_run(second, TENANT_A, run_id, 1, timeout, registry=flows)
            )
            _wait_until_blocked(observer, second.conn.info.backend_pid)
        thread.join()
    finally:
        observer.close()

    assert box[0].outcome == "already-resumed"
    ops.project_pending(store, timeout)
    (row,) = store.pending.for_tenant(TENANT_A)
    assert row.awaited_event_id == completion.event_id
    result = ops.resume_run(store, TENANT_A, run_id, 1, timeout, registry=flows)
    assert result.outcome == "completed"
    events = stream(store, run_id)
    assert [e.type for e in events].count(ev.STEP_RESUMED) == 1
    assert events[-2].fact.resumed_by == "callback"
    assert events[-1].fact.result == {"just": "in time"}


def test_a_timeout_resume_that_commits_first_beats_the_completion_racing_it(
    store: Store,
    second: Store,
    db_url: str,
    flows: WorkflowRegistry,
    clock: ManualClock,
) -> None:
    run_id = start_run(store, flows, clock.now())
    (token,) = mail_tokens(store, run_id)
    timeout = clock.now() + timedelta(days=2)
    observer = connect(db_url)
    try:
        with store.transaction():
            resumed = ops.resume_run(store, TENANT_A, run_id, 1, timeout, registry=flows)
            thread, box = _in_background(
                lambda: complete_callback(
                    second, token, {"just": "too late"}, timeout - timedelta(seconds=1)
                )
            )
            _wait_until_blocked(observer, second.conn.info.backend_pid)
        thread.join()
    finally:
        observer.close()

    assert resumed.outcome == "completed"
    assert isinstance(box[0], CallbackNotWaiting)
    events = stream(store, run_id)
    assert ev.CALLBACK_COMPLETED not in [e.type for e in events]
    assert events[-2].fact.resumed_by == "timeout" and events[-1].fact.result is None
    (row,) = store.callbacks.of_run(TENANT_A, run_id)
    assert row.completed_at is None
    assert callback_events(store) == 0


def test_a_completion_before_the_projection_caught_up_still_wakes_the_run(
    store: Store, flows: WorkflowRegistry, clock: ManualClock
) -> None:
    run_id = start_run(store, flows, clock.now(), project=False)
    assert store.pending.for_tenant(TENANT_A) == []
    (token,) = mail_tokens(store, run_id)
    queue = InMemoryResumeQueue(clock)

    completion = complete_callback(store, token, {"early": True}, clock.now())
    assert enqueue_resume(store, queue, completion, clock.now())
    ops.project_pending(store, clock.now())

    (row,) = store.pending.for_tenant(TENANT_A)
    assert (row.awaited_event_id, row.wake_at) == (completion.event_id, clock.now())
    assert [(r.run_id, r.step_index) for r in queue.receive()] == [(run_id, 1)]
    assert resume_open(store, flows, run_id, clock.now()).outcome == "completed"


def test_a_cancelled_run_takes_no_completion(
    store: Store, flows: WorkflowRegistry, clock: ManualClock
) -> None:
    run_id = start_run(store, flows, clock.now())
    (token,) = mail_tokens(store, run_id)
    ops.cancel_run(store, TENANT_A, run_id, clock.now())
    with pytest.raises(CallbackNotWaiting):
        complete_callback(store, token, {"ok": True}, clock.now())
    assert callback_events(store) == 0


@pytest.mark.parametrize(
    ("payload", "why"),
    [
        (float("nan"), "not JSON"),
        ({"blob": "x" * (256 * 1024)}, "over the 262144-byte limit"),
        ("\x00", "NUL"),
    ],
)
def test_a_payload_that_is_not_storable_json_is_refused_and_nothing_written(
    store: Store, flows: WorkflowRegistry, clock: ManualClock, payload: Any, why: str
) -> None:
    run_id = start_run(store, flows, clock.now())
    (token,) = mail_tokens(store, run_id)
    with pytest.raises(InvalidInput, match=why):
        complete_callback(store, token, payload, clock.now())
    assert callback_events(store) == 0
    assert [c.status for c in run_callbacks(store, TENANT_A, run_id, clock.now())] == ["waiting"]
    complete_callback(store, token, {"then": "fine"}, clock.now())


def test_callbacks_inside_for_each_branch_and_retry_resume_where_they_wait(
    store: Store, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    register(
        registry,
        name="reviews",
        trigger=on_event("review.asked"),
        idempotency_key=lambda e: e.payload["id"],
        steps=lambda s: [
            s.for_each(
                over=lambda ctx: ["ann@example.com", "skip", "bo@example.com"],
                as_="who",
                do=[
                    s.branch(
                        if_=lambda ctx: ctx.scope["who"] != "skip",
                        on_true=[
                            s.retry(
                                times=2,
                                base="PT1S",
                                do=[
                                    s.mail_send(
                                        to=lambda ctx: ctx.scope["who"],
                                        subject="Review?",
                                        body=lambda ctx: ctx.callback.url,
                                    ),
                                    s.wait_for_callback("answer", timeout="P1D"),
                                    # An answer asking to be asked again fails the attempt.
                                    s.compute(
                                        "ok", lambda ctx: 1 // int(ctx.steps["answer"] != "again")
                                    ),
                                    s.compute(
                                        "answers",
                                        lambda ctx: [
                                            *ctx.steps.get("answers", []),
                                            ctx.steps["answer"],
                                        ],
                                    ),
                                ],
                            )
                        ],
                    )
                ],
            ),
            s.return_(lambda ctx: ctx.steps["answers"]),
        ],
    )
    run_id = start_run(store, registry, clock.now(), key="r-1", type="review.asked")
    state = ops.load_run(store, TENANT_A, run_id)
    assert state.suspension is not None
    assert state.suspension.path == [
        {"i": 0, "item": 0},
        {"i": 0, "arm": "true"},
        {"i": 0, "attempt": 1},
        {"i": 1},
    ]

    (ann,) = mail_tokens(store, run_id)
    complete_callback(store, ann, "again", clock.now())
    resume_open(store, registry, run_id, clock.now())  # the attempt fails: retry scheduled
    clock.advance(timedelta(seconds=1))
    resume_open(store, registry, run_id, clock.now())  # attempt 2 asks ann again
    _, ann_again = mail_tokens(store, run_id)
    with pytest.raises(CallbackAlreadyCompleted):
        complete_callback(store, ann, "ann", clock.now())
    complete_callback(store, ann_again, "ann", clock.now())
    resume_open(store, registry, run_id, clock.now())

    state = ops.load_run(store, TENANT_A, run_id)
    assert state.suspension is not None
    assert state.suspension.path[0] == {"i": 0, "item": 2}
    *_, bo = mail_tokens(store, run_id)
    complete_callback(store, bo, "bo", clock.now())
    resume_open(store, registry, run_id, clock.now())
    assert stream(store, run_id)[-1].fact.result == ["ann", "bo"]


def test_a_redrive_repeats_the_failed_pass_with_the_token_its_mail_already_carries(
    store: Store, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    register(
        registry,
        name="redriven",
        trigger=on_event("redrive.go"),
        idempotency_key=lambda e: e.payload["id"],
        steps=lambda s: [
            s.mail_send(to="a@example.com", subject="Approve?", body=lambda ctx: ctx.callback.url),
            s.compute("check", budget_check),
            s.wait_for_callback("decision"),
            s.return_(lambda ctx: ctx.steps["decision"]),
        ],
    )
    BUDGET_DOWN["on"] = True
    run_id = start_run(store, registry, clock.now(), type="redrive.go")
    assert ops.load_run(store, TENANT_A, run_id).status == "failed"
    (token,) = mail_tokens(store, run_id)
    with pytest.raises(UnknownCallback):  # no wait was reached: nothing to complete yet
        complete_callback(store, token, {"ok": True}, clock.now())

    BUDGET_DOWN["on"] = False
    redriven = redrive_run(store, TENANT_A, run_id, clock.now(), registry)

    assert (redriven.outcome, redriven.step_index) == ("suspended", 2)
    assert mail_tokens(store, run_id) == [token]  # the same request: not sent again
    waiting = ops.load_run(store, TENANT_A, run_id).suspension
    assert isinstance(waiting, ev.StepWaitingForCallback)
    assert waiting.token_hash == token_hash(token)
    complete_callback(store, token, {"ok": True}, clock.now())
    resume_open(store, registry, run_id, clock.now())
    assert stream(store, run_id)[-1].fact.result == {"ok": True}


def test_erasing_a_payload_not_yet_taken_fails_the_run(
    store: Store, flows: WorkflowRegistry, clock: ManualClock
) -> None:
    run_id = start_run(store, flows, clock.now())
    (token,) = mail_tokens(store, run_id)
    completion = complete_callback(store, token, {"iban": "DE00 1234"}, clock.now())

    erased = erase_event(store, TENANT_A, completion.event_id, clock.now(), reason="GDPR-7")

    assert erased.failed_runs == {run_id: "awaited_event_erased"}
    stored = store.inbox.get(TENANT_A, completion.event_id)
    assert stored is not None and stored.detail is None
    assert ops.load_run(store, TENANT_A, run_id).status == "failed"


def test_erasing_a_payload_a_run_took_erases_its_copies(
    store: Store, flows: WorkflowRegistry, clock: ManualClock
) -> None:
    run_id = start_run(store, flows, clock.now())
    (token,) = mail_tokens(store, run_id)
    completion = complete_callback(store, token, {"iban": "DE00 1234"}, clock.now())
    resume_open(store, flows, run_id, clock.now())
    assert stream(store, run_id)[-1].fact.result == {"iban": "DE00 1234"}

    erased = erase_event(store, TENANT_A, completion.event_id, clock.now())

    assert erased.runs == [run_id] and erased.failed_runs == {}
    completed = stream(store, run_id)[-1]
    assert completed.payload["redacted"] is True and completed.fact.result is None
    assert "DE00" not in str([e.payload for e in stream(store, run_id)])
    assert store.results.of_run(TENANT_A, run_id).values == {}
