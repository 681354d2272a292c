"""Kept function versions (issue 32, item 2): ResumeRun and StepDispatcher register the
definitions their code has under their qualified ARN at a container's start, and hand a
run whose definition the live code lacks to the version that has it — its passes
(ResumeRun) and its tasks (StepDispatcher) — or fail it loud when that version is gone.

Most tests put an in-process double of the Lambda service between the versions:
invoking a version's ARN runs the real handler on a runtime whose registry is that
version's code. The last ones deploy onto moto's Lambda instead (published versions, the
`live` alias, real boto3 invokes by qualified ARN, deleted versions, pruning); moto
cannot run a function without Docker, so only the code a version runs is in-process
there. The boto3 request itself is checked with botocore's Stubber.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any, ClassVar

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.response import StreamingBody
from botocore.stub import Stubber
from workflow_runner import Event, ManualClock, RetryPolicy, Steps, define_workflow, on_event
from workflow_runner.aws import lambda_support, versions
from workflow_runner.aws.inprocess import (
    FakeLambdaContext,
    InMemoryResumeQueue,
    build_inprocess_runtime,
)
from workflow_runner.aws.template import Handler
from workflow_runner.aws.versions import KeptVersionForwarder, LambdaInvoker, qualified_arn
from workflow_runner.definition import WorkflowDefinition, WorkflowRegistry
from workflow_runner.definition.hosts import RESUME_RUN, STEP_DISPATCHER, register_hosts
from workflow_runner.engine.resume import ResumeRequestItem
from workflow_runner.errors import ForwardFailed, HostGone
from workflow_runner.ports import ResumeRequest, Runtime, installed_runtime, set_runtime
from workflow_runner.settings import Settings
from workflow_runner.store import Store

from tests.functions.helpers import TENANT
from tests.support import fake_aws, moto_function, moto_publish, trigger

Handlers = dict[str, Handler]
FUNCTIONS = "arn:aws:lambda:eu-central-1:123456789012:function:wfr"
RESUME_V3, RESUME_V4 = f"{FUNCTIONS}-ResumeRun:3", f"{FUNCTIONS}-ResumeRun:4"
DISPATCHER_V3, DISPATCHER_V4 = f"{FUNCTIONS}-StepDispatcher:3", f"{FUNCTIONS}-StepDispatcher:4"


def trial(structure: str, code: str) -> WorkflowDefinition:
    """v1 waits a day and returns which code ran; "moved" puts a step before the wait."""
    moved = [lambda s: s.compute("plan", lambda ctx: "pro")] if structure == "moved" else []
    return define_workflow(
        name="kept-trial",
        trigger=on_event("kept.trial"),
        idempotency_key=Event.payload["id"],
        steps=lambda s: [
            *(step(s) for step in moved),
            s.wait(for_="P1D"),
            s.compute("code", lambda ctx: code),
            s.return_({"code": Steps["code"]}),
        ],
        register=False,
    )


def charging(structure: str, fn: Any) -> WorkflowDefinition:
    moved = [lambda s: s.compute("amount", lambda ctx: 42)] if structure == "moved" else []
    return define_workflow(
        name="kept-charge",
        trigger=on_event("kept.charge"),
        idempotency_key=Event.payload["id"],
        steps=lambda s: [
            *(step(s) for step in moved),
            s.task("charge", fn, retry=RetryPolicy(max_attempts=2, base="PT1M")),
            s.return_({"charge": Steps["charge"]}),
        ],
        register=False,
    )


def old_charge(ctx: Any) -> dict[str, str]:
    return {"by": "old code"}


def new_charge(ctx: Any) -> dict[str, str]:
    return {"by": "new code"}


def registry_of(*definitions: WorkflowDefinition) -> WorkflowRegistry:
    registry = WorkflowRegistry()
    for definition in definitions:
        registry.register(definition)
    return registry


def context(arn: str, version: str | None = None) -> FakeLambdaContext:
    """The context of a container of version `version` (default: the one `arn` names),
    invoked through `arn` (a version's or an alias's ARN)."""
    version = version or arn.rsplit(":", 1)[1]
    return FakeLambdaContext(function_version=version, invoked_function_arn=arn)


class LambdaService:
    """A Lambda client double: invoking a version's qualified ARN runs that function's
    handler on the version's own runtime (its code: a registry); an unknown ARN is a
    deleted version (ResourceNotFoundException)."""

    def __init__(self, handlers: Handlers) -> None:
        self._handlers = handlers
        self.versions: dict[str, tuple[str, Runtime]] = {}
        self.calls: list[tuple[str, Any]] = []

    def publish(self, arn: str, function: str, runtime: Runtime) -> None:
        self.versions[arn] = (function, runtime)

    def invoke(self, FunctionName: str, InvocationType: str, Payload: bytes) -> dict[str, Any]:
        assert InvocationType == "RequestResponse"
        event = json.loads(Payload)
        self.calls.append((FunctionName, event))
        if FunctionName not in self.versions:
            error = {"Code": "ResourceNotFoundException", "Message": "Function not found"}
            raise ClientError({"Error": error}, "Invoke")
        function, runtime = self.versions[FunctionName]
        previous = installed_runtime()
        set_runtime(runtime)
        try:
            answer = self._handlers[function](event, context(FunctionName))
        except Exception as error:
            failed = json.dumps({"errorType": type(error).__name__}).encode()
            return {"StatusCode": 200, "FunctionError": "Unhandled", "Payload": io.BytesIO(failed)}
        finally:
            set_runtime(previous)
        return {"StatusCode": 200, "Payload": io.BytesIO(json.dumps(answer).encode())}


@pytest.fixture(autouse=True)
def fresh_containers() -> Iterator[None]:
    """Each test starts with containers that have not registered yet."""
    lambda_support._hosting.clear()
    versions.remember_own_arn(None)
    yield
    lambda_support._hosting.clear()
    versions.remember_own_arn(None)


class Stack:
    """A deployment in one process: its versions' runtimes on the test's database, the
    Lambda service double between them, and helpers to start runs and call handlers."""

    def __init__(self, handlers: Handlers, store: Store, clock: ManualClock, db_url: str) -> None:
        self.handlers, self.store, self.clock, self.db_url = handlers, store, clock, db_url
        self.service = LambdaService(handlers)

    def version(self, *code: WorkflowDefinition, hands_on: bool = True) -> Runtime:
        """The runtime of one deployed version: its code, and (`hands_on`) the invoker
        through which it hands work to kept versions."""
        settings = Settings(database_url=self.db_url, mail_sender="noreply@example.com")
        runtime = build_inprocess_runtime(
            self.store, self.clock, settings, registry=registry_of(*code)
        )
        if hands_on:
            runtime.invoker = LambdaInvoker(self.service)
        return runtime

    def call(self, runtime: Runtime, function: str, event: Any, arn: str) -> Any:
        """Invoke `function`'s handler in a container of version `arn` on `runtime`."""
        set_runtime(runtime)
        try:
            return self.handlers[function](event, context(arn))
        finally:
            set_runtime(None)

    def start_on_v3(self, definition: WorkflowDefinition, event_type: str) -> str:
        """A run started on v3's code, which both functions' v3 registered."""
        now = self.clock.now()
        started = trigger(
            self.store, registry_of(definition), event_type, {"id": "r1"}, now, tenant=TENANT
        )
        register_hosts(self.store, [definition], RESUME_RUN, RESUME_V3, now)
        register_hosts(self.store, [definition], STEP_DISPATCHER, DISPATCHER_V3, now)
        return started.started[0].run_id

    def last_event(self, run_id: str) -> Any:
        return self.store.streams.load(TENANT, run_id)[-1]

    def registered(self) -> set[str]:
        return {r.function_arn for r in self.store.hosts.all()}


