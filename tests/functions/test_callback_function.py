"""The callback endpoint (CallbackFunction behind its Function URL), invoked with the
sample requests in events/ against a real database: a token completes its own wait
once and the run goes to the resume queue; every refusal and bad request is answered
with its status and reason, names no tenant, run or step, and writes nothing."""

from __future__ import annotations

import base64
import dataclasses
import json
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import boto3
import pytest
from moto import mock_aws
from workflow_runner import ManualClock, on_event
from workflow_runner.aws.inprocess import FakeLambdaContext, build_inprocess_runtime
from workflow_runner.aws.runtime import build_aws_runtime
from workflow_runner.aws.template import Handler
from workflow_runner.callback_tokens import tokens_in
from workflow_runner.definition import WorkflowRegistry
from workflow_runner.durations import format_instant
from workflow_runner.engine.cancel import cancel_run
from workflow_runner.engine.projection import project_pending
from workflow_runner.ports import Runtime, set_runtime
from workflow_runner.settings import Settings
from workflow_runner.store import Store

from tests.functions.helpers import OTHER_TENANT, TENANT, Emitted, load_event
from tests.support import nested, nested_text, register

BASE = "https://abcdefghijklmnopqrstuvwxyz012345.lambda-url.eu-central-1.on.aws/"
RUN = "fabc09bd-1cce-55f4-b55f-349508b70ba8"  # order.placed, key ord-1001 (as the sample)
Read = Callable[[], Emitted]


@pytest.fixture
def flows() -> WorkflowRegistry:
    """An order waits for the warehouse's answer, which its mail links to."""
    registry = WorkflowRegistry()
    register(
        registry,
        name="order-approval",
        trigger=on_event("order.placed"),
        idempotency_key=lambda e: e.payload["orderId"],
        steps=lambda s: [
            s.mail_send(
                to="warehouse@example.com",
                subject="Can you ship it?",
                body=lambda ctx: f"Answer here: {ctx.callback.url}",
            ),
            s.wait_for_callback("answer", timeout="P2D", heartbeat="PT1H"),
            s.return_(lambda ctx: {"isSuccess": True, "answer": ctx.steps["answer"]}),
        ],
    )
    return registry


@pytest.fixture
def runtime(
    store: Store, clock: ManualClock, db_url: str, flows: WorkflowRegistry
) -> Iterator[Runtime]:
    """The in-process runtime with the deployment's endpoint URL configured."""
    settings = Settings(database_url=db_url, callback_base_url=BASE)
    rt = build_inprocess_runtime(store, clock, settings=settings, registry=flows)
    set_runtime(rt)
    try:
        yield rt
    finally:
        set_runtime(None)


def invoke(handlers: dict[str, Handler], name: str, event: Any) -> Any:
    return handlers[name](event, FakeLambdaContext())


def waiting_order(handlers: dict[str, Handler], store: Store, tenant: str = TENANT) -> str:
    """Start the order through TriggerProjection; the token its mail carried."""
    event = load_event("trigger-projection-order-placed.json")
    event["detail"]["tenantId"] = tenant
    (started,) = invoke(handlers, "TriggerProjectionFunction", event)["started"]
    assert started["outcome"] == "suspended"
    row = store.conn.execute(
        "SELECT request FROM dispatch_outbox WHERE tenant_id = %s", (tenant,)
    ).fetchone()
    assert row is not None
    body = row["request"]["body"]
    assert body.startswith(f"Answer here: {BASE}wfrcb_")  # the Lambda pass linked it
    (token,) = tokens_in(body)
    return token


def request(name: str, token: str) -> dict[str, Any]:
    """A sample request of events/, carrying `token` where the sample has its own."""
    sample = load_event(name)
    (placeholder,) = set(tokens_in(json.dumps(sample)))
    return dict(json.loads(json.dumps(sample).replace(placeholder, token)))


