"""create_callback and await_callback on real PostgreSQL: a created callback outlives the
pass that made it, its token reaches every later step, an answer that comes before the
await is kept and taken there at once, several are open at once, and each ends once:
answered, expired (while nobody awaits it too), closed by an operator's resume or by
its name made again. A pass that fails records none; its redrive mints the same tokens."""

from __future__ import annotations

from collections.abc import Iterator
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
    CallbackExpired,
    CallbackNotWaiting,
    UnknownCallback,
    complete_callback,
    enqueue_resume,
    fail_callback,
    heartbeat_callback,
    run_callbacks,
)
from workflow_runner.engine.redrive import redrive_run
from workflow_runner.store import Store

from tests.integration.callback_support import (
    BUDGET_DOWN,
    budget_check,
    mail_tokens,
    mailed_tokens,
    resume_open,
    start_run,
)
from tests.support import TENANT_A, TENANT_B, refuse_pass_writes, register, stream, stream_types

BASE = "https://callbacks.example.com/"


@pytest.fixture(autouse=True)
def links() -> Iterator[None]:
    with callback_links(BASE):
        yield


def _mail(name: str) -> Any:
    return lambda s: s.mail_send(
        to="ops@example.com", subject=name, body=lambda ctx: ctx.callbacks[name].url
    )


def _flow(registry: WorkflowRegistry, name: str, steps: Any) -> None:
    register(
        registry,
        name=name,
        trigger=on_event(f"{name}.go"),
        idempotency_key=lambda e: e.payload["id"],
        steps=steps,
    )


@pytest.fixture
def flows(registry: WorkflowRegistry) -> WorkflowRegistry:
    # Made now, handed out in a later pass, awaited after a day.
    _flow(
        registry,
        "later",
        lambda s: [
            s.create_callback("approval", timeout="P3D"),
            s.wait(for_="PT1H"),
            _mail("approval")(s),
            s.wait(for_="P1D"),
            s.await_callback("approval", result_key="decision"),
            s.return_(lambda ctx: ctx.steps["decision"]),
        ],
    )
    # Two open at once, awaited one after the other.
    _flow(
        registry,
        "two",
        lambda s: [
            s.create_callback("legal"),
            s.create_callback("finance", timeout="P2D"),
            _mail("legal")(s),
            _mail("finance")(s),
            s.await_callback("legal"),
            s.await_callback("finance", catch=True),
            s.return_(lambda ctx: [ctx.steps["legal"], ctx.steps["finance"]]),
        ],
    )
    # Expires (or stops beating) while the run waits elsewhere.
    _flow(
        registry,
        "expiring",
        lambda s: [
            s.create_callback("quick", timeout="PT1H", heartbeat="PT10M"),
            _mail("quick")(s),
            s.wait(for_="PT30M"),
            s.await_callback("quick"),
            s.return_(lambda ctx: {"quick": ctx.steps["quick"]}),
        ],
    )
    return registry


def _go(store: Store, flows: WorkflowRegistry, clock: ManualClock, name: str, **kw: Any) -> str:
    return start_run(store, flows, clock.now(), type=f"{name}.go", **kw)


def _due(store: Store, flows: WorkflowRegistry, run_id: str, clock: ManualClock) -> Any:
    """Move the clock to the run's next timer and resume it there."""
    state = ops.load_run(store, TENANT_A, run_id)
    assert state.wake_at is not None
    clock.advance(max(timedelta(0), state.wake_at - clock.now()))
    return resume_open(store, flows, run_id, clock.now())


def test_a_created_callback_is_handed_out_by_a_later_pass_and_awaited_after(
    store: Store, flows: WorkflowRegistry, clock: ManualClock
) -> None:
    run_id = _go(store, flows, clock, "later")
    assert mail_tokens(store, run_id) == []
    created = next(e.fact for e in stream(store, run_id) if e.type == ev.CALLBACK_CREATED)
    assert (created.name, created.step_index) == ("approval", 0)

    _due(store, flows, run_id, clock)  # the pass after the hour mails the link
    (token,) = mail_tokens(store, run_id)
    assert token_hash(token) == created.token_hash
    _due(store, flows, run_id, clock)  # a day later: the await
    waiting = ops.load_run(store, TENANT_A, run_id).suspension
    assert isinstance(waiting, ev.StepWaitingForCallback)
    assert (waiting.name, waiting.token_hash, waiting.result_key) == (
        "approval",
        created.token_hash,
        "decision",
    )
    assert waiting.timeout_at == stream(store, run_id)[0].recorded_at + timedelta(days=3)

    queue = InMemoryResumeQueue(clock)
    completion = complete_callback(store, token, {"approved": True}, clock.now())
    assert completion.run_due and enqueue_resume(store, queue, completion, clock.now())
    assert resume_open(store, flows, run_id, clock.now()).outcome == "completed"
    assert stream(store, run_id)[-1].fact.result == {"approved": True}