@pytest.fixture
def stack(handlers: Handlers, store: Store, clock: ManualClock, db_url: str) -> Stack:
    return Stack(handlers, store, clock, db_url)


def sqs_batch(*requests: ResumeRequest) -> dict[str, Any]:
    return InMemoryResumeQueue.sqs_event(requests)


def assert_failed_loud(stack: Stack, run_id: str) -> str:
    """The run failed with workflow_definition_changed; its error text."""
    failed = stack.last_event(run_id)
    assert (failed.type, failed.payload["reason"]) == (
        "workflow.run-failed",
        "workflow_definition_changed",
    )
    return str(failed.payload["error"])


# --- registration ------------------------------------------------------------------------


def test_a_container_registers_its_definitions_under_its_qualified_version_once(
    stack: Stack,
) -> None:
    v3 = stack.version(trial("kept", "old"), charging("kept", old_charge), hands_on=False)
    set_runtime(v3)
    try:
        for _ in range(2):  # invoked through the alias: its version is in the context
            live_alias = context(f"{FUNCTIONS}-ResumeRun:live", version="3")
            stack.handlers["ResumeRunFunction"](sqs_batch(), live_alias)
        assert versions.own_arn() == RESUME_V3  # sent as forwardedFrom when it hands on
    finally:
        set_runtime(None)
    stack.call(v3, "StepDispatcherFunction", {"source": "nudge"}, DISPATCHER_V3)
    rows = {(r.workflow_name, r.function_role, r.function_arn) for r in stack.store.hosts.all()}
    assert rows == {
        ("kept-trial", "resume-run", RESUME_V3),
        ("kept-charge", "resume-run", RESUME_V3),
        ("kept-trial", "step-dispatcher", DISPATCHER_V3),
        ("kept-charge", "step-dispatcher", DISPATCHER_V3),
    }