def answer(response: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    assert response["headers"]["content-type"] == "application/json"
    return response["statusCode"], json.loads(response["body"])


def writes(store: Store) -> tuple[int, ...]:
    counts = store.conn.execute(
        "SELECT (SELECT count(*) FROM wf_events) AS events, (SELECT count(*) FROM inbox) AS"
        " inbox, (SELECT count(*) FROM callbacks WHERE completed_at IS NOT NULL) AS used"
    ).fetchone()
    assert counts is not None
    return tuple(counts.values())


def test_a_completion_is_recorded_and_the_run_resumes_from_the_queue(
    handlers: dict[str, Handler], runtime: Runtime, store: Store, emitted: Read
) -> None:
    token = waiting_order(handlers, store)

    response = invoke(handlers, "CallbackFunction", request("callback-complete.json", token))

    assert answer(response) == (200, {"completed": True})
    (sent,) = runtime.resume_queue.sent  # type: ignore[attr-defined]
    assert (sent.tenant_id, sent.run_id, sent.step_index, sent.delay_seconds) == (TENANT, RUN, 1, 0)
    message = {"tenantId": TENANT, "runId": RUN, "stepIndex": 1}
    batch = {"Records": [{"messageId": "m-1", "body": json.dumps(message)}]}
    assert invoke(handlers, "ResumeRunFunction", batch) == {"batchItemFailures": []}
    run = store.streams.load(TENANT, RUN)
    assert run[-1].payload["result"] == {
        "isSuccess": True,
        "answer": {"approved": True, "by": "dana@example.com"},
    }
    out = emitted()
    assert out.metric("CallbacksCompleted") == 1
    assert token not in json.dumps(out.logs)  # the credential never reaches the logs


def test_the_token_may_come_in_the_body_with_the_payload(
    handlers: dict[str, Handler], runtime: Runtime, store: Store
) -> None:
    token = waiting_order(handlers, store)
    response = invoke(handlers, "CallbackFunction", request("callback-token-in-body.json", token))
    assert answer(response) == (200, {"completed": True})
    stored = store.conn.execute("SELECT detail FROM inbox WHERE type = 'workflow.callback'")
    assert stored.fetchone() == {"detail": {"approved": False}}


def test_a_token_completes_once_and_the_second_answer_is_409(
    handlers: dict[str, Handler], runtime: Runtime, store: Store, emitted: Read
) -> None:
    token = waiting_order(handlers, store)
    assert invoke(handlers, "CallbackFunction", request("callback-complete.json", token))[
        "statusCode"
    ] == (200)
    before = writes(store)

    again = invoke(handlers, "CallbackFunction", request("callback-token-in-body.json", token))

    assert answer(again) == (
        409,
        {
            "completed": False,
            "reason": "already_completed",
            "error": "this callback was completed before (a token is single-use)",
        },
    )
    assert writes(store) == before
    assert emitted().metric("CallbacksRefused") == 1


@pytest.mark.parametrize(
    ("token", "status", "reason"),
    [
        ("wfrcb_" + "A" * 43, 404, "unknown"),  # the shape of a token, no such token
        ("favicon.ico", 404, "unknown"),  # refused before any database work
        ("wfrcb_" + "A" * 43 + "/approve", 404, "unknown"),  # no such request
    ],
)
def test_an_unknown_token_is_404_and_says_nothing_more(
    handlers: dict[str, Handler],
    runtime: Runtime,
    store: Store,
    token: str,
    status: int,
    reason: str,
) -> None:
    waiting_order(handlers, store)
    before = writes(store)
    event = load_event("callback-complete.json")
    event["rawPath"] = f"/{token}"
    code, body = answer(invoke(handlers, "CallbackFunction", event))
    assert (code, body) == (status, {"completed": False, "reason": reason, "error": body["error"]})
    assert body["error"] == "unknown callback token"
    assert writes(store) == before


def test_a_token_reaches_only_its_own_tenants_run_and_answers_name_neither(
    handlers: dict[str, Handler], runtime: Runtime, store: Store
) -> None:
    """Both tenants have the same run id (run ids derive from workflow and key only)."""
    theirs = waiting_order(handlers, store, OTHER_TENANT)
    ours = waiting_order(handlers, store)

    completed = invoke(handlers, "CallbackFunction", request("callback-complete.json", ours))
    refused = invoke(handlers, "CallbackFunction", request("callback-complete.json", ours))

    assert completed["statusCode"] == 200 and refused["statusCode"] == 409
    for response in (completed, refused):
        assert RUN not in response["body"] and TENANT not in response["body"]
    assert store.runs.get(TENANT, RUN).status == "waiting"  # type: ignore[union-attr]
    other = store.streams.load(OTHER_TENANT, RUN)
    assert [e.type for e in other][-1] == "workflow.callback.waiting"  # untouched
    assert invoke(handlers, "CallbackFunction", request("callback-complete.json", theirs))[
        "statusCode"
    ] == (200)


def test_an_expired_token_is_410(
    handlers: dict[str, Handler], runtime: Runtime, store: Store, clock: ManualClock
) -> None:
    token = waiting_order(handlers, store)
    clock.advance(timedelta(days=2))
    before = writes(store)
    code, body = answer(
        invoke(handlers, "CallbackFunction", request("callback-complete.json", token))
    )
    assert (code, body["reason"]) == (410, "expired")
    assert body["error"].startswith("this callback expired at ")
    assert writes(store) == before


def test_a_run_that_moved_on_is_409_not_waiting(
    handlers: dict[str, Handler], runtime: Runtime, store: Store, clock: ManualClock
) -> None:
    token = waiting_order(handlers, store)
    cancel_run(store, TENANT, RUN, clock.now(), "customer asked")
    before = writes(store)
    code, body = answer(
        invoke(handlers, "CallbackFunction", request("callback-complete.json", token))
    )
    assert (code, body["reason"]) == (409, "not_waiting")
    assert writes(store) == before


def test_a_get_never_completes_a_callback(
    handlers: dict[str, Handler], runtime: Runtime, store: Store
) -> None:
    """A mail client or link scanner fetching the link must not use up the token."""
    token = waiting_order(handlers, store)
    before = writes(store)
    response = invoke(handlers, "CallbackFunction", request("callback-get.json", token))
    code, body = answer(response)
    assert (code, body["reason"]) == (405, "method_not_allowed")
    assert response["headers"]["allow"] == "POST"
    assert body["error"] == (
        "GET does not complete a callback: POST the JSON payload to the link the run handed out"
    )
    assert writes(store) == before
    assert invoke(handlers, "CallbackFunction", request("callback-complete.json", token))[
        "statusCode"
    ] == (200)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({}, "callback request: the body is not JSON"),  # the sample: a form post
        ({"body": "e30=", "isBase64Encoded": True, "rawPath": "/"}, "callback request: no token"),
        ({"body": "!!", "isBase64Encoded": True}, "callback request: the body is not JSON"),
        (
            {"body": json.dumps("x" * 300_000)},
            "callback request: the body is 300002 bytes, over the 262144-byte limit",
        ),
    ],
)
def test_a_bad_request_is_400_with_what_and_where_and_writes_nothing(
    handlers: dict[str, Handler],
    runtime: Runtime,
    store: Store,
    emitted: Read,
    change: dict[str, Any],
    message: str,
) -> None:
    token = waiting_order(handlers, store)
    before = writes(store)
    event = {**request("callback-bad-not-json.json", token), **change}
    code, body = answer(invoke(handlers, "CallbackFunction", event))
    assert (code, body["reason"]) == (400, "invalid")
    assert body["error"].startswith(message), body["error"]
    assert writes(store) == before
    assert emitted().metric("InvalidInput") == 1


