"""TriggerProjection and EventWakeup behind their SQS intake queues: a batch of
EventBridge events, each handled on its own, the failed ones reported as batch item
failures (so SQS redelivers only those, then dead-letters them); plus the heartbeats of
the scheduled functions and the X-Ray annotations."""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest
from workflow_runner import ManualClock
from workflow_runner.aws import observability
from workflow_runner.aws.inprocess import FakeLambdaContext
from workflow_runner.aws.template import Handler
from workflow_runner.errors import InvalidInput, TransientStoreError
from workflow_runner.ports import Runtime
from workflow_runner.store import Store

from tests.functions.helpers import OTHER_TENANT, TENANT, Emitted, load_event

Handlers = dict[str, Handler]
Read = Callable[[], Emitted]
ONBOARDING_RUN = "20674095-dda5-5811-b700-b57eb304d119"
ORDER_RUN = "fabc09bd-1cce-55f4-b55f-349508b70ba8"


def invoke(handlers: Handlers, name: str, event: Any) -> Any:
    return handlers[name](event, FakeLambdaContext())


def failed_ids(result: dict[str, Any]) -> list[str]:
    return [f["itemIdentifier"] for f in result["batchItemFailures"]]


def count(store: Store, table: str) -> int:
    row = store.conn.execute(f"SELECT count(*) AS n FROM {table}").fetchone()
    assert row is not None
    return int(row["n"])


def test_trigger_batch_reports_only_the_bad_records(
    handlers: Handlers, runtime: Runtime, store: Store, emitted: Read
) -> None:
    batch = load_event("trigger-projection-sqs.json")
    ids = [r["messageId"] for r in batch["Records"]]
    result = invoke(handlers, "TriggerProjectionFunction", batch)
    # 1: a valid signed-up event, 2: no tenant, 3: a type no workflow uses (ignored, so
    # done), 4: a body that is not JSON.
    assert failed_ids(result) == [ids[1], ids[3]]
    assert set(result) == {"batchItemFailures"}
    run = store.runs.get(TENANT, ONBOARDING_RUN)
    assert run is not None and run.status == "waiting"
    assert count(store, "inbox") == 1
    out = emitted()
    assert out.metric("RunsStarted") == 1
    assert out.metric("InvalidInput") == 2
    assert out.metric("IgnoredEvents") == 1


def test_trigger_batch_redelivery_starts_nothing_twice(
    handlers: Handlers, runtime: Runtime, store: Store
) -> None:
    batch = load_event("trigger-projection-sqs.json")
    batch["Records"] = batch["Records"][:1] * 2  # SQS may deliver a message twice
    assert failed_ids(invoke(handlers, "TriggerProjectionFunction", batch)) == []
    assert failed_ids(invoke(handlers, "TriggerProjectionFunction", batch)) == []
    assert count(store, "workflow_runs") == 1
    assert count(store, "inbox") == 1


def test_a_failing_record_is_reported_and_the_rest_of_the_batch_goes_on(
    handlers: Handlers, runtime: Runtime, store: Store, emitted: Read
) -> None:
    """The batch is one transaction; when it fails (after the one reconnect), each record
    is ingested on its own, and one that fails again is the only record reported."""
    batch = load_event("trigger-projection-sqs.json")
    first = batch["Records"][0]
    order = json.loads(first["body"]) | {"id": "order-event", "detail-type": "order.placed"}
    order["detail"] |= {"orderId": "o-1", "total": 10, "email": "o@example.com"}
    batch["Records"] = [first, {**first, "messageId": "m-order", "body": json.dumps(order)}]
    real_store = runtime.store
    calls = {"n": 0}

    def flaky() -> Store:
        calls["n"] += 1
        # The batch's try and its retry, then the first record's try and its retry.
        if calls["n"] <= 4:
            raise TransientStoreError("database error (08006): connection lost")
        return real_store()

    runtime.store = flaky  # type: ignore[method-assign]
    result = invoke(handlers, "TriggerProjectionFunction", batch)
    assert failed_ids(result) == [first["messageId"]]
    assert store.runs.get(TENANT, ONBOARDING_RUN) is None
    assert count(store, "workflow_runs") == 1  # the order run
    assert emitted().metric("IntakeRecordFailed") == 1