def test_latest_is_not_a_published_version_and_registers_nothing(
    handlers: Handlers, runtime: Runtime, store: Store
) -> None:
    handlers["ResumeRunFunction"](sqs_batch(), FakeLambdaContext())  # $LATEST
    assert store.hosts.all() == []
    assert qualified_arn(f"{FUNCTIONS}-ResumeRun", "$LATEST") is None
    assert qualified_arn(f"{FUNCTIONS}-ResumeRun:live", "12") == f"{FUNCTIONS}-ResumeRun:12"
    assert qualified_arn(f"{FUNCTIONS}-ResumeRun", "12") == f"{FUNCTIONS}-ResumeRun:12"


# --- ResumeRun hands a run to its kept version ----------------------------------------------
# v3 ran the old code; v4 (live) put a step before the wait the run stands at.

OLD_TRIAL, NEW_TRIAL = trial("kept", "old"), trial("moved", "new")


def test_resume_run_hands_a_run_whose_definition_it_lacks_to_the_version_that_has_it(
    stack: Stack, emitted: Any
) -> None:
    run_id = stack.start_on_v3(OLD_TRIAL, "kept.trial")
    stack.service.publish(RESUME_V3, "ResumeRunFunction", stack.version(OLD_TRIAL))
    stack.clock.advance(timedelta(days=1, seconds=1))
    batch = sqs_batch(ResumeRequest(TENANT, run_id, 0))
    answer = stack.call(stack.version(NEW_TRIAL), "ResumeRunFunction", batch, RESUME_V4)
    assert answer == {"batchItemFailures": []}
    [(host, payload)] = stack.service.calls
    assert (host, payload) == (
        RESUME_V3,
        {"tenantId": TENANT, "runId": run_id, "stepIndex": 0, "forwardedFrom": RESUME_V4},
    )
    completed = stack.last_event(run_id)
    assert (completed.type, completed.payload["result"]) == (
        "workflow.run-completed",
        {"code": "old"},
    )
    assert emitted().metric("ResumesOnKeptVersions") == 1


def test_a_direct_invoke_is_answered_by_the_kept_version(stack: Stack) -> None:
    run_id = stack.start_on_v3(OLD_TRIAL, "kept.trial")
    stack.service.publish(RESUME_V3, "ResumeRunFunction", stack.version(OLD_TRIAL))
    live = stack.version(NEW_TRIAL)
    request = {"tenantId": TENANT, "runId": run_id, "stepIndex": 0}
    early = stack.call(live, "ResumeRunFunction", request, RESUME_V4)
    forced = stack.call(live, "ResumeRunFunction", request | {"force": True}, RESUME_V4)
    # Whether it is due is decided here; the pass runs on the kept version.
    assert (early["outcome"], early["dueInSeconds"], "keptOn" in early) == ("not-due", 86400, False)
    assert (forced["outcome"], forced["keptOn"]) == ("completed", RESUME_V3)
    assert [(host, call.get("force")) for host, call in stack.service.calls] == [(RESUME_V3, True)]


def test_a_request_handed_on_is_never_handed_on_again(stack: Stack) -> None:
    """The loop guard: a version handed a run it has no definition for (a stale
    registration) fails it loud instead of handing it anywhere."""
    run_id = stack.start_on_v3(OLD_TRIAL, "kept.trial")
    stack.clock.advance(timedelta(days=1, seconds=1))
    handed = {"tenantId": TENANT, "runId": run_id, "stepIndex": 0, "forwardedFrom": RESUME_V4}
    answer = stack.call(stack.version(NEW_TRIAL), "ResumeRunFunction", handed, RESUME_V3)
    assert stack.service.calls == []
    assert (answer["outcome"], answer["reason"]) == ("failed", "workflow_definition_changed")
    error = assert_failed_loud(stack, run_id)
    assert error.endswith(f"It was handed here by {RESUME_V4} as its kept version.")