def _with_body(event: dict[str, Any], form: str, payload_text: str) -> dict[str, Any]:
    """`event` (a request for the token in its path) sending `payload_text` in `form`:
    as the body, in a {"token", "payload"} body, or base64-encoded."""
    if form == "token-in-body":
        token = event["rawPath"].strip("/")
        body = f'{{"token": "{token}", "payload": {payload_text}}}'
        return {**event, "rawPath": "/", "body": body}
    if form == "base64":
        return {
            **event,
            "body": base64.b64encode(payload_text.encode()).decode(),
            "isBase64Encoded": True,
        }
    return {**event, "body": payload_text}


@pytest.mark.parametrize("form", ["path", "token-in-body", "base64"])
@pytest.mark.parametrize("levels", [101, 900, 100_000])
def test_a_body_nested_too_deeply_is_400_naming_the_limit_and_writes_nothing(
    handlers: dict[str, Handler],
    runtime: Runtime,
    store: Store,
    emitted: Read,
    form: str,
    levels: int,
) -> None:
    """100,000 levels (200 KB, under the size limit) made json.loads raise RecursionError
    (a 5xx); 900 decode, and must not reach anything that recurses."""
    token = waiting_order(handlers, store)
    before = writes(store)
    deep = "[" * levels + "]" * levels
    event = _with_body(request("callback-complete.json", token), form, deep)

    code, body = answer(invoke(handlers, "CallbackFunction", event))

    assert (code, body["reason"]) == (400, "invalid")
    assert body["error"] == (
        "callback request: the body is nested deeper than 100 levels (the limit)"
    )
    assert writes(store) == before
    assert emitted().metric("InvalidInput") == 1
    assert runtime.resume_queue.sent == []  # type: ignore[attr-defined]


