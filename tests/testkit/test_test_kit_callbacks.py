"""The test kit completes callbacks the way an outside system does: with the token the
mail (or webhook) carried, through the same engine call as the callback endpoint."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from workflow_runner import StepContext, define_workflow, on_event
from workflow_runner.definition import WorkflowDefinition
from workflow_runner.errors import InvalidInput
from workflow_runner.testing import CallbackRefused, WorkflowTestEnv

from tests.support import TENANT_A, nested

MakeEnv = Callable[..., WorkflowTestEnv]
BASE = "https://callbacks.example.com/"

APPROVAL = define_workflow(
    name="expense-approval",
    trigger=on_event("expense.filed"),
    idempotency_key=lambda e: e.payload["expenseId"],
    register=False,
    steps=lambda s: [
        s.mail_send(
            to="boss@example.com",
            subject="Approve expense?",
            body=lambda ctx: f"Approve or reject: {ctx.callback.url}",
        ),
        s.wait_for_callback("decision", timeout="P3D"),
        s.branch(
            if_=lambda ctx: (ctx.steps["decision"] or {}).get("approved"),
            on_true=[s.mail_send(to="ann@example.com", subject="Approved", body="Paid soon.")],
            on_false=[s.return_({"isSuccess": False, "decision": "rejected or none"})],
        ),
    ],
)


def _env(make_env: MakeEnv) -> WorkflowTestEnv:
    env = make_env(workflows=[APPROVAL], environ={"CALLBACK_BASE_URL": BASE})
    env.put_event(tenant=TENANT_A, type="expense.filed", payload={"expenseId": "e-1"})
    return env


def test_the_mail_carries_the_link_and_completing_it_resumes_the_run_at_once(
    make_env: MakeEnv,
) -> None:
    env = _env(make_env)
    run = env.run(tenant=TENANT_A, workflow="expense-approval", key="e-1")
    assert (run.status, run.waiting_for) == ("waiting", "workflow.callback")
    (mail,) = env.mails
    assert f"Approve or reject: {BASE}wfrcb_" in mail.body

    env.complete_callback(mail.body, {"approved": True})

    run = env.run(tenant=TENANT_A, workflow="expense-approval", key="e-1")
    assert run.status == "completed"
    assert run.steps["decision"] == {"approved": True}
    assert [m.subject for m in env.mails] == ["Approve expense?", "Approved"]
    assert run.events[2].text.startswith("step 1: callback completed (payload: event ")
    assert all("callbackSecret" not in e.payload for e in run.events)


def test_nobody_answering_times_the_wait_out(make_env: MakeEnv) -> None:
    env = _env(make_env)
    env.advance("P3D")
    run = env.run(tenant=TENANT_A, workflow="expense-approval", key="e-1")
    assert (run.status, run.reason) == ("failed", "returned_failure")
    assert run.steps["decision"] is None
    with pytest.raises(CallbackRefused, match="expired at 2030-01-04"):
        env.complete_callback(env.mails[0].body, {"approved": True})


def test_a_link_is_single_use_and_text_without_one_token_is_refused(make_env: MakeEnv) -> None:
    env = _env(make_env)
    body = env.mails[0].body
    env.complete_callback(body, {"approved": False})
    with pytest.raises(CallbackRefused, match="single-use"):
        env.complete_callback(body, {"approved": True})
    with pytest.raises(ValueError, match="found 0"):
        env.complete_callback("no link here", {})
    with pytest.raises(ValueError, match="found 2"):
        env.complete_callback(f"{body} {body}", {})
    run = env.run(tenant=TENANT_A, workflow="expense-approval", key="e-1")
    assert run.result == {"isSuccess": False, "decision": "rejected or none"}


def test_a_completion_without_a_payload_is_an_answer_not_a_timeout(make_env: MakeEnv) -> None:
    env = _env(make_env)
    env.complete_callback(env.mails[0].body, None)
    run = env.run(tenant=TENANT_A, workflow="expense-approval", key="e-1")
    assert (run.status, run.steps["decision"]) == ("failed", None)  # the workflow's own rule
    assert "step 1: resumed by callback" in [e.text for e in run.events]


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (nested(100_000), "complete_callback(payload=...) is nested deeper than 100 levels"),
        ({"blob": "x" * 300_000}, "complete_callback(payload=...) is 300011 bytes, over the"),
    ],
    ids=["100000-levels", "300-kb"],
)
def test_a_payload_too_deep_or_too_large_is_refused_naming_the_argument(
    make_env: MakeEnv, payload: object, message: str
) -> None:
    env = _env(make_env)
    with pytest.raises(InvalidInput) as refused:
        env.complete_callback(env.mails[0].body, payload)
    assert str(refused.value).startswith(message), str(refused.value)
    assert env.run(tenant=TENANT_A, workflow="expense-approval", key="e-1").status == "waiting"


def test_a_payload_nested_to_the_limit_completes_the_wait(make_env: MakeEnv) -> None:
    env = _env(make_env)
    env.complete_callback(env.mails[0].body, {"approved": True, "deep": nested(99)})
    run = env.run(tenant=TENANT_A, workflow="expense-approval", key="e-1")
    assert run.status == "completed"
    assert run.steps["decision"]["deep"] == nested(99)


# --- failures, heartbeats, created callbacks ---------------------------------------------------


def _payment(name: str, catch: bool) -> WorkflowDefinition:
    return define_workflow(
        name=name,
        trigger=on_event(f"{name}.asked"),
        idempotency_key=lambda e: e.payload["paymentId"],
        register=False,
        steps=lambda s: [
            s.mail_send(to="psp@example.com", subject="Charge", body=lambda ctx: ctx.callback.url),
            s.wait_for_callback("charge", timeout="P1D", heartbeat="PT1H", catch=catch),
            s.return_(lambda ctx: ctx.steps["charge"]),
        ],
    )


def _charging(make_env: MakeEnv, name: str, catch: bool = False) -> WorkflowTestEnv:
    env = make_env(workflows=[_payment(name, catch)], environ={"CALLBACK_BASE_URL": BASE})
    env.put_event(tenant=TENANT_A, type=f"{name}.asked", payload={"paymentId": "p-1"})
    return env


def test_fail_callback_fails_the_run_and_stores_only_the_error_name(make_env: MakeEnv) -> None:
    env = _charging(make_env, "pay")
    env.fail_callback(env.mails[0].body, error="CardDeclined", message="jane@example.com's card")
    run = env.run(tenant=TENANT_A, workflow="pay", key="p-1")
    assert (run.status, run.reason) == ("failed", "callback_failed")
    texts = [e.text for e in run.events]
    assert any(t.startswith("step 1: callback failed: CardDeclined (text hash ") for t in texts)
    assert "jane@" not in str([e.payload for e in run.events])
    with pytest.raises(CallbackRefused, match="single-use"):
        env.complete_callback(env.mails[0].body, {"charged": True})


def test_a_caught_failure_is_the_wait_s_result(make_env: MakeEnv) -> None:
    env = _charging(make_env, "pay-caught", catch=True)
    env.fail_callback(env.mails[0].body, error="CardDeclined")
    run = env.run(tenant=TENANT_A, workflow="pay-caught", key="p-1")
    assert (run.status, run.result) == ("completed", {"failed": True, "error": "CardDeclined"})


def test_a_bad_error_name_is_refused(make_env: MakeEnv) -> None:
    env = _charging(make_env, "pay")
    with pytest.raises(InvalidInput, match="is not an error name"):
        env.fail_callback(env.mails[0].body, error="card declined")
    assert env.run(tenant=TENANT_A, workflow="pay", key="p-1").status == "waiting"


def test_heartbeat_callback_keeps_the_wait_open_until_the_beats_stop(make_env: MakeEnv) -> None:
    env = _charging(make_env, "pay")
    for _ in range(3):
        env.advance("PT50M")
        env.heartbeat_callback(env.mails[0].body)
    assert env.run(tenant=TENANT_A, workflow="pay", key="p-1").status == "waiting"
    env.advance("PT1H")
    run = env.run(tenant=TENANT_A, workflow="pay", key="p-1")
    assert (run.status, run.result) == ("completed", None)
    assert "step 1: resumed by heartbeat_timeout" in [e.text for e in run.events]
    with pytest.raises(CallbackRefused, match="no heartbeat came within its interval"):
        env.heartbeat_callback(env.mails[0].body)


HANDED: list[str] = []


def _hand_over(ctx: StepContext) -> dict[str, bool]:
    """A task giving the outside system the link (here: a list the test reads)."""
    HANDED.append(str(ctx.callbacks["shipment"].url))
    return {"sent": True}


SHIPPING = define_workflow(
    name="shipping",
    trigger=on_event("order.paid"),
    idempotency_key=lambda e: e.payload["orderId"],
    register=False,
    steps=lambda s: [
        s.create_callback("shipment", timeout="P5D"),
        s.task("book", _hand_over),
        s.wait(for_="PT1H"),
        s.await_callback("shipment", result_key="tracking"),
        s.return_(lambda ctx: ctx.steps["tracking"]),
    ],
)


def test_a_task_hands_a_created_callback_out_and_an_early_answer_waits_for_its_await(
    make_env: MakeEnv,
) -> None:
    HANDED.clear()
    env = make_env(workflows=[SHIPPING], environ={"CALLBACK_BASE_URL": BASE})
    env.put_event(tenant=TENANT_A, type="order.paid", payload={"orderId": "o-1"})
    (link,) = HANDED
    assert link.startswith(f"{BASE}wfrcb_")

    env.complete_callback(link, {"tracking": "1Z999"})  # before the run reaches its await
    assert env.run(tenant=TENANT_A, workflow="shipping", key="o-1").status == "waiting"
    env.advance("PT1H")

    run = env.run(tenant=TENANT_A, workflow="shipping", key="o-1")
    assert (run.status, run.result) == ("completed", {"tracking": "1Z999"})
    texts = [e.text for e in run.events]
    assert any(t.startswith("step 0: callback 'shipment' created, open until ") for t in texts)
    assert any(t.endswith("; kept for its await") for t in texts)