def test_an_answer_before_the_await_is_kept_and_taken_there_at_once(
    store: Store, flows: WorkflowRegistry, clock: ManualClock
) -> None:
    run_id = _go(store, flows, clock, "later")
    _due(store, flows, run_id, clock)
    (token,) = mail_tokens(store, run_id)
    (row,) = store.pending.for_tenant(TENANT_A)  # the day's wait

    completion = complete_callback(store, token, {"approved": "early"}, clock.now())

    assert not completion.run_due
    assert not enqueue_resume(store, InMemoryResumeQueue(clock), completion, clock.now())
    answer = stream(store, run_id)[-1].fact
    assert isinstance(answer, ev.CallbackCompleted) and not answer.run_due
    ops.project_pending(store, clock.now())
    assert store.pending.for_tenant(TENANT_A) == [row]  # the timer is not woken by it
    assert [c.status for c in run_callbacks(store, TENANT_A, run_id, clock.now())] == ["completed"]

    # As ResumeRun takes it off the queue: a batch, whose passes at a timer run before
    # their claims; this one reads the callback, so it runs again claiming first.
    clock.advance(row.wake_at - clock.now())
    request = ops.ResumeRequestItem(TENANT_A, run_id, row.step_index)
    [result] = ops.resume_runs(store, [request], clock.now(), flows)
    assert result.outcome == "completed"  # type: ignore[union-attr]
    types = stream_types(store, run_id)
    assert types.count(ev.STEP_WAITING_FOR_CALLBACK) == 0  # never suspended at the await
    assert types.count(ev.STEP_RESUMED) == 2
    assert stream(store, run_id)[-1].fact.result == {"approved": "early"}


def test_several_callbacks_are_open_at_once_and_each_await_finds_its_own(
    store: Store, flows: WorkflowRegistry, clock: ManualClock
) -> None:
    run_id = _go(store, flows, clock, "two")
    legal, finance = (mailed_tokens(store, run_id)[k] for k in ("legal", "finance"))
    statuses = run_callbacks(store, TENANT_A, run_id, clock.now())
    assert sorted((c.row.name, c.status) for c in statuses) == [
        ("finance", "waiting"),
        ("legal", "waiting"),
    ]

    kept = fail_callback(store, finance, "OverBudget", "too much", clock.now())
    assert not kept.run_due  # the run awaits legal now
    answered = complete_callback(store, legal, {"ok": True}, clock.now())
    assert answered.run_due
    assert resume_open(store, flows, run_id, clock.now()).outcome == "completed"
    assert stream(store, run_id)[-1].fact.result == [
        {"ok": True},
        {"failed": True, "error": "OverBudget"},
    ]