def test_a_kept_version_that_is_gone_fails_the_run_loud_and_is_forgotten(stack: Stack) -> None:
    run_id = stack.start_on_v3(OLD_TRIAL, "kept.trial")  # registered, but deleted since
    stack.clock.advance(timedelta(days=1, seconds=1))
    batch = sqs_batch(ResumeRequest(TENANT, run_id, 0))
    answer = stack.call(stack.version(NEW_TRIAL), "ResumeRunFunction", batch, RESUME_V4)
    assert answer == {"batchItemFailures": []}
    error = assert_failed_loud(stack, run_id)
    assert error.endswith(f"; its kept version {RESUME_V3} is gone.")
    assert RESUME_V3 not in stack.registered()


def test_an_older_kept_version_serves_when_the_newest_is_gone(stack: Stack) -> None:
    run_id = stack.start_on_v3(OLD_TRIAL, "kept.trial")
    stack.clock.advance(timedelta(minutes=1))
    v5 = f"{FUNCTIONS}-ResumeRun:5"  # registered later, deleted since
    register_hosts(stack.store, [OLD_TRIAL], RESUME_RUN, v5, stack.clock.now())
    stack.service.publish(RESUME_V3, "ResumeRunFunction", stack.version(OLD_TRIAL))
    stack.clock.advance(timedelta(days=1))
    batch = sqs_batch(ResumeRequest(TENANT, run_id, 0))
    stack.call(stack.version(NEW_TRIAL), "ResumeRunFunction", batch, RESUME_V4)
    assert [host for host, _ in stack.service.calls] == [v5, RESUME_V3]
    assert stack.last_event(run_id).payload["result"] == {"code": "old"}


def test_a_kept_version_that_does_not_answer_fails_the_batch_item_for_a_retry(
    stack: Stack,
) -> None:
    run_id = stack.start_on_v3(OLD_TRIAL, "kept.trial")
    broken = stack.version(OLD_TRIAL)

    def no_database() -> Store:
        raise ConnectionError("the kept version's database connection failed")

    broken.store = no_database
    stack.service.publish(RESUME_V3, "ResumeRunFunction", broken)
    stack.clock.advance(timedelta(days=1, seconds=1))
    batch = sqs_batch(ResumeRequest(TENANT, run_id, 0))
    answer = stack.call(stack.version(NEW_TRIAL), "ResumeRunFunction", batch, RESUME_V4)
    assert answer == {"batchItemFailures": [{"itemIdentifier": batch["Records"][0]["messageId"]}]}
    assert stack.last_event(run_id).type == "workflow.step.waiting"  # untouched: retried


def test_a_runtime_that_cannot_hand_work_on_does_not_leave_the_run_waiting(
    stack: Stack,
) -> None:
    """Without a way to invoke the kept version (no invoker), its registration is no use:
    the run fails loud instead of being answered on-kept-version and left waiting."""
    run_id = stack.start_on_v3(OLD_TRIAL, "kept.trial")
    stack.clock.advance(timedelta(days=1, seconds=1))
    batch = sqs_batch(ResumeRequest(TENANT, run_id, 0))
    stack.call(stack.version(NEW_TRIAL, hands_on=False), "ResumeRunFunction", batch, RESUME_V4)
    assert_failed_loud(stack, run_id)


# --- StepDispatcher hands a task to its kept version ------------------------------------------

OLD_CHARGE, NEW_CHARGE = charging("kept", old_charge), charging("moved", new_charge)
NUDGE = {"source": "nudge"}


