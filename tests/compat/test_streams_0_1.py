"""Runs written by release 0.1.0 resume on this release.

`streams_0_1.json` holds every stream event, inbox row and outbox row that release
0.1.0 wrote for the workflows of `legacy_workflows.py` (a run waiting at a timer, one
whose awaited event matched, one still waiting, a scheduled retry, a loop half done,
failed, redriven, cancelled, erased, cron and delivered / failed dispatches). The test
loads them as stored, rebuilds the pending projection from the streams, and resumes
every open run on today's code.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb
from workflow_runner import DomainEvent, stream
from workflow_runner import engine as ops
from workflow_runner.definition import WorkflowRegistry
from workflow_runner.durations import parse_instant
from workflow_runner.store import Store

from tests.compat.legacy_workflows import legacy_workflows

FIXTURE = Path(__file__).with_name("streams_0_1.json")
NOW = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
# Every event type release 0.1 wrote.
TYPES_0_1 = {
    stream.RUN_STARTED,
    stream.STEP_WAITING,
    stream.STEP_WAITING_FOR_EVENT,
    stream.RETRY_SCHEDULED,
    stream.STEP_EVENT_MATCHED,
    stream.STEP_RESUMED,
    stream.RUN_COMPLETED,
    stream.RUN_FAILED,
    stream.RUN_CANCELLED,
    stream.RUN_REDRIVEN,
    stream.DISPATCH_REQUESTED,
    stream.DISPATCHED,
    stream.DISPATCH_FAILED,
}
STARTED = {
    "workflowName": "w",
    "workflowVersion": 1,
    "triggerEventType": "t",
    "triggerEventRef": {"eventId": "e"},
    "definitionFingerprint": "f",
}


@pytest.fixture(scope="module")
def recorded() -> dict[str, Any]:
    return dict(json.loads(FIXTURE.read_text()))


def _load(db_url: str, doc: dict[str, Any]) -> None:
    """Insert the rows exactly as release 0.1.0 stored them."""
    with psycopg.connect(db_url, autocommit=False) as conn:
        for e in doc["wf_events"]:
            conn.execute(
                "INSERT INTO wf_events (tenant_id, stream_id, stream_type, version, type, payload,"
                " metadata, recorded_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                (
                    e["tenant_id"],
                    e["stream_id"],
                    e["stream_type"],
                    e["version"],
                    e["type"],
                    Jsonb(e["payload"]),
                    Jsonb(e["metadata"]),
                    e["recorded_at"],
                ),
            )
        for i in doc["inbox"]:
            conn.execute(
                "INSERT INTO inbox (tenant_id, event_id, source, type, detail, event_time,"
                " received_at, triggered_at, woken_at, erased_at)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                (
                    i["tenant_id"],
                    i["event_id"],
                    i["source"],
                    i["type"],
                    None if i["detail"] is None else Jsonb(i["detail"]),
                    i["event_time"],
                    i["received_at"],
                    i["triggered_at"],
                    i["woken_at"],
                    i["erased_at"],
                ),
            )
        for o in doc["dispatch_outbox"]:
            conn.execute(
                "INSERT INTO dispatch_outbox (tenant_id, request_id, run_id, step_kind, request,"
                " status, attempts, next_attempt_at, leased_until, created_at)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                (
                    o["tenant_id"],
                    o["request_id"],
                    o["run_id"],
                    o["step_kind"],
                    None if o["request"] is None else Jsonb(o["request"]),
                    o["status"],
                    o["attempts"],
                    o["next_attempt_at"],
                    o["leased_until"],
                    o["created_at"],
                ),
            )
        conn.execute(
            "INSERT INTO tenants (tenant_id, first_seen) VALUES (%s, %s)",
            (doc["tenant"], doc["recordedAt"]),
        )


@pytest.fixture
def legacy(db_url: str, store: Store, recorded: dict[str, Any]) -> WorkflowRegistry:
    _load(db_url, recorded)
    registry = WorkflowRegistry()
    for wf in legacy_workflows():
        registry.register(wf)
    return registry


def test_definition_fingerprints_are_unchanged(recorded: dict[str, Any]) -> None:
    now = {wf.name: wf.fingerprint for wf in legacy_workflows()}
    assert now == recorded["fingerprints"]


def _resume(
    store: Store, registry: WorkflowRegistry, tenant: str, run_id: str, at: datetime
) -> ops.ResumeResult:
    state = ops.load_run(store, tenant, run_id)
    assert state.suspension is not None, f"run {run_id} is {state.status}, not suspended"
    result = ops.resume_run(
        store, tenant, run_id, state.suspension.step_index, at, registry=registry
    )
    ops.project_pending(store, at)
    return result


def test_recorded_runs_fold_to_their_status(
    store: Store, legacy: WorkflowRegistry, recorded: dict[str, Any]
) -> None:
    tenant, runs = recorded["tenant"], recorded["runs"]
    expected = {
        "wait": "waiting",
        "event_matched": "waiting",
        "event_waiting": "waiting",
        "retry": "waiting",
        "loop": "waiting",
        "cron": "waiting",
        "failed_redriven": "failed",
        "cancelled": "cancelled",
        "definition_changed": "failed",
        "completed": "completed",
        "returned_failure": "failed",
        "erased": "failed",
        "webhook_failed": "completed",
    }
    assert {name: ops.load_run(store, tenant, runs[name]).status for name in expected} == expected
    erased = ops.load_run(store, tenant, runs["erased"])
    assert erased.last_failure is not None
    assert erased.last_failure.reason == "awaited_event_erased"


def test_projection_rebuilt_from_recorded_streams(
    store: Store, legacy: WorkflowRegistry, recorded: dict[str, Any]
) -> None:
    tenant, runs = recorded["tenant"], recorded["runs"]
    now = parse_instant(recorded["recordedAt"])
    ops.project_pending(store, now)
    pending = {r.run_id: r for r in store.pending.for_tenant(tenant)}
    open_names = ("wait", "event_matched", "event_waiting", "retry", "loop", "cron")
    open_runs = {runs[k] for k in open_names}
    assert set(pending) == open_runs
    assert pending[runs["event_matched"]].awaited_event_id is not None
    assert pending[runs["event_waiting"]].awaited_event_id is None


def test_recorded_runs_resume_to_the_end(
    store: Store, legacy: WorkflowRegistry, recorded: dict[str, Any]
) -> None:
    tenant, runs = recorded["tenant"], recorded["runs"]
    now = parse_instant(recorded["recordedAt"])
    ops.project_pending(store, now)
    later = now + timedelta(hours=2)

    assert _resume(store, legacy, tenant, runs["wait"], later).outcome == "completed"
    done = store.streams.load(tenant, runs["wait"])[-1]
    assert done.payload["result"] == {"isSuccess": True, "total": 42}

    assert _resume(store, legacy, tenant, runs["event_matched"], later).outcome == "completed"
    outbox = store.outbox.of_run(tenant, runs["event_matched"])
    assert [o.step_kind for o in outbox] == ["mail.send", "webhook.send"]

    timed_out = _resume(store, legacy, tenant, runs["event_waiting"], now + timedelta(days=4))
    assert (timed_out.outcome, timed_out.reason) == ("failed", "returned_failure")

    retried = _resume(store, legacy, tenant, runs["retry"], later)
    assert retried.outcome == "completed"
    assert store.streams.load(tenant, runs["retry"])[-1].payload["result"]["attempt"] == 2

    assert _resume(store, legacy, tenant, runs["loop"], later).outcome == "suspended"
    last = _resume(store, legacy, tenant, runs["loop"], later + timedelta(hours=1))
    assert last.outcome == "completed"
    assert store.streams.load(tenant, runs["loop"])[-1].payload["result"]["last"] == 3

    assert _resume(store, legacy, tenant, runs["cron"], later).outcome == "completed"
    assert store.streams.load(tenant, runs["cron"])[-1].payload["result"] == {
        "at": "2026-01-05T06:00:00.000000Z"
    }


def test_recorded_timer_runs_resume_together_in_a_queue_batch(
    store: Store, legacy: WorkflowRegistry, recorded: dict[str, Any]
) -> None:
    """ResumeRun's batch path (timers' passes may run before their claims) over 0.1
    suspensions, then over the suspension this release wrote after one of them."""
    tenant, runs = recorded["tenant"], recorded["runs"]
    now = parse_instant(recorded["recordedAt"])
    ops.project_pending(store, now)
    later = now + timedelta(hours=2)
    names = ("wait", "retry", "loop", "cron")

    def batch(at: datetime, *which: str) -> list[str | None]:
        items = []
        for name in which:
            suspension = ops.load_run(store, tenant, runs[name]).suspension
            assert suspension is not None
            items.append(ops.ResumeRequestItem(tenant, runs[name], suspension.step_index))
        results = ops.resume_runs(store, items, at, legacy)
        ops.project_pending(store, at)
        return [getattr(r, "outcome", None) for r in results]

    assert batch(later, *names) == ["completed", "completed", "suspended", "completed"]
    assert batch(later + timedelta(hours=1), "loop") == ["completed"]
    assert store.streams.load(tenant, runs["wait"])[-1].payload["result"] == {
        "isSuccess": True,
        "total": 42,
    }
    assert store.streams.load(tenant, runs["retry"])[-1].payload["result"]["attempt"] == 2
    assert store.streams.load(tenant, runs["loop"])[-1].payload["result"]["last"] == 3
    for name in names:  # versions gap-free, positions in version order, each claim once
        events = store.streams.load(tenant, runs[name])
        types = [e.type for e in events]
        assert [e.version for e in events] == list(range(1, len(events) + 1))
        assert [e.position for e in events] == sorted(e.position for e in events)
        claims = [i for i, t in enumerate(types) if t == "workflow.step.resumed"]
        assert claims and all(types[i + 1] != "workflow.step.resumed" for i in claims)


def test_a_recorded_woken_run_resumes_in_a_queue_batch_with_its_event(
    store: Store, legacy: WorkflowRegistry, recorded: dict[str, Any]
) -> None:
    """The batch's one read brings the inbox row a 0.1 event-matched fact names (its
    payload's `eventId`), and the pass seeds the awaited event from it."""
    tenant, runs = recorded["tenant"], recorded["runs"]
    now = parse_instant(recorded["recordedAt"])
    ops.project_pending(store, now)
    run_id = runs["event_matched"]
    [matched] = [
        e for e in store.streams.load(tenant, run_id) if e.type == "workflow.step.event-matched"
    ]
    [read] = store.streams.load_for_resume([(tenant, run_id)])
    row = read.matched[matched.payload["eventId"]]
    assert row is not None and row.detail is not None

    suspension = ops.load_run(store, tenant, run_id).suspension
    assert suspension is not None
    item = ops.ResumeRequestItem(tenant, run_id, suspension.step_index)
    [result] = ops.resume_runs(store, [item], now + timedelta(hours=2), legacy)

    assert getattr(result, "outcome", result) == "completed"
    outbox = store.outbox.of_run(tenant, run_id)
    assert [o.step_kind for o in outbox] == ["mail.send", "webhook.send"]


