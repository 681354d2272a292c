"""Every Lambda handler, invoked with the sample events in events/ against a real
database through the in-process runtime: outcomes, database state, metrics, and the
bad-input cases (nothing written, an error logged, a metric, and a raise or a batch
item failure so that the poison message ends in a DLQ)."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any, ClassVar

import psycopg
import pytest
from workflow_runner import ManualClock, define_workflow, on_event
from workflow_runner.aws.inprocess import FakeLambdaContext, build_inprocess_runtime
from workflow_runner.aws.template import Handler
from workflow_runner.definition import WorkflowDefinition, WorkflowRegistry
from workflow_runner.embedded import database_url
from workflow_runner.errors import InvalidInput, RunNotFound, TransientStoreError
from workflow_runner.ports import Runtime, set_runtime
from workflow_runner.settings import Settings
from workflow_runner.store import Store, connect

from tests.functions.helpers import OTHER_TENANT, TENANT, Emitted, load_event
from tests.support import nested
from tests.support import trigger as start_run

ONBOARDING_RUN = "20674095-dda5-5811-b700-b57eb304d119"
ORDER_RUN = "fabc09bd-1cce-55f4-b55f-349508b70ba8"

Handlers = dict[str, Handler]
Read = Callable[[], Emitted]


def count(store: Store, table: str) -> int:
    row = store.conn.execute(f"SELECT count(*) AS n FROM {table}").fetchone()
    assert row is not None
    return int(row["n"])


def run_status(store: Store, run_id: str, tenant: str = TENANT) -> str | None:
    row = store.runs.get(tenant, run_id)
    return row.status if row else None


def invoke(handlers: Handlers, name: str, event: Any) -> Any:
    return handlers[name](event, FakeLambdaContext())


def trigger(handlers: Handlers, name: str) -> Any:
    return invoke(handlers, "TriggerProjectionFunction", load_event(name))


def project(handlers: Handlers) -> Any:
    return invoke(
        handlers, "PendingProjectionFunction", load_event("pending-projection-nudge.json")
    )


# --- TriggerProjection ------------------------------------------------------------------


def test_trigger_projection_starts_user_onboarding(
    handlers: Handlers, runtime: Runtime, store: Store, emitted: Read
) -> None:
    result = trigger(handlers, "trigger-projection-user-signed-up.json")
    assert result["stored"] is True
    assert result["started"] == [
        {"runId": ONBOARDING_RUN, "workflow": "user-onboarding", "outcome": "suspended"}
    ]
    assert run_status(store, ONBOARDING_RUN) == "waiting"
    assert count(store, "inbox") == 1
    assert count(store, "dispatch_outbox") == 1  # the welcome mail, delivered after commit
    assert runtime.nudger.take() == (True, True)  # type: ignore[attr-defined]
    out = emitted()
    assert out.metric("RunsStarted") == 1 and out.metric("RunsFailed") == 0
    logged = [log for log in out.logs if log.get("message") == "event ingested"]
    assert logged, out.logs
    assert logged[0]["tenant_id"] == TENANT  # the correlation keys are on the line
    assert logged[0]["event_id"] == load_event("trigger-projection-user-signed-up.json")["id"]

    again = trigger(handlers, "trigger-projection-user-signed-up.json")  # redelivery
    assert again == {**again, "stored": False, "started": []}
    assert count(store, "workflow_runs") == 1


@pytest.mark.parametrize(
    ("name", "workflow", "outcome"),
    [
        ("trigger-projection-data-processed.json", "webhook-delivery", "suspended"),
        ("trigger-projection-order-placed.json", "order-approval", "suspended"),
        ("trigger-projection-inventory-changed.json", "inventory-sync", "suspended"),
        ("trigger-projection-batch-submitted.json", "batch-fulfilment", "suspended"),
    ],
)
def test_trigger_projection_sample_events(
    handlers: Handlers, runtime: Runtime, store: Store, name: str, workflow: str, outcome: str
) -> None:
    (started,) = trigger(handlers, name)["started"]
    assert (started["workflow"], started["outcome"]) == (workflow, outcome)
    assert run_status(store, started["runId"]) == (
        "completed" if outcome == "completed" else "waiting"
    )


def test_trigger_projection_ignores_types_no_workflow_uses(
    handlers: Handlers, runtime: Runtime, store: Store, emitted: Read
) -> None:
    result = trigger(handlers, "trigger-projection-unrouted-type.json")
    assert result["ignored"] is True
    assert count(store, "inbox") == 0
    assert emitted().metric("IgnoredEvents") == 1


BAD_EVENTS = [
    ("trigger-projection-bad-missing-tenant.json", "detail.tenantId: missing"),
    ("trigger-projection-bad-tenant-not-uuid.json", "is not a UUID"),
    ("trigger-projection-bad-string-detail.json", "got a string"),
    ("trigger-projection-bad-own-source.json", "engine's own"),
    ("trigger-projection-bad-missing-detail-type.json", "detail-type"),
]


@pytest.mark.parametrize(("name", "message"), BAD_EVENTS)
def test_trigger_projection_bad_input_raises_for_the_dlq_and_writes_nothing(
    handlers: Handlers, runtime: Runtime, store: Store, emitted: Read, name: str, message: str
) -> None:
    with pytest.raises(InvalidInput, match=message):
        trigger(handlers, name)
    for table in ("inbox", "tenants", "wf_events", "workflow_runs"):
        assert count(store, table) == 0
    out = emitted()
    assert out.metric("InvalidInput") == 1
    assert any(message in error for error in out.errors())


def test_trigger_projection_oversize_event(
    handlers: Handlers, runtime: Runtime, store: Store, emitted: Read
) -> None:
    event = load_event("trigger-projection-user-signed-up.json")
    event["detail"]["padding"] = "x" * (256 * 1024)
    with pytest.raises(InvalidInput, match="byte limit"):
        invoke(handlers, "TriggerProjectionFunction", event)
    assert count(store, "inbox") == 0
    assert emitted().metric("InvalidInput") == 1


def test_trigger_projection_retries_once_on_a_fresh_connection(
    handlers: Handlers, store: Store, clock: ManualClock, db_url: str
) -> None:
    opened: list[Store] = []

    def reconnect() -> None:
        opened[-1].close()

    def fresh() -> Store:
        if not opened or opened[-1].closed:
            opened.append(connect(db_url))
            if len(opened) == 1:  # the first connection dies as in a failover
                opened[0].conn.close()
        return opened[-1]

    rt = build_inprocess_runtime(fresh, clock, Settings(database_url=db_url))
    rt.reconnect = reconnect
    set_runtime(rt)
    try:
        result = trigger(handlers, "trigger-projection-order-placed.json")
    finally:
        set_runtime(None)
        for s in opened:
            s.close()
    assert result["started"][0]["outcome"] == "suspended"
    assert len(opened) == 2


# --- PendingProjection -----------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["pending-projection-nudge.json", "pending-projection-schedule.json"]
)
def test_pending_projection_catches_up(
    handlers: Handlers, runtime: Runtime, store: Store, emitted: Read, name: str
) -> None:
    trigger(handlers, "trigger-projection-user-signed-up.json")
    result = invoke(handlers, "PendingProjectionFunction", load_event(name))
    assert result["applied"] >= 2
    (row,) = store.pending.for_tenant(TENANT)
    assert (row.run_id, row.step_index) == (ONBOARDING_RUN, 1)
    assert emitted().metric("ProjectionEventsApplied") == result["applied"]
    assert invoke(handlers, "PendingProjectionFunction", load_event(name))["applied"] == 0


def test_pending_projection_sends_a_timer_due_before_the_next_tick_at_once(
    handlers: Handlers, runtime: Runtime, store: Store
) -> None:
    """A 30 s retry backoff must not wait for the next minute tick: the projection
    leases the row and sends it delayed to its second."""
    trigger(handlers, "trigger-projection-inventory-changed.json")
    result = project(handlers)
    assert (result["dueSoon"], result["enqueued"]) == (1, 1)
    (request,) = runtime.resume_queue.sent  # type: ignore[attr-defined]
    assert request.delay_seconds == 30
    (row,) = store.pending.for_tenant(TENANT)
    assert row.leased_until is not None  # the next due scan will not send it again


def test_pending_projection_leaves_far_timers_to_the_due_scan(
    handlers: Handlers, runtime: Runtime, store: Store
) -> None:
    trigger(handlers, "trigger-projection-user-signed-up.json")  # waits a day
    result = project(handlers)
    assert (result["dueSoon"], result["enqueued"]) == (0, 0)
    assert runtime.resume_queue.sent == []  # type: ignore[attr-defined]


def test_pending_projection_rejects_a_non_object(handlers: Handlers, runtime: Runtime) -> None:
    with pytest.raises(InvalidInput, match="pending projection input"):
        invoke(handlers, "PendingProjectionFunction", ["not", "an", "object"])


# --- EventWakeup -----------------------------------------------------------------------


def test_event_wakeup_enqueues_the_matched_run_at_once(
    handlers: Handlers, runtime: Runtime, store: Store, emitted: Read, clock: ManualClock
) -> None:
    trigger(handlers, "trigger-projection-order-placed.json")
    project(handlers)
    clock.advance(timedelta(hours=1))
    result = invoke(handlers, "EventWakeupFunction", load_event("event-wakeup-order-approved.json"))
    assert result["woken"] == [{"runId": ORDER_RUN, "stepIndex": 1}]
    assert result["enqueued"] == 1
    (request,) = runtime.resume_queue.receive()  # type: ignore[attr-defined]
    assert (request.run_id, request.step_index, request.delay_seconds) == (ORDER_RUN, 1, 0)
    (row,) = store.pending.for_tenant(TENANT)
    assert row.awaited_event_id == load_event("event-wakeup-order-approved.json")["id"]
    assert row.leased_until is not None
    assert emitted().metric("Wakeups") == 1


def test_event_wakeup_ignores_unawaited_types_and_rejects_bad_tenants(
    handlers: Handlers, runtime: Runtime, store: Store, emitted: Read
) -> None:
    assert invoke(handlers, "EventWakeupFunction", load_event("event-wakeup-unrouted-type.json"))[
        "ignored"
    ]
    with pytest.raises(InvalidInput, match="tenant id must be a UUID string"):
        invoke(
            handlers, "EventWakeupFunction", load_event("event-wakeup-bad-tenant-not-string.json")
        )
    assert count(store, "inbox") == 0
    out = emitted()
    assert (out.metric("IgnoredEvents"), out.metric("InvalidInput")) == (1, 1)


# --- DueScan ----------------------------------------------------------------------------


def test_due_scan_enqueues_due_runs_with_their_delay(
    handlers: Handlers, runtime: Runtime, store: Store, emitted: Read, clock: ManualClock
) -> None:
    trigger(handlers, "trigger-projection-user-signed-up.json")
    project(handlers)
    clock.advance(timedelta(days=1, seconds=-20))  # 20 s before the wait ends
    result = invoke(handlers, "DueScanFunction", load_event("due-scan-schedule.json"))
    assert (result["leased"], result["enqueued"], result["drained"]) == (1, 1, True)
    queue = runtime.resume_queue
    assert queue.receive() == []  # type: ignore[attr-defined]
    clock.advance(timedelta(seconds=20))
    (request,) = queue.receive()  # type: ignore[attr-defined]
    assert (request.run_id, request.step_index, request.delay_seconds) == (ONBOARDING_RUN, 1, 20)
    assert emitted().metric("DueRows") == 1


def test_due_scan_holds_a_tenant_to_tenant_max_in_flight(
    handlers: Handlers, store: Store, db_url: str, emitted: Read, clock: ManualClock
) -> None:
    rt = build_inprocess_runtime(
        store, clock, Settings(database_url=db_url, tenant_max_in_flight=1)
    )
    set_runtime(rt)
    try:
        for user in ("active-1", "active-2"):
            detail = {**load_event("trigger-projection-user-signed-up.json")["detail"]}
            detail["userId"] = user
            event = {**load_event("trigger-projection-user-signed-up.json"), "detail": detail}
            invoke(handlers, "TriggerProjectionFunction", {**event, "id": f"signup-{user}"})
        project(handlers)
        clock.advance(timedelta(days=1))  # both waits are due
        result = invoke(handlers, "DueScanFunction", load_event("due-scan-schedule.json"))
    finally:
        set_runtime(None)
    # One sent; the other waits for room. The operator's cap is not a missed backlog.
    assert (result["leased"], result["cappedTenants"], result["drained"]) == (1, 1, True)
    out = emitted()
    assert (out.metric("DueTenantsCapped"), out.metric("DueBacklogLeft")) == (1, 0)


# --- ResumeRun ---------------------------------------------------------------------------


def waiting_order_approved(handlers: Handlers, clock: ManualClock) -> None:
    trigger(handlers, "trigger-projection-order-placed.json")
    project(handlers)
    clock.advance(timedelta(hours=1))
    invoke(handlers, "EventWakeupFunction", load_event("event-wakeup-order-approved.json"))


def test_resume_run_direct_invoke_returns_the_outcome(
    handlers: Handlers, runtime: Runtime, store: Store, emitted: Read, clock: ManualClock
) -> None:
    waiting_order_approved(handlers, clock)
    emitted()
    result = invoke(handlers, "ResumeRunFunction", load_event("resume-run.json"))
    assert result["outcome"] == "completed"
    assert (result["tenantId"], result["runId"], result["stepIndex"]) == (TENANT, ORDER_RUN, 1)
    assert run_status(store, ORDER_RUN) == "completed"
    out = emitted()
    assert (out.metric("RunsResumed"), out.metric("RunsCompleted")) == (1, 1)
    assert out.metric("ResumeLagSeconds") == 0  # woken now, resumed now
    again = invoke(handlers, "ResumeRunFunction", load_event("resume-run.json"))
    assert again["outcome"] == "already-resumed"


def test_resume_run_force_moves_a_wait_on_early(
    handlers: Handlers, runtime: Runtime, store: Store
) -> None:
    trigger(handlers, "trigger-projection-user-signed-up.json")
    plain = load_event("resume-run-force.json")
    del plain["force"]
    assert invoke(handlers, "ResumeRunFunction", plain)["outcome"] == "not-due"
    result = invoke(handlers, "ResumeRunFunction", load_event("resume-run-force.json"))
    assert (result["outcome"], result["suspendedAt"]) == ("suspended", 4)


def test_resume_run_unknown_or_foreign_run_is_a_clear_error(
    handlers: Handlers, runtime: Runtime, store: Store, clock: ManualClock, emitted: Read
) -> None:
    with pytest.raises(RunNotFound, match="not found for tenant"):
        invoke(handlers, "ResumeRunFunction", load_event("resume-run-unknown-run.json"))
    out = emitted()
    assert out.metric("RunNotFound") == 1 and any("not found" in e for e in out.errors())
    waiting_order_approved(handlers, clock)
    foreign = {**load_event("resume-run.json"), "tenantId": OTHER_TENANT}
    with pytest.raises(RunNotFound, match=OTHER_TENANT):
        invoke(handlers, "ResumeRunFunction", foreign)
    assert run_status(store, ORDER_RUN) == "waiting"


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (load_event("resume-run-bad-run-id.json"), "runId"),
        ({"tenantId": TENANT, "runId": ORDER_RUN}, "stepIndex"),
        ({"tenantId": TENANT, "runId": ORDER_RUN, "stepIndex": "1"}, "stepIndex"),
        ({"tenantId": TENANT, "runId": ORDER_RUN, "stepIndex": -1}, "stepIndex"),
        ({"tenantId": TENANT, "runId": ORDER_RUN, "stepIndex": 1, "extra": 1}, "extra"),
        ("resume please", "resume request"),
    ],
)
def test_resume_run_bad_direct_input(
    handlers: Handlers, runtime: Runtime, store: Store, emitted: Read, payload: Any, message: str
) -> None:
    with pytest.raises(InvalidInput, match=message):
        invoke(handlers, "ResumeRunFunction", payload)
    assert count(store, "wf_events") == 0
    assert emitted().metric("InvalidInput") == 1


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (nested(100_000), "resume request is nested deeper than 100 levels (the limit)"),
        (
            load_event("resume-run-force.json") | {"force": nested(900)},
            "resume request is nested deeper than 100 levels (the limit)",
        ),
        (
            load_event("resume-run-force.json") | {"note": "x" * 300_000},
            "resume request is 300135 bytes, over the 262144-byte limit",
        ),
    ],
    ids=["100000-levels", "900-levels-in-force", "300-kb"],
)
def test_resume_run_direct_input_too_deep_or_too_large_is_refused_naming_the_limit(
    handlers: Handlers, runtime: Runtime, store: Store, emitted: Read, payload: Any, message: str
) -> None:
    """The Lambda runtime hands the invoke's payload over decoded: its depth and size are
    checked before the model (or anything else) walks it."""
    trigger(handlers, "trigger-projection-user-signed-up.json")
    before = count(store, "wf_events")
    emitted()
    with pytest.raises(InvalidInput) as refused:
        invoke(handlers, "ResumeRunFunction", payload)
    assert str(refused.value) == message
    assert count(store, "wf_events") == before
    assert emitted().metric("InvalidInput") == 1


def test_resume_run_sqs_reports_a_message_nested_100000_levels_deep_alone(
    handlers: Handlers, runtime: Runtime, store: Store, clock: ManualClock, emitted: Read
) -> None:
    """json.loads raised RecursionError out of the handler: the whole batch failed, and
    the good messages in it with it, until the queue dead-lettered them."""
    trigger(handlers, "trigger-projection-user-signed-up.json")
    clock.advance(timedelta(days=1))
    event = load_event("resume-run-sqs.json")
    good = event["Records"][0]
    event["Records"] = [good, {**good, "messageId": "m-deep", "body": "[" * 100_000}]
    emitted()

    response = invoke(handlers, "ResumeRunFunction", event)

    assert response == {"batchItemFailures": [{"itemIdentifier": "m-deep"}]}
    assert store.streams.load(TENANT, ONBOARDING_RUN)[-1].payload["stepIndex"] == 4
    out = emitted()
    assert out.metric("InvalidInput") == 1
    assert out.errors() == [
        "invalid resume message: resume message is nested deeper than 100 levels (the limit)"
    ]


def test_resume_run_sqs_batch(
    handlers: Handlers, runtime: Runtime, store: Store, clock: ManualClock
) -> None:
    trigger(handlers, "trigger-projection-user-signed-up.json")
    waiting_order_approved(handlers, clock)
    clock.advance(timedelta(days=1))
    response = invoke(handlers, "ResumeRunFunction", load_event("resume-run-sqs.json"))
    assert response == {"batchItemFailures": []}
    assert run_status(store, ORDER_RUN) == "completed"
    assert store.streams.load(TENANT, ONBOARDING_RUN)[-1].payload["stepIndex"] == 4


def test_resume_run_sqs_reports_poison_messages_as_batch_item_failures(
    handlers: Handlers, runtime: Runtime, store: Store, clock: ManualClock, emitted: Read
) -> None:
    trigger(handlers, "trigger-projection-user-signed-up.json")
    clock.advance(timedelta(days=1))
    before = len(store.streams.load(TENANT, ONBOARDING_RUN))
    response = invoke(handlers, "ResumeRunFunction", load_event("resume-run-sqs-bad-messages.json"))
    failed = {f["itemIdentifier"][-1] for f in response["batchItemFailures"]}
    assert failed == {"2", "3", "4"}  # not JSON, not a UUID, unknown run
    # Only record 1 wrote: its run resumed and suspended again; nothing else started.
    assert len(store.streams.load(TENANT, ONBOARDING_RUN)) == before + 2
    assert count(store, "workflow_runs") == 1
    assert emitted().metric("InvalidInput") == 2  # records 2 and 3; 4 fails differently


def test_resume_run_requeues_a_request_that_arrived_early(
    handlers: Handlers, runtime: Runtime, store: Store, clock: ManualClock
) -> None:
    trigger(handlers, "trigger-projection-user-signed-up.json")
    clock.advance(timedelta(days=1, seconds=-30))
    event = load_event("resume-run-sqs.json")
    event["Records"] = event["Records"][:1]
    assert invoke(handlers, "ResumeRunFunction", event) == {"batchItemFailures": []}
    (request,) = runtime.resume_queue.sent  # type: ignore[attr-defined]
    assert (request.run_id, request.delay_seconds) == (ONBOARDING_RUN, 30)
    assert run_status(store, ONBOARDING_RUN) == "waiting"


def test_resume_run_requeues_a_duplicated_early_request_once(
    handlers: Handlers, runtime: Runtime, store: Store, clock: ManualClock
) -> None:
    """SQS may deliver a message twice; requeueing each copy would multiply it."""
    trigger(handlers, "trigger-projection-user-signed-up.json")
    clock.advance(timedelta(days=1, seconds=-30))
    event = load_event("resume-run-sqs.json")
    first = event["Records"][0]
    event["Records"] = [first, {**first, "messageId": first["messageId"] + "-again"}]
    assert invoke(handlers, "ResumeRunFunction", event) == {"batchItemFailures": []}
    (request,) = runtime.resume_queue.sent  # type: ignore[attr-defined]
    assert (request.run_id, request.delay_seconds) == (ONBOARDING_RUN, 30)


# --- StepDispatcher ---------------------------------------------------------------------


@pytest.mark.parametrize("name", ["step-dispatcher.json", "step-dispatcher-schedule.json"])
def test_step_dispatcher_delivers_requested_mail(
    handlers: Handlers, runtime: Runtime, store: Store, emitted: Read, name: str
) -> None:
    trigger(handlers, "trigger-projection-user-signed-up.json")
    result = invoke(handlers, "StepDispatcherFunction", load_event(name))
    assert (result["dispatched"], result["failed"], result["drained"]) == (1, 0, True)
    (mail,) = runtime.mailer.sent  # type: ignore[attr-defined]
    assert (mail.sender, mail.to, mail.subject) == (
        "noreply@example.com",
        ("ada@example.com",),
        "Welcome!",
    )
    row = store.conn.execute("SELECT status, request FROM dispatch_outbox").fetchone()
    assert row == {"status": "dispatched", "request": None}
    assert emitted().metric("DispatchOutcomeDispatched") == 1


# --- Migrate ----------------------------------------------------------------------------


class _CfnResponses(http.server.BaseHTTPRequestHandler):
    received: ClassVar[list[dict[str, Any]]] = []

    def do_PUT(self) -> None:
        body = self.rfile.read(int(self.headers["content-length"]))
        _CfnResponses.received.append(json.loads(body))
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def response_url() -> Iterator[str]:
    _CfnResponses.received = []
    srv = http.server.HTTPServer(("127.0.0.1", 0), _CfnResponses)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}/presigned?sig=x"
    finally:
        srv.shutdown()
        srv.server_close()


@pytest.fixture
def empty_database(pg_server_url: str) -> Iterator[str]:
    name = "wfr_migrate_test"
    with psycopg.connect(pg_server_url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield database_url(pg_server_url, name)
    finally:
        with psycopg.connect(pg_server_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def cfn(name: str, url: str) -> dict[str, Any]:
    return {**load_event(name), "ResponseURL": url}


def test_migrate_create_applies_migrations_and_reports_success(
    handlers: Handlers, clock: ManualClock, response_url: str, empty_database: str
) -> None:
    store = connect(empty_database)
    set_runtime(build_inprocess_runtime(store, clock, Settings(database_url=empty_database)))
    try:
        result = invoke(handlers, "MigrateFunction", cfn("migrate-create.json", response_url))
        assert result["status"] == "SUCCESS" and result["applied"][0] == "0001_initial"
        row = store.conn.execute("SELECT count(*) AS n FROM schema_migrations").fetchone()
        assert row is not None and row["n"] == len(result["applied"])
        # Update on the next deploy: idempotent, nothing left to apply.
        update = invoke(handlers, "MigrateFunction", cfn("migrate-update.json", response_url))
        assert update == {
            "status": "SUCCESS",
            "applied": [],
            "waitingRuns": "0 waiting run(s): 0 resume on their own definition, "
            "0 on one whose shape agrees, 0 stay on a kept version, 0 would fail",
        }
    finally:
        set_runtime(None)
        store.close()
    first, second = _CfnResponses.received
    assert (first["Status"], first["PhysicalResourceId"]) == ("SUCCESS", "workflow-runner-schema")
    assert first["Data"]["Applied"].startswith("0001_initial")
    assert first["RequestId"] == load_event("migrate-create.json")["RequestId"]
    assert first["LogicalResourceId"] == "SchemaMigration"
    assert second["Status"] == "SUCCESS"


def _waiting(first: str) -> WorkflowDefinition:
    return define_workflow(
        name="deploy-check",
        trigger=on_event("deploy.check"),
        idempotency_key=lambda event: event.payload["id"],
        steps=lambda s: [
            s.wait(for_="P1D") if first == "wait" else s.compute("first", lambda ctx: 1),
            s.mail_send(to="ops@example.com", subject="x", body="-"),
        ],
        register=False,
    )


def _registry_of(definition: WorkflowDefinition) -> WorkflowRegistry:
    registry = WorkflowRegistry()
    registry.register(definition)
    return registry


@pytest.mark.parametrize(
    ("policy", "status"), [("warn", "SUCCESS"), ("fail", "FAILED")], ids=["warn", "fail"]
)
def test_migrate_judges_the_waiting_runs_and_the_policy_decides_the_deploy(
    handlers: Handlers,
    clock: ManualClock,
    response_url: str,
    db_url: str,
    store: Store,
    emitted: Read,
    policy: str,
    status: str,
) -> None:
    """StrandedRunsPolicy: a deploy whose code would fail waiting runs (a structural edit
    where they wait) is reported, and with `fail` answered FAILED: CloudFormation rolls
    it back before the functions that depend on the resource change."""
    start_run(store, _registry_of(_waiting("wait")), "deploy.check", {"id": "a"}, clock.now())
    settings = Settings(database_url=db_url, stranded_runs_policy=policy)  # type: ignore[arg-type]
    runtime = build_inprocess_runtime(store, clock, settings, registry=_registry_of(_waiting("x")))
    set_runtime(runtime)
    try:
        result = invoke(handlers, "MigrateFunction", cfn("migrate-update.json", response_url))
    finally:
        set_runtime(None)
    (response,) = _CfnResponses.received
    assert (result["status"], response["Status"]) == (status, status)
    report = response["Reason"] if status == "FAILED" else response["Data"]["WaitingRuns"]
    assert (
        "1 waiting run(s): 0 resume on their own definition, 0 on one whose shape agrees, "
        "0 stay on a kept version, 1 would fail"
    ) in report
    assert (
        "deploy-check v1: 1 run(s) would fail; at step 0 (wait): v1: step 0 (wait): wait → compute"
    ) in report
    assert emitted().metric("StrandedRuns") == 1


def test_migrate_delete_succeeds_without_the_database(
    handlers: Handlers, clock: ManualClock, response_url: str
) -> None:
    def no_database() -> Store:
        raise AssertionError("Delete must not touch the database")

    set_runtime(build_inprocess_runtime(no_database, clock))
    try:
        result = invoke(handlers, "MigrateFunction", cfn("migrate-delete.json", response_url))
    finally:
        set_runtime(None)
    assert result["status"] == "SUCCESS"
    assert [r["Status"] for r in _CfnResponses.received] == ["SUCCESS"]


def test_migrate_failure_is_reported_to_cloudformation(
    handlers: Handlers, clock: ManualClock, response_url: str, emitted: Read
) -> None:
    def unreachable() -> Store:
        raise TransientStoreError("database error (08006): connection refused")

    set_runtime(build_inprocess_runtime(unreachable, clock))
    try:
        result = invoke(handlers, "MigrateFunction", cfn("migrate-create.json", response_url))
    finally:
        set_runtime(None)
    assert result["status"] == "FAILED"
    (response,) = _CfnResponses.received
    assert response["Status"] == "FAILED" and "connection refused" in response["Reason"]
    assert emitted().metric("MigrationFailed") == 1


def test_migrate_bad_request_is_answered_failed(
    handlers: Handlers, runtime: Runtime, response_url: str, emitted: Read
) -> None:
    """A malformed request is still answered (CloudFormation would otherwise wait for the
    ServiceTimeout), FAILED with the reason, and nothing is applied."""
    result = invoke(handlers, "MigrateFunction", cfn("migrate-bad-request-type.json", response_url))
    assert result["status"] == "FAILED"
    (response,) = _CfnResponses.received
    assert response["Status"] == "FAILED" and "RequestType" in response["Reason"]
    assert response["RequestId"] == load_event("migrate-bad-request-type.json")["RequestId"]
    assert emitted().metric("InvalidInput") == 1