def test_a_batch_of_trigger_events_is_ingested_in_one_transaction(
    handlers: Handlers, runtime: Runtime, store: Store
) -> None:
    batch = load_event("trigger-projection-sqs.json")
    first = batch["Records"][0]
    order = json.loads(first["body"]) | {"id": "order-event", "detail-type": "order.placed"}
    order["detail"] |= {"orderId": "o-1", "total": 10, "email": "o@example.com"}
    batch["Records"] = [first, {**first, "messageId": "m-order", "body": json.dumps(order)}]
    assert failed_ids(invoke(handlers, "TriggerProjectionFunction", batch)) == []
    rows = store.conn.execute(
        "SELECT DISTINCT xid FROM wf_events WHERE type = 'workflow.run-started'"
    ).fetchall()
    assert count(store, "workflow_runs") == 2 and len(rows) == 1


def _deep_detail_body() -> str:
    """An event whose detail nests 900 levels: json.loads decodes it, storing it could not."""
    event = load_event("trigger-projection-user-signed-up.json")
    event["detail"]["deep"] = "DEEP"
    return json.dumps(event).replace('"DEEP"', "[" * 900 + "]" * 900)


@pytest.mark.parametrize(
    ("bad_body", "message"),
    [
        ("[" * 100_000 + "]" * 100_000, "is nested deeper than 100 levels (the limit)"),
        (_deep_detail_body(), "is nested deeper than 100 levels (the limit)"),
        (json.dumps({"blob": "x" * 300_000}), "is 300012 bytes, over the 262144-byte limit"),
    ],
    ids=["100000-levels", "900-levels-in-detail", "300-kb"],
)
def test_a_record_too_deep_or_too_large_fails_alone_as_invalid_input(
    handlers: Handlers, runtime: Runtime, store: Store, emitted: Read, bad_body: str, message: str
) -> None:
    """Reported as a bad record is (logged, counted InvalidInput, a batch item failure),
    not as a crash (IntakeRecordFailed); the two tenants' events around it are ingested,
    each into its own tenant, and it writes nothing."""
    batch = load_event("trigger-projection-sqs.json")
    first = batch["Records"][0]
    order = json.loads(first["body"]) | {"id": "order-event", "detail-type": "order.placed"}
    order["detail"] |= {
        "tenantId": OTHER_TENANT,
        "orderId": "o-1",
        "total": 10,
        "email": "o@example.com",
    }
    bad = {**first, "messageId": "m-bad", "body": bad_body}
    batch["Records"] = [first, bad, {**first, "messageId": "m-order", "body": json.dumps(order)}]
    emitted()

    result = invoke(handlers, "TriggerProjectionFunction", batch)

    assert failed_ids(result) == ["m-bad"]
    assert [r.workflow_name for r in store.runs.for_tenant(TENANT)] == ["user-onboarding"]
    assert [r.workflow_name for r in store.runs.for_tenant(OTHER_TENANT)] == ["order-approval"]
    assert count(store, "inbox") == 2 and count(store, "workflow_runs") == 2
    out = emitted()
    assert (out.metric("InvalidInput"), out.metric("IntakeRecordFailed")) == (1, 0)
    assert out.errors() == [f"invalid EventBridge event: SQS record body {message}"]


def test_a_wakeup_record_nested_100000_levels_deep_fails_alone_as_invalid_input(
    handlers: Handlers, runtime: Runtime, emitted: Read
) -> None:
    batch = load_event("event-wakeup-sqs.json")
    good = batch["Records"][0]
    batch["Records"] = [good, {**good, "messageId": "m-bad", "body": "[" * 100_000 + "]" * 100_000}]
    emitted()
    assert failed_ids(invoke(handlers, "EventWakeupFunction", batch)) == ["m-bad"]
    out = emitted()
    assert (out.metric("InvalidInput"), out.metric("IntakeRecordFailed")) == (1, 0)


def test_a_record_without_message_id_fails_the_whole_batch(
    handlers: Handlers, runtime: Runtime
) -> None:
    batch = load_event("trigger-projection-sqs.json")
    del batch["Records"][2]["messageId"]
    with pytest.raises(InvalidInput, match="messageId"):
        invoke(handlers, "TriggerProjectionFunction", batch)


def test_wakeup_batch_wakes_the_matched_run_and_reports_the_bad_record(
    handlers: Handlers, runtime: Runtime, store: Store, clock: ManualClock
) -> None:
    invoke(
        handlers, "TriggerProjectionFunction", load_event("trigger-projection-order-placed.json")
    )
    invoke(handlers, "PendingProjectionFunction", load_event("pending-projection-nudge.json"))
    clock.advance(timedelta(hours=1))
    batch = load_event("event-wakeup-sqs.json")
    result = invoke(handlers, "EventWakeupFunction", batch)
    assert failed_ids(result) == [batch["Records"][1]["messageId"]]
    (request,) = runtime.resume_queue.receive()  # type: ignore[attr-defined]
    assert (request.run_id, request.step_index) == (ORDER_RUN, 1)