def test_step_dispatcher_hands_a_task_to_the_version_that_has_its_code(
    stack: Stack, emitted: Any
) -> None:
    run_id = stack.start_on_v3(OLD_CHARGE, "kept.charge")
    stack.service.publish(DISPATCHER_V3, "StepDispatcherFunction", stack.version(OLD_CHARGE))
    live = stack.version(NEW_CHARGE)
    answer = stack.call(live, "StepDispatcherFunction", NUDGE, DISPATCHER_V4)
    assert answer["tasks"]["completed"] == 1 and answer["resumed"] == 1
    [(host, payload)] = stack.service.calls
    handed = payload["forwardedTask"]
    assert (host, handed["tenantId"], handed["attempt"], handed["lostAttempt"]) == (
        DISPATCHER_V3,
        TENANT,
        1,
        False,
    )
    events = stack.store.streams.load(TENANT, run_id)
    completed = [e for e in events if e.type == "workflow.task.completed"]
    assert completed[0].payload["result"] == {"by": "old code"}
    queue = live.resume_queue
    assert isinstance(queue, InMemoryResumeQueue)
    assert [r.run_id for r in queue.sent] == [run_id]  # the caller resumes the run
    assert emitted().metric("TasksOnKeptVersions") == 1


def test_a_task_handed_on_after_its_lease_ended_is_not_run(stack: Stack) -> None:
    run_id = stack.start_on_v3(OLD_CHARGE, "kept.charge")
    with stack.store.transaction():
        task = stack.store.tasks.claim(stack.clock.now(), 60_000, 10_000, 5.0)
    assert task is not None and task.run_id == run_id
    stack.clock.advance(timedelta(minutes=5))  # the caller's lease ended meanwhile
    handed = versions.forwarded_task_payload(task, DISPATCHER_V4)
    answer = stack.call(stack.version(OLD_CHARGE), "StepDispatcherFunction", handed, DISPATCHER_V3)
    assert answer == {"task": None}
    types = [e.type for e in stack.store.streams.load(TENANT, run_id)]
    assert types[-1] == "workflow.task.scheduled"  # nothing ran, nothing was recorded


def test_a_task_whose_kept_version_is_gone_fails_its_run_loud(stack: Stack) -> None:
    run_id = stack.start_on_v3(OLD_CHARGE, "kept.charge")  # registered, nothing published
    answer = stack.call(stack.version(NEW_CHARGE), "StepDispatcherFunction", NUDGE, DISPATCHER_V4)
    assert answer["tasks"]["failed"] == 1
    error = assert_failed_loud(stack, run_id)
    assert f"its kept version {DISPATCHER_V3} is gone" in error
    now = stack.clock.now()
    [task] = stack.store.tasks.find("failed", now - timedelta(days=1), now, TENANT)
    assert task.last_error == "workflow_definition_changed"
    assert DISPATCHER_V3 not in stack.registered()


# --- the boto3 request ----------------------------------------------------------------------


def lambda_client() -> Any:
    return boto3.client(
        "lambda", region_name="eu-central-1", aws_access_key_id="x", aws_secret_access_key="y"
    )


def body(value: Any) -> StreamingBody:
    data = json.dumps(value).encode()
    return StreamingBody(io.BytesIO(data), len(data))


def test_the_forwarder_invokes_the_qualified_version_synchronously() -> None:
    client = lambda_client()
    forwarder = KeptVersionForwarder(LambdaInvoker(client), caller=lambda: RESUME_V4)
    request = ResumeRequestItem(TENANT, "20674095-dda5-5811-b700-b57eb304d119", 2, force=True)
    sent = {
        "tenantId": TENANT,
        "runId": request.run_id,
        "stepIndex": 2,
        "force": True,
        "forwardedFrom": RESUME_V4,
    }
    answer = {
        "outcome": "suspended",
        "tenantId": TENANT,
        "runId": request.run_id,
        "stepIndex": 2,
        "wakeAt": "2026-01-06T09:00:00+00:00",
        "dueInSeconds": None,
        "suspendedAt": 4,
        "nextWakeAt": "2026-01-07T09:00:00+00:00",
        "reason": None,
        "waitingAt": None,
    }
    expected = {
        "FunctionName": RESUME_V3,
        "InvocationType": "RequestResponse",
        "Payload": json.dumps(sent, separators=(",", ":")).encode(),
    }
    with Stubber(client) as stub:
        stub.add_response("invoke", {"StatusCode": 200, "Payload": body(answer)}, expected)
        stub.add_client_error("invoke", "ResourceNotFoundException", http_status_code=404)
        stub.add_client_error("invoke", "TooManyRequestsException", http_status_code=429)
        stub.add_response(
            "invoke",
            {"StatusCode": 200, "FunctionError": "Unhandled", "Payload": body({"errorType": "X"})},
        )
        result = forwarder.resume(RESUME_V3, request)
        assert (result.outcome, result.suspended_at, result.resumed_wake_at) == (
            "suspended",
            4,
            datetime_of("2026-01-07T09:00:00+00:00"),
        )
        with pytest.raises(HostGone):
            forwarder.resume(RESUME_V3, request)
        with pytest.raises(ForwardFailed, match="could not be invoked"):
            forwarder.resume(RESUME_V3, request)
        with pytest.raises(ForwardFailed, match="raised X"):
            forwarder.resume(RESUME_V3, request)
        stub.assert_no_pending_responses()


