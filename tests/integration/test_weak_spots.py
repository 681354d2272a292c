"""kumiko's known weak spots (kumiko-semantics §10), each fixed and proven here."""

from __future__ import annotations

from datetime import timedelta

from workflow_runner import ManualClock, on_event, run_id_for
from workflow_runner import engine as ops
from workflow_runner import stream as ev
from workflow_runner.definition import WorkflowRegistry
from workflow_runner.durations import parse_instant
from workflow_runner.store import Store

from tests.support import (
    TENANT_A,
    pending_rows,
    register,
    resume_due,
    stream,
    stream_types,
    trigger,
)


def test_suspension_inside_branch_and_for_each_resumes_at_the_nested_step(
    store: Store, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    wf = register(
        registry,
        name="nested",
        trigger=on_event("nested.go"),
        idempotency_key="k",
        steps=lambda s: [
            s.branch(
                if_=lambda ctx: ctx.event.payload["vip"],
                on_true=[
                    s.for_each(
                        over=lambda ctx: ctx.event.payload["items"],
                        as_="item",
                        do=[
                            s.wait(for_="PT1H"),
                            s.compute(
                                "log", lambda ctx: [*ctx.steps.get("log", []), ctx.scope["item"]]
                            ),
                        ],
                    ),
                ],
                on_false=[s.compute("log", lambda ctx: ["not-vip"])],
            ),
            s.return_(lambda ctx: {"isSuccess": True, "log": ctx.steps["log"]}),
        ],
    )
    trigger(store, registry, "nested.go", {"vip": True, "items": ["x", "y"]}, clock.now())
    run_id = run_id_for(wf.name, "k")
    first = stream(store, run_id)[-1].payload
    assert first["path"] == [{"i": 0, "arm": "true"}, {"i": 0, "item": 0}, {"i": 0}]

    resume_due(store, registry, clock.now() + timedelta(hours=1))
    second = stream(store, run_id)[-1].payload
    assert second["path"] == [{"i": 0, "arm": "true"}, {"i": 0, "item": 1}, {"i": 0}]
    assert second["resultsDelta"] == {"log": ["x"]}  # what that pass wrote, once

    resume_due(store, registry, clock.now() + timedelta(hours=2))
    done = stream(store, run_id)[-1]
    assert done.type == ev.RUN_COMPLETED
    assert done.payload["result"] == {"isSuccess": True, "log": ["x", "y"]}


def test_results_of_steps_before_a_suspension_are_visible_after_resume(
    store: Store, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    wf = register(
        registry,
        name="memory",
        trigger=on_event("memory.go"),
        idempotency_key="k",
        steps=lambda s: [
            s.compute("price", lambda ctx: ctx.event.payload["price"] * 2),
            s.wait(for_="P1D"),
            s.compute("with_tax", lambda ctx: ctx.steps["price"] + 1),
            s.wait(for_="P1D"),
            s.return_(
                lambda ctx: {
                    "isSuccess": True,
                    "total": ctx.steps["with_tax"],
                    "p": ctx.steps["price"],
                }
            ),
        ],
    )
    trigger(store, registry, "memory.go", {"price": 10}, clock.now())
    resume_due(store, registry, clock.now() + timedelta(days=1))
    resume_due(store, registry, clock.now() + timedelta(days=2))
    done = stream(store, run_id_for(wf.name, "k"))[-1]
    assert done.type == ev.RUN_COMPLETED
    assert done.payload["result"] == {"isSuccess": True, "total": 21, "p": 20}


def test_retry_backoff_is_configurable_and_counted_per_retry_step(
    store: Store, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    def flaky(ctx):  # type: ignore[no-untyped-def]
        if ctx.workflow.retry_attempt < 3:
            raise TimeoutError("partner timed out")
        return ctx.workflow.retry_attempt

    wf = register(
        registry,
        name="backoff",
        trigger=on_event("backoff.go"),
        idempotency_key="k",
        steps=lambda s: [
            s.retry(
                times=5, backoff="exponential", base="PT7S", cap="PT10S", do=[s.compute("a", flaky)]
            ),
            s.retry(times=5, do=[s.compute("b", lambda ctx: ctx.workflow.retry_attempt)]),
        ],
    )
    trigger(store, registry, "backoff.go", {}, clock.now())
    run_id = run_id_for(wf.name, "k")
    first = stream(store, run_id)[-1].payload
    assert parse_instant(first["wakeAt"]) == clock.now() + timedelta(seconds=7)
    assert pending_rows(store)[0].wake_at == clock.now() + timedelta(seconds=7)
    resume_due(store, registry, clock.now() + timedelta(seconds=7))
    second = stream(store, run_id)[-1].payload
    assert second["attempt"] == 2
    assert parse_instant(second["wakeAt"]) == clock.now() + timedelta(seconds=17)  # capped at 10 s
    resume_due(store, registry, clock.now() + timedelta(seconds=17))
    done = stream(store, run_id)[-1]
    assert done.type == ev.RUN_COMPLETED
    assert stream(store, run_id)[-2].payload["retryAttempt"] == 2


def test_return_is_success_false_ends_the_run_as_failed(
    store: Store, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    wf = register(
        registry,
        name="declined",
        trigger=on_event("declined.go"),
        idempotency_key="k",
        steps=lambda s: [s.return_({"isSuccess": False, "error": "card declined"})],
    )
    result = trigger(store, registry, "declined.go", {}, clock.now())
    assert result.started[0].outcome == "failed"
    failed = stream(store, run_id_for(wf.name, "k"))[-1]
    assert failed.type == ev.RUN_FAILED
    assert failed.payload["reason"] == "returned_failure"
    assert failed.payload["result"] == {"isSuccess": False, "error": "card declined"}
    assert store.runs.get(TENANT_A, run_id_for(wf.name, "k")).status == "failed"


def test_cancelled_run_never_resumes_and_cancel_is_idempotent(
    store: Store, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    wf = register(
        registry,
        name="cancel-me",
        trigger=on_event("cancel.go"),
        idempotency_key="k",
        steps=lambda s: [s.wait(for_="PT1H"), s.return_({"isSuccess": True})],
    )
    trigger(store, registry, "cancel.go", {}, clock.now())
    run_id = run_id_for(wf.name, "k")

    first = ops.cancel_run(store, TENANT_A, run_id, clock.now(), reason="customer left")
    second = ops.cancel_run(store, TENANT_A, run_id, clock.now())
    ops.project_pending(store, clock.now())
    resumed = ops.resume_run(
        store, TENANT_A, run_id, 0, clock.now() + timedelta(hours=2), registry=registry
    )

    assert (first.outcome, second.outcome, resumed.outcome) == (
        "cancelled",
        "already-cancelled",
        "already-resumed",
    )
    assert stream_types(store, run_id) == [ev.RUN_STARTED, ev.STEP_WAITING, ev.RUN_CANCELLED]
    assert stream(store, run_id)[-1].payload["reason"] == "customer left"
    assert pending_rows(store) == []
    assert store.runs.get(TENANT_A, run_id).status == "cancelled"


def test_cancelling_a_completed_run_changes_nothing(
    store: Store, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    wf = register(
        registry,
        name="done",
        trigger=on_event("done.go"),
        idempotency_key="k",
        steps=lambda s: [s.return_()],
    )
    trigger(store, registry, "done.go", {}, clock.now())
    result = ops.cancel_run(store, TENANT_A, run_id_for(wf.name, "k"), clock.now())
    assert (result.outcome, result.status) == ("already-settled", "completed")
    assert stream_types(store, run_id_for(wf.name, "k"))[-1] == ev.RUN_COMPLETED


def test_a_run_resumes_on_the_version_it_started_on_while_that_version_is_registered(
    store: Store, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    v1 = register(
        registry,
        name="versioned",
        trigger=on_event("v.go"),
        idempotency_key=lambda e: e.payload["k"],
        steps=lambda s: [s.wait(for_="PT1H"), s.return_({"isSuccess": True, "version": 1})],
    )
    trigger(store, registry, "v.go", {"k": "old"}, clock.now())
    v2 = register(
        registry,
        name="versioned",
        trigger=on_event("v.go"),
        idempotency_key=lambda e: e.payload["k"],
        version=2,
        steps=lambda s: [s.wait(for_="PT1H"), s.return_({"isSuccess": True, "version": 2})],
    )
    trigger(store, registry, "v.go", {"k": "new"}, clock.now())
    assert (
        stream(store, run_id_for("versioned", "new"))[0].payload["definitionFingerprint"]
        == v2.fingerprint
    )

    resume_due(store, registry, clock.now() + timedelta(hours=1))

    assert stream(store, run_id_for("versioned", "old"))[-1].payload["result"]["version"] == 1
    assert stream(store, run_id_for("versioned", "new"))[-1].payload["result"]["version"] == 2
    assert v1.fingerprint != v2.fingerprint


def test_a_run_whose_version_was_removed_fails_loud_where_no_shape_agrees(
    store: Store, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    register(
        registry,
        name="versioned",
        trigger=on_event("v.go"),
        idempotency_key="k",
        steps=lambda s: [s.wait(for_="PT1H"), s.return_()],
    )
    trigger(store, registry, "v.go", {}, clock.now())
    registry.unregister("versioned", 1)
    register(
        registry,
        name="versioned",
        trigger=on_event("v.go"),
        idempotency_key="k",
        version=2,
        steps=lambda s: [s.compute("first", lambda ctx: 1), s.wait(for_="PT2H"), s.return_()],
    )
    results = resume_due(store, registry, clock.now() + timedelta(hours=1))
    assert [(r.outcome, r.reason) for r in results] == [("failed", "workflow_definition_changed")]


def test_a_run_whose_version_was_removed_goes_on_on_one_whose_shape_agrees(
    store: Store, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    register(
        registry,
        name="versioned",
        trigger=on_event("v.go"),
        idempotency_key="k",
        steps=lambda s: [s.wait(for_="PT1H"), s.return_({"version": 1})],
    )
    trigger(store, registry, "v.go", {}, clock.now())
    registry.unregister("versioned", 1)
    v2 = register(
        registry,
        name="versioned",
        trigger=on_event("v.go"),
        idempotency_key="k",
        version=2,
        steps=lambda s: [s.wait(for_="PT2H"), s.return_({"version": 2})],
    )
    results = resume_due(store, registry, clock.now() + timedelta(hours=1))
    assert [r.outcome for r in results] == ["completed"]
    events = stream(store, run_id_for("versioned", "k"))
    assert events[-1].payload["result"] == {"version": 2}  # the rest of the run is v2's
    assert events[-2].payload["definitionFingerprint"] == v2.fingerprint  # the claim says so