# --- heartbeats ------------------------------------------------------------------------


def heartbeats(out: Emitted) -> list[str]:
    found = []
    for blob in out.metrics:
        (directive,) = blob["_aws"]["CloudWatchMetrics"]
        if [m["Name"] for m in directive["Metrics"]] == ["Heartbeat"]:
            assert directive["Dimensions"] == [["service", "function"]]
            assert blob["service"] == "workflow-runner"
            found.append(blob["function"])
    return found


@pytest.mark.parametrize(
    ("function", "event", "name"),
    [
        ("DueScanFunction", "due-scan-schedule.json", "DueScan"),
        ("PendingProjectionFunction", "pending-projection-schedule.json", "PendingProjection"),
        ("StepDispatcherFunction", "step-dispatcher-schedule.json", "StepDispatcher"),
    ],
)
def test_scheduled_functions_beat_when_they_complete(
    handlers: Handlers, runtime: Runtime, emitted: Read, function: str, event: str, name: str
) -> None:
    invoke(handlers, function, load_event(event))
    out = emitted()
    assert heartbeats(out) == [name]
    # The business metrics keep their own dimension set, which their alarms match.
    for blob in out.metrics:
        (directive,) = blob["_aws"]["CloudWatchMetrics"]
        if "Heartbeat" not in blob:
            assert directive["Dimensions"] == [["service"]]


@pytest.mark.parametrize(
    ("function", "event"),
    [
        ("DueScanFunction", "due-scan-schedule.json"),
        ("PendingProjectionFunction", "pending-projection-schedule.json"),
        ("StepDispatcherFunction", "step-dispatcher-schedule.json"),
    ],
)
def test_no_heartbeat_when_the_run_fails(
    handlers: Handlers, runtime: Runtime, emitted: Read, function: str, event: str
) -> None:
    def down() -> Store:
        raise TransientStoreError("database error (08006): connection refused")

    runtime.store = down  # type: ignore[method-assign]
    with pytest.raises(TransientStoreError):
        invoke(handlers, function, load_event(event))
    assert heartbeats(emitted()) == []