def datetime_of(text: str) -> datetime:
    return datetime.fromisoformat(text)


def test_the_aws_runtime_hands_work_on_without_client_retries(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from workflow_runner.aws.runtime import build_aws_runtime

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "y")
    runtime = build_aws_runtime(Settings(database_url="postgresql:///x", aws_region="eu-central-1"))
    invoker = runtime.invoker
    assert isinstance(invoker, LambdaInvoker)
    config = invoker._client.meta.config
    assert config.retries["total_max_attempts"] == 1
    assert config.read_timeout == versions.FORWARD_READ_TIMEOUT_S


# --- on moto's Lambda: deploys publish versions, work is handed over, prune ------------------


class MotoStack:
    """Deploys onto moto's Lambda: each publishes a version of ResumeRun and
    StepDispatcher and moves their `live` alias to it, as AutoPublishAlias does. moto
    resolves every invoke of a qualified ARN (ResourceNotFoundException once the version
    is deleted); what a version then runs is its handler on the runtime deployed as it,
    in this process (moto would need Docker to run the code itself)."""

    FUNCTIONS: ClassVar[dict[str, str]] = {
        "ResumeRunFunction": "wfr-ResumeRun",
        "StepDispatcherFunction": "wfr-StepDispatcher",
    }

    def __init__(self, stack: Stack, client: Any) -> None:
        self.stack, self.client = stack, client
        self.deployed: dict[str, tuple[str, Runtime]] = {}
        self.invoked: list[str] = []
        for name in self.FUNCTIONS.values():
            moto_function(client, name)

    def deploy(self, *code: WorkflowDefinition) -> dict[str, tuple[str, Runtime]]:
        """Publish a version of both functions with `code`, move `live` to it, and start a
        container of each (which registers its definitions); function -> (ARN, runtime)."""
        live = {}
        for function, name in self.FUNCTIONS.items():
            version = moto_publish(self.client, name)
            if version == "1":
                self.client.create_alias(FunctionName=name, Name="live", FunctionVersion="1")
            else:
                self.client.update_alias(FunctionName=name, Name="live", FunctionVersion=version)
            runtime = self.stack.version(*code, hands_on=False)
            runtime.invoker = LambdaInvoker(self.client)
            arn = f"{FUNCTIONS}-{name.split('-')[1]}:{version}"
            self.deployed[arn] = (function, runtime)
            live[function] = (arn, runtime)
            lambda_support._hosting.clear()  # new containers of the new version
            started = NUDGE if function == "StepDispatcherFunction" else sqs_batch()
            self.call(function, live, started)
        return live

    def start(self, definition: WorkflowDefinition, event_type: str, key: str) -> str:
        """Start a run of `definition` (the live code's when it starts); its id."""
        now = self.stack.clock.now()
        started = trigger(
            self.stack.store, registry_of(definition), event_type, {"id": key}, now, TENANT
        )
        return started.started[0].run_id

    def call(self, function: str, on: dict[str, tuple[str, Runtime]], event: Any) -> Any:
        """Invoke `function` through its live alias, served by the version `on` names."""
        arn, runtime = on[function]
        version = arn.rsplit(":", 1)[1]
        set_runtime(runtime)
        try:
            alias = f"{arn.rsplit(':', 1)[0]}:live"
            return self.stack.handlers[function](event, context(alias, version=version))
        finally:
            set_runtime(None)

    def run_version(self, fn: Any, event: Any = None) -> tuple[str, bool, str]:
        """moto's LambdaFunction._invoke_lambda: run the version's handler in process."""
        self.invoked.append(fn.function_arn)
        function, runtime = self.deployed[fn.function_arn]
        payload = json.loads(event) if isinstance(event, str) else event
        previous = installed_runtime()
        set_runtime(runtime)
        try:
            answer = self.stack.handlers[function](payload, context(fn.function_arn))
        except Exception as error:
            return json.dumps({"errorType": type(error).__name__}), True, ""
        finally:
            set_runtime(previous)
        return json.dumps(answer), False, ""