def test_an_uncaught_failure_before_the_await_fails_the_run_there(
    store: Store, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    _flow(
        registry,
        "strict",
        lambda s: [
            s.create_callback("check"),
            _mail("check")(s),
            s.wait(for_="PT1H"),
            s.await_callback("check"),
        ],
    )
    run_id = start_run(store, registry, clock.now(), type="strict.go")
    (token,) = mail_tokens(store, run_id)
    fail_callback(store, token, "Rejected", None, clock.now())
    result = _due(store, registry, run_id, clock)
    assert (result.outcome, result.reason) == ("failed", "callback_failed")
    assert stream(store, run_id)[-1].payload["path"] == [{"i": 3}]


def test_a_created_callback_that_expires_while_nobody_awaits_it_gives_the_await_none(
    store: Store, flows: WorkflowRegistry, clock: ManualClock
) -> None:
    run_id = _go(store, flows, clock, "expiring")
    (token,) = mail_tokens(store, run_id)
    clock.advance(timedelta(minutes=8))
    heartbeat_callback(store, token, clock.now())  # due by 18 min; the await comes at 30
    clock.advance(timedelta(minutes=11))
    with pytest.raises(CallbackExpired, match="no heartbeat"):
        complete_callback(store, token, {"late": True}, clock.now())

    assert _due(store, flows, run_id, clock).outcome == "completed"
    assert stream(store, run_id)[-1].fact.result == {"quick": None}
    (state,) = run_callbacks(store, TENANT_A, run_id, clock.now())
    assert (state.status, state.row.closed_reason) == ("expired", "heartbeat_timeout")
    # An answer whose clock says it is early still loses: the await decided.
    with pytest.raises(CallbackExpired):
        complete_callback(store, token, {"skewed": True}, clock.now() - timedelta(minutes=25))


def test_an_await_of_a_beating_callback_times_out_when_the_beats_stop(
    store: Store, flows: WorkflowRegistry, clock: ManualClock
) -> None:
    run_id = _go(store, flows, clock, "expiring")
    (token,) = mail_tokens(store, run_id)
    for _ in range(3):  # beats carry it past the wait into the await
        clock.advance(timedelta(minutes=9))
        heartbeat_callback(store, token, clock.now())
    assert _due(store, flows, run_id, clock).outcome == "suspended"
    waiting = ops.load_run(store, TENANT_A, run_id).suspension
    assert isinstance(waiting, ev.StepWaitingForCallback)
    assert waiting.due_at == clock.now() + timedelta(minutes=7)  # 27 + 10 min
    heartbeat_callback(store, token, clock.now())
    assert ops.load_run(store, TENANT_A, run_id).wake_at == clock.now() + timedelta(minutes=10)

    assert _due(store, flows, run_id, clock).outcome == "completed"
    resumed = [e.fact for e in stream(store, run_id) if e.type == ev.STEP_RESUMED][-1]
    assert resumed.resumed_by == "heartbeat_timeout"
    with pytest.raises(CallbackExpired):
        heartbeat_callback(store, token, clock.now() - timedelta(minutes=1))


def test_an_operator_resumed_await_closes_its_callback(
    store: Store, flows: WorkflowRegistry, clock: ManualClock
) -> None:
    run_id = _go(store, flows, clock, "two")
    legal = mailed_tokens(store, run_id)["legal"]
    forced = ops.resume_run(store, TENANT_A, run_id, 4, clock.now(), force=True, registry=flows)
    assert (forced.outcome, forced.suspended_at) == ("suspended", 5)
    with pytest.raises(CallbackNotWaiting):
        complete_callback(store, legal, {"ok": True}, clock.now())
    closed = [
        c for c in run_callbacks(store, TENANT_A, run_id, clock.now()) if c.row.name == "legal"
    ]
    assert [(c.status, c.row.closed_reason) for c in closed] == [("closed", "moved_on")]


def test_making_a_name_again_closes_the_callback_made_before(
    store: Store, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    _flow(
        registry,
        "again",
        lambda s: [
            s.create_callback("code"),
            _mail("code")(s),
            s.wait(for_="PT1H"),
            s.create_callback("code"),
            _mail("code")(s),
            s.await_callback("code"),
            s.return_(lambda ctx: ctx.steps["code"]),
        ],
    )
    run_id = start_run(store, registry, clock.now(), type="again.go")
    _due(store, registry, run_id, clock)
    first, second = mail_tokens(store, run_id)
    assert first != second
    with pytest.raises(CallbackNotWaiting):
        complete_callback(store, first, "old", clock.now())
    complete_callback(store, second, "new", clock.now())
    assert resume_open(store, registry, run_id, clock.now()).outcome == "completed"
    assert stream(store, run_id)[-1].fact.result == "new"


def test_an_await_whose_create_did_not_run_fails_callback_not_created(
    store: Store, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    _flow(
        registry,
        "skipped",
        lambda s: [
            s.branch(if_=lambda ctx: False, on_true=[s.create_callback("maybe")]),
            s.await_callback("maybe"),
        ],
    )
    run_id = start_run(store, registry, clock.now(), type="skipped.go")
    failed = stream(store, run_id)[-1]
    assert (failed.type, failed.payload["reason"]) == (ev.RUN_FAILED, "callback_not_created")


def test_a_failed_pass_records_no_created_callback_and_its_redrive_mints_the_same_token(
    store: Store, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    _flow(
        registry,
        "redriven",
        lambda s: [
            s.create_callback("kept"),
            _mail("kept")(s),
            s.wait(for_="PT1H"),
            s.create_callback("fresh"),
            _mail("fresh")(s),
            s.compute("check", budget_check),
            s.await_callback("fresh"),
            s.await_callback("kept"),
            s.return_(lambda ctx: [ctx.steps["fresh"], ctx.steps["kept"]]),
        ],
    )
    BUDGET_DOWN["on"] = True
    run_id = start_run(store, registry, clock.now(), type="redriven.go")
    assert _due(store, registry, run_id, clock).outcome == "failed"
    kept, fresh = mail_tokens(store, run_id)
    with pytest.raises(UnknownCallback):  # the failed pass recorded no callback
        complete_callback(store, fresh, "f", clock.now())
    with pytest.raises(CallbackNotWaiting):  # the run failed: nothing is awaited
        complete_callback(store, kept, "k", clock.now())

    BUDGET_DOWN["on"] = False
    redriven = redrive_run(store, TENANT_A, run_id, clock.now(), registry)

    assert (redriven.outcome, redriven.step_index) == ("suspended", 6)
    assert mail_tokens(store, run_id) == [kept, fresh]  # the same requests: not sent again
    complete_callback(store, kept, "k", clock.now())  # kept for its await
    complete_callback(store, fresh, "f", clock.now())
    assert resume_open(store, registry, run_id, clock.now()).outcome == "completed"
    assert stream(store, run_id)[-1].fact.result == ["f", "k"]


def test_created_callbacks_never_mix_tenants(
    store: Store, flows: WorkflowRegistry, clock: ManualClock
) -> None:
    """Both tenants' runs share a run id (run ids derive from workflow and key only)."""
    run_a = _go(store, flows, clock, "two", tenant=TENANT_A)
    run_b = _go(store, flows, clock, "two", tenant=TENANT_B)
    assert run_a == run_b
    legal_a, finance_a = (mailed_tokens(store, run_a, TENANT_A)[k] for k in ("legal", "finance"))
    legal_b, finance_b = (mailed_tokens(store, run_b, TENANT_B)[k] for k in ("legal", "finance"))
    assert {legal_a, finance_a}.isdisjoint({legal_b, finance_b})

    complete_callback(store, finance_a, "a-finance", clock.now())  # kept for A's await
    complete_callback(store, legal_a, "a-legal", clock.now())
    resume_open(store, flows, run_a, clock.now(), TENANT_A)

    assert stream(store, run_a, TENANT_A)[-1].fact.result == ["a-legal", "a-finance"]
    assert ops.load_run(store, TENANT_B, run_b).status == "waiting"
    assert all(c.status == "waiting" for c in run_callbacks(store, TENANT_B, run_b, clock.now()))
    complete_callback(store, legal_b, "b-legal", clock.now())
    resume_open(store, flows, run_b, clock.now(), TENANT_B)
    waiting = ops.load_run(store, TENANT_B, run_b).suspension
    assert isinstance(waiting, ev.StepWaitingForCallback) and waiting.name == "finance"


def test_a_pass_the_database_refuses_leaves_none_of_its_callbacks(
    store: Store, registry: WorkflowRegistry, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pass is atomic: its callback rows, facts and mail go with its outcome or not
    at all."""
    _flow(
        registry,
        "refused",
        lambda s: [
            s.wait(for_="PT1H"),
            s.create_callback("later"),
            _mail("later")(s),
            s.await_callback("later"),
        ],
    )
    run_id = start_run(store, registry, clock.now(), type="refused.go")
    clock.advance(timedelta(hours=1))
    refuse_pass_writes(monkeypatch, run_id)

    [result] = ops.resume_runs(
        store, [ops.ResumeRequestItem(TENANT_A, run_id, 0)], clock.now(), registry
    )

    assert (result.outcome, result.reason) == ("failed", "pass_not_storable")  # type: ignore[union-attr]
    assert store.callbacks.of_run(TENANT_A, run_id) == []
    assert ev.CALLBACK_CREATED not in stream_types(store, run_id)
    assert mail_tokens(store, run_id) == []