def test_step_dispatcher_reports_worker_failures_for_their_alarms(
    handlers: Handlers, runtime: Runtime, emitted: Read, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DeliveriesFailedAlarm and TasksFailedAlarm (and their persistent twins) watch
    DeliveriesFailed and TasksFailed with the dimension `service` alone; the worker that
    had failures still completed, so it beats."""
    from workflow_runner.engine.dispatcher import DeliveryOutcome, DispatchResult
    from workflow_runner.engine.tasks import TaskAttemptResult
    from workflow_runner.engine.worker import WorkResult

    def attempt(outcome: Any) -> TaskAttemptResult:
        return TaskAttemptResult(TENANT, ORDER_RUN, "t", "k", "task", 3, outcome, "Boom")

    failed = DeliveryOutcome(TENANT, "r", ORDER_RUN, "webhook", 5, "failed", 503)
    result = WorkResult(
        deliveries=DispatchResult([failed]),
        tasks=[attempt("failed"), attempt("retry"), attempt("completed")],
    )
    handler = inspect.unwrap(handlers["StepDispatcherFunction"])
    monkeypatch.setitem(handler.__globals__, "work", lambda *args, **kwargs: result)
    answer = invoke(handlers, "StepDispatcherFunction", load_event("step-dispatcher-schedule.json"))
    assert answer["failed"] == 1 and answer["tasks"]["failed"] == 1
    out = emitted()
    assert (out.metric("DeliveriesFailed"), out.metric("TasksFailed")) == (1, 1)
    assert (out.metric("TaskAttemptsFailed"), out.metric("TasksCompleted")) == (1, 1)
    for blob in out.metrics:
        if "DeliveriesFailed" in blob or "TasksFailed" in blob:
            assert blob["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [["service"]]
            assert blob["service"] == "workflow-runner"
    assert heartbeats(out) == ["StepDispatcher"]


# --- X-Ray annotations --------------------------------------------------------------------


class RecordingSubsegment(dict[str, Any]):
    def put_annotation(self, key: str, value: Any) -> None:
        self[key] = value

    def put_metadata(self, key: str, value: Any, namespace: str = "") -> None:
        pass


class RecordingProvider:
    """Stands in for the X-Ray provider: records subsegments and their annotations."""

    def __init__(self) -> None:
        self.segments: list[RecordingSubsegment] = []
        self._open: list[RecordingSubsegment] = [RecordingSubsegment(name="segment")]

    @contextmanager
    def in_subsegment(self, name: str) -> Iterator[RecordingSubsegment]:
        subsegment = RecordingSubsegment(name=name)
        self.segments.append(subsegment)
        self._open.append(subsegment)
        try:
            yield subsegment
        finally:
            self._open.pop()

    def put_annotation(self, key: str, value: Any) -> None:
        self._open[-1].put_annotation(key, value)


@pytest.fixture
def xray(monkeypatch: pytest.MonkeyPatch) -> RecordingProvider:
    provider = RecordingProvider()
    tracer = observability.tracer
    monkeypatch.setattr(tracer, "disabled", False)
    monkeypatch.setattr(tracer, "provider", provider)
    return provider


def test_resume_batch_annotates_each_request_with_tenant_and_run(xray: RecordingProvider) -> None:
    batch = load_event("resume-run-sqs.json")
    batch["Records"].append({**batch["Records"][0], "body": "not json"})
    observability.annotate_resume_batch(batch)
    requests = [s for s in xray.segments if s["name"] == "## resume request"]
    assert [(s["tenant_id"], s["run_id"]) for s in requests] == [
        (TENANT, ONBOARDING_RUN),
        (TENANT, ORDER_RUN),
    ]


def test_resume_batch_annotations_leave_a_body_nested_100000_levels_deep_to_the_handler(
    xray: RecordingProvider,
) -> None:
    """With tracing on, json.loads here raised RecursionError before the handler could
    report the message alone."""
    batch = load_event("resume-run-sqs.json")
    batch["Records"][1]["body"] = "[" * 100_000
    observability.annotate_resume_batch(batch)
    requests = [s for s in xray.segments if s["name"] == "## resume request"]
    assert [(s["tenant_id"], s["run_id"]) for s in requests] == [(TENANT, ONBOARDING_RUN)]


def test_intake_records_carry_tenant_event_and_run_annotations(
    handlers: Handlers, runtime: Runtime, xray: RecordingProvider
) -> None:
    batch = load_event("trigger-projection-sqs.json")
    batch["Records"] = batch["Records"][:1]
    invoke(handlers, "TriggerProjectionFunction", batch)
    (record,) = [s for s in xray.segments if s["name"] == "## intake record"]
    assert record["tenant_id"] == TENANT
    assert record["run_id"] == ONBOARDING_RUN
    assert record["event_id"] == json.loads(batch["Records"][0]["body"])["id"]


# --- dead letters, redriven -------------------------------------------------------------------


def test_a_dead_lettered_event_redriven_twice_starts_its_run_once(
    handlers: Handlers, runtime: Runtime, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The intake DLQ -> `wfr dlq redrive` -> intake queue -> TriggerProjection loop, with
    SQS in moto: the event keeps its id, so a second redrive of the same event is a no-op."""
    import boto3
    from moto import mock_aws
    from workflow_runner.aws.dlq import redrive

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with mock_aws():
        sqs = boto3.client("sqs", region_name="eu-central-1")
        dlq = sqs.create_queue(QueueName="trigger-dlq")["QueueUrl"]
        dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])
        policy = {"deadLetterTargetArn": dlq_arn["Attributes"]["QueueArn"], "maxReceiveCount": "5"}
        intake = sqs.create_queue(
            QueueName="trigger", Attributes={"RedrivePolicy": json.dumps(policy)}
        )["QueueUrl"]
        event = json.dumps(load_event("trigger-projection-user-signed-up.json"))
        for _ in range(2):  # dead-lettered twice (say, by two rule delivery failures)
            sqs.send_message(QueueUrl=dlq, MessageBody=event)
        assert redrive(sqs, dlq).moved == 2
        received = sqs.receive_message(QueueUrl=intake, MaxNumberOfMessages=10)["Messages"]
    batch = {
        "Records": [
            {"messageId": m["MessageId"], "receiptHandle": m["ReceiptHandle"], "body": m["Body"]}
            for m in received
        ]
    }
    assert failed_ids(invoke(handlers, "TriggerProjectionFunction", batch)) == []
    assert count(store, "workflow_runs") == 1
    assert count(store, "inbox") == 1