@pytest.fixture
def moto(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> Iterator[MotoStack]:
    from moto.awslambda.models import LambdaFunction

    with fake_aws(monkeypatch, "eu-central-1"):
        deployments = MotoStack(stack, boto3.client("lambda", region_name="eu-central-1"))

        def invoke_lambda(fn: Any, event: Any = None) -> tuple[str, bool, str]:
            return deployments.run_version(fn, event)

        monkeypatch.setattr(LambdaFunction, "_invoke_lambda", invoke_lambda)
        yield deployments


def test_on_moto_a_structural_deploy_hands_waiting_runs_to_the_version_they_started_on(
    moto: MotoStack, emitted: Any
) -> None:
    stack = moto.stack
    first = moto.deploy(OLD_TRIAL, OLD_CHARGE)
    trial_run = moto.start(OLD_TRIAL, "kept.trial", "t1")
    charge_run = moto.start(OLD_CHARGE, "kept.charge", "c1")  # its task not run yet
    assert stack.registered() == {first[f][0] for f in first}  # both v1 containers registered
    # Deploy 2 inserts a step before the wait and before the task: the shapes disagree.
    # Its StepDispatcher's first run claims the charge task and hands it to v1.
    second = moto.deploy(NEW_TRIAL, NEW_CHARGE)
    v1_resume, v1_dispatcher = first["ResumeRunFunction"][0], first["StepDispatcherFunction"][0]
    assert moto.invoked == [v1_dispatcher]  # through moto, by its qualified ARN
    events = stack.store.streams.load(TENANT, charge_run)
    [charged] = [e for e in events if e.type == "workflow.task.completed"]
    assert charged.payload["result"] == {"by": "old code"}
    assert emitted().metric("TasksOnKeptVersions") == 1

    stack.clock.advance(timedelta(days=1, seconds=1))
    batch = sqs_batch(ResumeRequest(TENANT, trial_run, 0))
    assert moto.call("ResumeRunFunction", second, batch) == {"batchItemFailures": []}
    assert moto.invoked[1:] == [v1_resume]
    assert stack.last_event(trial_run).payload["result"] == {"code": "old"}
    assert emitted().metric("ResumesOnKeptVersions") == 1

    # While the charge run is unsettled, pruning keeps both v1s (it still needs a pass).
    kept = versions.prune_versions(moto.client, stack.store)
    assert (kept.deleted, sorted(kept.kept), kept.failed) == (
        [],
        sorted([v1_resume, v1_dispatcher, *(second[f][0] for f in second)]),
        {},
    )
    queue = second["StepDispatcherFunction"][1].resume_queue
    assert isinstance(queue, InMemoryResumeQueue)
    moto.call("ResumeRunFunction", second, sqs_batch(*queue.sent))  # on v1 again
    assert stack.last_event(charge_run).payload["result"] == {"charge": {"by": "old code"}}
    # Every run settled: nothing needs v1 any more.
    pruned = versions.prune_versions(moto.client, stack.store)
    assert (pruned.deleted, pruned.failed) == ([v1_resume, v1_dispatcher], {})
    for name in MotoStack.FUNCTIONS.values():
        found = moto.client.list_versions_by_function(FunctionName=name)["Versions"]
        assert [v["Version"] for v in found] == ["$LATEST", "2"]
    assert stack.registered() == {second[f][0] for f in second}


def test_on_moto_a_run_whose_kept_version_was_deleted_fails_loud(moto: MotoStack) -> None:
    stack = moto.stack
    first = moto.deploy(OLD_TRIAL)
    run_id = moto.start(OLD_TRIAL, "kept.trial", "t1")
    second = moto.deploy(NEW_TRIAL)
    v1 = first["ResumeRunFunction"][0]
    moto.client.delete_function(FunctionName="wfr-ResumeRun", Qualifier="1")
    stack.clock.advance(timedelta(days=1, seconds=1))
    batch = sqs_batch(ResumeRequest(TENANT, run_id, 0))
    assert moto.call("ResumeRunFunction", second, batch) == {"batchItemFailures": []}
    assert moto.invoked == []  # moto answered ResourceNotFoundException
    assert assert_failed_loud(stack, run_id).endswith(f"; its kept version {v1} is gone.")
    assert v1 not in stack.registered()