def test_a_payload_nested_to_the_limit_completes_and_nothing_after_it_breaks(
    handlers: dict[str, Handler], runtime: Runtime, store: Store
) -> None:
    """The payload is stored and read back through pydantic-core (jsonb) intact; the
    resumed pass ends the run cleanly: its return value puts the payload one level
    deeper than a result may be."""
    token = waiting_order(handlers, store)
    event = _with_body(request("callback-complete.json", token), "path", nested_text(100))

    assert answer(invoke(handlers, "CallbackFunction", event)) == (200, {"completed": True})

    stored = store.conn.execute("SELECT detail FROM inbox WHERE type = 'workflow.callback'")
    assert stored.fetchone() == {"detail": nested(100)}
    message = {"tenantId": TENANT, "runId": RUN, "stepIndex": 1}
    batch = {"Records": [{"messageId": "m-1", "body": json.dumps(message)}]}
    assert invoke(handlers, "ResumeRunFunction", batch) == {"batchItemFailures": []}
    run = store.runs.get(TENANT, RUN)
    assert run is not None and run.status == "failed"
    assert store.streams.load(TENANT, RUN)[-1].payload["reason"] == "result_not_storable"


def test_a_base64_body_is_decoded(
    handlers: dict[str, Handler], runtime: Runtime, store: Store
) -> None:
    token = waiting_order(handlers, store)
    event = request("callback-complete.json", token)
    event.update(body="eyJvayI6IHRydWV9", isBase64Encoded=True)  # {"ok": true}
    assert answer(invoke(handlers, "CallbackFunction", event)) == (200, {"completed": True})


def test_on_aws_the_resume_request_lands_on_the_sqs_resume_queue(
    handlers: dict[str, Handler],
    store: Store,
    db_url: str,
    flows: WorkflowRegistry,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "eu-central-1",
    }.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        sqs = boto3.client("sqs", region_name="eu-central-1")
        url = sqs.create_queue(QueueName="resume")["QueueUrl"]
        settings = Settings(database_url=db_url, resume_queue_url=url, callback_base_url=BASE)
        rt = dataclasses.replace(build_aws_runtime(settings), registry=flows)
        set_runtime(rt)
        try:
            token = waiting_order(handlers, store)
            response = invoke(
                handlers, "CallbackFunction", request("callback-complete.json", token)
            )
        finally:
            set_runtime(None)
        assert response["statusCode"] == 200
        (message,) = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
        assert json.loads(message["Body"]) == {"tenantId": TENANT, "runId": RUN, "stepIndex": 1}


# --- answers without a payload, failures, heartbeats -------------------------------------


def resume_from_queue(handlers: dict[str, Handler], runtime: Runtime) -> None:
    (sent,) = runtime.resume_queue.sent  # type: ignore[attr-defined]
    message = {"tenantId": sent.tenant_id, "runId": sent.run_id, "stepIndex": sent.step_index}
    batch = {"Records": [{"messageId": "m-1", "body": json.dumps(message)}]}
    assert invoke(handlers, "ResumeRunFunction", batch) == {"batchItemFailures": []}


@pytest.mark.parametrize(("body", "stored"), [("null", None), ("", None), ("{}", {})])
def test_a_completion_without_a_payload_completes(
    handlers: dict[str, Handler], runtime: Runtime, store: Store, body: str, stored: Any
) -> None:
    token = waiting_order(handlers, store)
    event = {**request("callback-complete.json", token), "body": body}
    assert answer(invoke(handlers, "CallbackFunction", event)) == (200, {"completed": True})
    row = store.conn.execute("SELECT detail FROM inbox WHERE type = 'workflow.callback'")
    assert row.fetchone() == {"detail": stored}
    resume_from_queue(handlers, runtime)
    assert store.streams.load(TENANT, RUN)[-1].payload["result"] == {
        "isSuccess": True,
        "answer": stored,
    }


def test_a_failure_is_recorded_and_fails_the_run_from_the_queue(
    handlers: dict[str, Handler], runtime: Runtime, store: Store, emitted: Read
) -> None:
    token = waiting_order(handlers, store)

    response = invoke(handlers, "CallbackFunction", request("callback-fail.json", token))

    assert answer(response) == (200, {"recorded": True})
    resume_from_queue(handlers, runtime)
    failed = store.streams.load(TENANT, RUN)[-1].payload
    assert (failed["reason"], failed["error"]) == (
        "callback_failed",
        "workflow step failed (OutOfStock)",
    )
    stored = json.dumps([e.payload for e in store.streams.load(TENANT, RUN)])
    assert "4711" not in stored  # the message is never stored
    out = emitted()
    assert out.metric("CallbacksFailed") == 1
    assert token not in json.dumps(out.logs) and "4711" not in json.dumps(out.logs)


