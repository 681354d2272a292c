"""Data protection: no raw exception text is stored, and erasing a domain event leaves
no copy of its payload anywhere; runs that depended on it fail with a clear reason."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

import pytest
from workflow_runner import define_workflow, on_event, run_id_for
from workflow_runner import engine as ops
from workflow_runner import stream as ev
from workflow_runner.clock import ManualClock
from workflow_runner.definition import WorkflowRegistry
from workflow_runner.engine.dispatcher import dispatch_pending
from workflow_runner.engine.erase import EventNotFound, erase_event
from workflow_runner.errors import InvalidInput
from workflow_runner.store import Store
from workflow_runner.webhook_guard import WebhookGuard

from tests.reliability.harness import TENANT_A, TENANT_B, check_invariants, find_text, record
from tests.support import event, resume_due


class _FailingMailer:
    def __init__(self, secret: str) -> None:
        self.secret = secret

    def send_mail(self, request_id: str, sender: str, to: object, subject: str, body: str) -> str:
        raise ConnectionError(f"smtp said no to {self.secret}")


class _NoHttp:
    def send(self, *args: object) -> object:
        raise AssertionError("no webhook expected")


def _workflows(registry: WorkflowRegistry) -> None:
    registry.register(
        define_workflow(
            name="copies-trigger",
            trigger=on_event("person.created"),
            idempotency_key=lambda e: e.payload["personId"],
            register=False,
            steps=lambda s: [
                s.compute("name", lambda ctx: ctx.event.payload["name"]),
                s.mail_send(
                    to="ops@example.com",
                    subject="new person",
                    body=lambda ctx: f"hello {ctx.steps['name']}",
                ),
                s.wait(for_="P1D"),
                s.return_(lambda ctx: {"greeted": ctx.steps["name"]}),
            ],
        )
    )
    registry.register(
        define_workflow(
            name="copies-awaited",
            trigger=on_event("case.opened"),
            idempotency_key=lambda e: e.payload["caseId"],
            awaits={"note": "case.noted"},
            register=False,
            steps=lambda s: [
                s.wait_for_event(
                    "case.noted",
                    match=lambda ctx: {
                        "version": 1,
                        "expr": {
                            "kind": "atom",
                            "path": ["caseId"],
                            "op": {"kind": "eq", "value": ctx.event.payload["caseId"]},
                        },
                    },
                    timeout="P3D",
                ),
                s.compute("note", lambda ctx: ctx.steps["case.noted"]["text"]),
                s.wait(for_="P1D"),
                s.return_(lambda ctx: {"note": ctx.steps["note"]}),
            ],
        )
    )


def _setup(store: Store, clock: ManualClock) -> tuple[WorkflowRegistry, str, str, str]:
    registry = WorkflowRegistry()
    _workflows(registry)
    marker = f"PII-{uuid.uuid4().hex}"
    now = clock.now()
    person = event("person.created", {"tenantId": TENANT_A, "personId": "p1", "name": marker})
    ops.ingest_domain_event(store, person, now, registry)
    case = event("case.opened", {"tenantId": TENANT_A, "caseId": "c1"})
    ops.ingest_domain_event(store, case, now, registry)
    ops.project_pending(store, now)
    note = event("case.noted", {"tenantId": TENANT_A, "caseId": "c1", "text": marker})
    ops.wake_on_event(store, note, now)
    resume_due(store, registry, now)  # the awaited run copies the note into its results
    return registry, marker, person.id, note.id


def test_erasing_a_trigger_event_removes_every_copy_and_fails_the_waiting_run(
    store: Store, clock: ManualClock
) -> None:
    registry, marker, person_id, note_id = _setup(store, clock)
    assert find_text(store, marker), "the scenario must have stored copies to erase"
    later = clock.advance(timedelta(hours=1))

    result = erase_event(store, TENANT_A, person_id, later, reason="ticket 42")
    ops.project_pending(store, later)

    run = run_id_for("copies-trigger", "p1")
    assert result.failed_runs == {run: "trigger_event_erased"}
    assert result.dispatches_cancelled == 1
    state = ops.load_run(store, TENANT_A, run)
    assert state.status == "failed"
    assert state.last_failure is not None and state.last_failure.reason == "trigger_event_erased"
    # The awaited-event copy remains until that event is erased too.
    awaited_run = run_id_for("copies-awaited", "c1")
    hits = find_text(store, marker)
    assert hits and all(awaited_run in h or note_id in h for h in hits), hits
    result = erase_event(store, TENANT_A, note_id, later)
    ops.project_pending(store, later)
    assert result.failed_runs == {awaited_run: "awaited_event_erased"}
    assert find_text(store, marker) == []
    assert check_invariants(store, registry) == []
    # Nothing resumes on the missing data: the pending rows are gone.
    assert resume_due(store, registry, later + timedelta(days=2)) == []
    record(erasures=2, erasure_leaks=0)


def test_erasure_is_idempotent_and_a_late_redelivery_starts_nothing(
    store: Store, clock: ManualClock
) -> None:
    registry, marker, person_id, note_id = _setup(store, clock)
    now = clock.now()
    erase_event(store, TENANT_A, note_id, now)
    first = erase_event(store, TENANT_A, person_id, now)
    events_after_first = store.conn.execute("SELECT count(*) AS n FROM wf_events").fetchone()
    second = erase_event(store, TENANT_A, person_id, now + timedelta(minutes=1))
    assert not first.already_erased and second.already_erased
    assert second.failed_runs == {} and second.events_redacted == 0
    count = store.conn.execute("SELECT count(*) AS n FROM wf_events").fetchone()
    assert count == events_after_first
    again = event(
        "person.created",
        {"tenantId": TENANT_A, "personId": "p1", "name": marker},
        event_id=person_id,
    )
    result = ops.ingest_domain_event(store, again, now, registry)
    assert not result.stored and result.started == []
    assert find_text(store, marker) == []


def test_erasing_after_completion_redacts_the_result_and_keeps_the_outcome(
    store: Store, clock: ManualClock
) -> None:
    registry, marker, person_id, note_id = _setup(store, clock)
    end = clock.advance(timedelta(days=2))
    resume_due(store, registry, end)
    run = run_id_for("copies-trigger", "p1")
    assert ops.load_run(store, TENANT_A, run).status == "completed"
    result = erase_event(store, TENANT_A, person_id, end)
    erase_event(store, TENANT_A, note_id, end)
    assert result.failed_runs == {}
    assert ops.load_run(store, TENANT_A, run).status == "completed"
    completed = [e for e in store.streams.load(TENANT_A, run) if e.type == ev.RUN_COMPLETED]
    assert completed[0].payload["result"] is None and completed[0].payload["redacted"] is True
    assert find_text(store, marker) == []


def test_erase_refuses_bad_input_and_other_tenants_events_without_writing(
    store: Store, clock: ManualClock
) -> None:
    _, marker, person_id, _ = _setup(store, clock)
    before = find_text(store, marker)
    with pytest.raises(InvalidInput, match="not a UUID"):
        erase_event(store, "not-a-tenant", person_id, clock.now())
    with pytest.raises(InvalidInput, match="event id"):
        erase_event(store, TENANT_A, "", clock.now())
    with pytest.raises(EventNotFound, match=TENANT_B):
        erase_event(store, TENANT_B, person_id, clock.now())
    assert find_text(store, marker) == before


def test_no_raw_exception_text_is_stored(store: Store, clock: ManualClock) -> None:
    secret = f"SECRET-{uuid.uuid4().hex}"
    registry = WorkflowRegistry()

    def boom(ctx: object) -> None:
        raise ValueError(f"customer {secret} has no card")

    registry.register(
        define_workflow(
            name="raises",
            trigger=on_event("x.happened"),
            register=False,
            steps=lambda s: [
                s.mail_send(to="ops@example.com", subject="s", body="b"),
                s.retry(times=2, backoff="fixed", base="PT1S", do=[s.compute("a", boom)]),
            ],
        )
    )
    registry.register(
        define_workflow(
            name="bad-filter",
            trigger=on_event("x.happened", filter=lambda e: bool(1 / 0 or secret)),
            register=False,
            steps=lambda s: [s.return_(None)],
        )
    )
    now = clock.now()
    ops.ingest_domain_event(store, event("x.happened", {"tenantId": TENANT_A}), now, registry)
    resume_due(store, registry, now + timedelta(seconds=5))
    for attempt in range(6):
        moment = now + timedelta(hours=2 * attempt)
        dispatch_pending(
            store,
            lambda m=moment: m,
            _FailingMailer(secret),
            _NoHttp(),
            WebhookGuard(),
            mail_sender="noreply@example.com",
        )  # type: ignore[arg-type]
    types = [r["type"] for r in store.conn.execute("SELECT type FROM wf_events").fetchall()]
    assert ev.RUN_FAILED in types and ev.RETRY_SCHEDULED in types and ev.DISPATCH_FAILED in types
    assert find_text(store, secret) == []
    assert find_text(store, "has no card") == []
    assert find_text(store, "smtp said no") == []
    assert find_text(store, "division by zero") == []
    record(raw_error_leaks=0)


def _unused(_: datetime) -> None:  # keeps datetime imported for annotations above
    return None