def test_every_recorded_payload_decodes_to_its_fact_and_back(recorded: dict[str, Any]) -> None:
    """The typed stream reads each shape release 0.1.0 wrote and writes it unchanged."""
    seen: set[str] = set()
    for stored in recorded["wf_events"]:
        fact = stream.decode(stored["type"], stored["payload"])
        assert not isinstance(fact, stream.UnknownFact), stored["type"]
        assert stream.type_of(fact) == stored["type"]
        assert fact.to_payload() == stored["payload"], stored["type"]
        seen.add(stored["type"])
    assert seen == TYPES_0_1  # the fixture covers every event type of the format


def test_an_event_type_from_a_newer_release_is_skipped_by_the_fold() -> None:
    facts = [
        stream.RecordedFact(1, NOW, stream.decode(stream.RUN_STARTED, STARTED)),
        stream.RecordedFact(2, NOW, stream.decode("workflow.from-the-future", {"key": "x"})),
    ]
    state = stream.fold_run("r", "t", facts)
    assert isinstance(facts[1].fact, stream.UnknownFact)
    assert (state.status, state.version, state.workflow_name) == ("running", 2, "w")


def test_a_recorded_wait_is_woken_by_an_event_of_this_release(
    store: Store, legacy: WorkflowRegistry, recorded: dict[str, Any]
) -> None:
    """The 0.1.0 suspension keeps its look-back start (the run's start on the trigger
    function's clock): an awaited event stamped by EventBridge after it wakes the run."""
    tenant, runs = recorded["tenant"], recorded["runs"]
    now = parse_instant(recorded["recordedAt"])
    ops.project_pending(store, now)
    (row,) = [r for r in store.pending.for_tenant(tenant) if r.run_id == runs["event_waiting"]]
    order = row.match_expr["expr"]["op"]["value"] if row.match_expr else None
    approved = DomainEvent(
        id="evt-new-approval",
        type="legacy.approved",
        payload={"orderId": order, "by": "dee"},
        tenant_id=tenant,
        time=now + timedelta(minutes=1),
        source="tests",
    )
    woken = ops.wake_on_event(store, approved, now + timedelta(minutes=1))
    assert [w.run_id for w in woken] == [runs["event_waiting"]]
    result = _resume(store, legacy, tenant, runs["event_waiting"], now + timedelta(minutes=2))
    assert result.outcome == "completed"
