"""The test kit completes callbacks the way an outside system does: with the token the
mail (or webhook) carried, through the same engine call as the callback endpoint."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from workflow_runner import define_workflow, on_event
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


def test_a_null_payload_is_refused(make_env: MakeEnv) -> None:
    env = _env(make_env)
    with pytest.raises(InvalidInput, match="null"):
        env.complete_callback(env.mails[0].body, None)
    assert env.run(tenant=TENANT_A, workflow="expense-approval", key="e-1").status == "waiting"


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