def test_a_failure_may_carry_its_token_in_the_body(
    handlers: dict[str, Handler], runtime: Runtime, store: Store
) -> None:
    token = waiting_order(handlers, store)
    event = {
        **request("callback-fail.json", token),
        "rawPath": "/fail",
        "body": json.dumps({"token": token, "error": "OutOfStock"}),
    }
    assert answer(invoke(handlers, "CallbackFunction", event)) == (200, {"recorded": True})
    again = invoke(handlers, "CallbackFunction", request("callback-complete.json", token))
    assert answer(again)[0] == 409


def test_a_heartbeat_moves_the_wait_s_deadline_and_resumes_nothing(
    handlers: dict[str, Handler],
    runtime: Runtime,
    store: Store,
    clock: ManualClock,
    emitted: Read,
) -> None:
    token = waiting_order(handlers, store)
    clock.advance(timedelta(minutes=50))

    code, body = answer(
        invoke(handlers, "CallbackFunction", request("callback-heartbeat.json", token))
    )

    deadline = clock.now() + timedelta(hours=1)
    assert (code, body) == (200, {"recorded": True, "deadline": format_instant(deadline)})
    assert runtime.resume_queue.sent == []  # type: ignore[attr-defined]
    project_pending(store, clock.now())
    (row,) = store.pending.for_tenant(TENANT)
    assert row.wake_at == deadline
    in_body = {**request("callback-heartbeat.json", token), "rawPath": "/heartbeat"}
    in_body["body"] = json.dumps({"token": token})
    assert answer(invoke(handlers, "CallbackFunction", in_body))[0] == 200
    assert emitted().metric("CallbackHeartbeats") == 2


def test_a_heartbeat_after_the_heartbeats_stopped_is_410(
    handlers: dict[str, Handler], runtime: Runtime, store: Store, clock: ManualClock
) -> None:
    token = waiting_order(handlers, store)
    clock.advance(timedelta(hours=1))
    before = writes(store)
    code, body = answer(
        invoke(handlers, "CallbackFunction", request("callback-heartbeat.json", token))
    )
    assert (code, body["recorded"], body["reason"]) == (410, False, "expired")
    assert body["error"].endswith("no heartbeat came within its interval")
    assert writes(store) == before


LONG = "x" * 2001


@pytest.mark.parametrize(
    ("path", "body", "message"),
    [
        ("/{t}/fail", "", "callback request: a failure's body is {"),
        ("/{t}/fail", "[1]", "callback request: a failure's body is {"),
        ("/{t}/fail", '{"message": "x"}', "callback request: the failure's body has no 'error'"),
        ("/{t}/fail", '{"error": "X", "by": 1}', "the failure's body has unknown key 'by'"),
        ("/{t}/fail", '{"error": "has space"}', "callback failure: error 'has space' is not"),
        ("/{t}/fail", '{"error": "X", "message": "' + LONG + '"}', "over the 2000-character"),
        ("/{t}/fail", '{"error": "X", "message": 7}', "callback failure: message is a int"),
        ("/fail", '{"token": "{t}"}', 'no {"error": ..., "token": ..., "message": ...'),
        ("/{t}/heartbeat", '{"alive": true}', "callback request: a heartbeat takes no body"),
        ("/heartbeat", "{}", 'no token in the path and no {"token": ...} body for /heartbeat'),
    ],
)
def test_a_bad_failure_or_heartbeat_is_400_saying_what_and_writes_nothing(
    handlers: dict[str, Handler],
    runtime: Runtime,
    store: Store,
    path: str,
    body: str,
    message: str,
) -> None:
    token = waiting_order(handlers, store)
    before = writes(store)
    event = {
        **request("callback-fail.json", token),
        "rawPath": path.replace("{t}", token),
        "body": body.replace("{t}", token),
    }
    code, answered = answer(invoke(handlers, "CallbackFunction", event))
    assert (code, answered["recorded"], answered["reason"]) == (400, False, "invalid")
    assert message in answered["error"], answered["error"]
    assert writes(store) == before
