"""wait_for_callback meets composition, on real PostgreSQL through the handlers (the
test kit): a pass that also starts a child still waits on its own token, each mapped
child waits on its own, and cancelling a parent closes its children's callbacks."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from workflow_runner import Event, Steps, define_workflow, on_call, on_event
from workflow_runner.definition import WorkflowDefinition
from workflow_runner.engine.cancel import cancel_run
from workflow_runner.testing import CallbackRefused, WorkflowTestEnv

from tests.support import TENANT_A

T0 = "2030-01-01T09:00:00Z"
BASE = "https://callbacks.example.com/"
MakeEnv = Callable[..., WorkflowTestEnv]


def workflows() -> list[WorkflowDefinition]:
    signer = define_workflow(
        name="signer",
        trigger=on_call(),
        steps=lambda s: [
            s.mail_send(
                to=lambda ctx: ctx.event.payload["email"],
                subject="Please sign",
                body=lambda ctx: f"Sign here: {ctx.callback.url}",
            ),
            s.wait_for_callback("signature", timeout="P1D"),
            s.return_(
                lambda ctx: {"email": ctx.event.payload["email"], "signed": ctx.steps["signature"]}
            ),
        ],
        register=False,
    )
    contract = define_workflow(
        name="contract",
        trigger=on_event("contract.drafted"),
        idempotency_key=Event.payload["id"],
        steps=lambda s: [
            s.map(Event.payload["signers"], workflow="signer", result_key="signatures"),
            s.return_({"isSuccess": True, "signatures": Steps["signatures"]}),
        ],
        register=False,
    )
    # The pass that starts the archive child also hands out the token and suspends: the
    # child's start is recorded on the stream before the suspension.
    archived = define_workflow(
        name="archived-approval",
        trigger=on_event("approval.requested"),
        idempotency_key=Event.payload["id"],
        steps=lambda s: [
            s.start_workflow("archive", input={"id": 1}, key=Event.payload["id"]),
            s.mail_send(
                to="boss@example.com",
                subject="Approve?",
                body=lambda ctx: f"Approve: {ctx.callback.url}",
            ),
            s.wait_for_callback("decision", timeout="P1D"),
            s.return_(lambda ctx: ctx.steps["decision"]),
        ],
        register=False,
    )
    archive = define_workflow(
        name="archive",
        trigger=on_call(),
        steps=lambda s: [s.wait(for_="PT1H"), s.return_({"archived": True})],
        register=False,
    )
    return [signer, contract, archived, archive]


@pytest.fixture
def env(make_env: MakeEnv) -> WorkflowTestEnv:
    return make_env(workflows=workflows(), now=T0, environ={"CALLBACK_BASE_URL": BASE})


def _mail_to(env: WorkflowTestEnv, address: str) -> str:
    (mail,) = [m for m in env.mails if m.to == [address]]
    return mail.body


def test_a_pass_that_starts_a_child_before_its_wait_still_takes_the_completion(
    env: WorkflowTestEnv,
) -> None:
    env.put_event(tenant=TENANT_A, type="approval.requested", payload={"id": "a-1"})
    run = env.run(tenant=TENANT_A, workflow="archived-approval", key="a-1")
    assert (run.status, run.waiting_for) == ("waiting", "workflow.callback")

    env.complete_callback(_mail_to(env, "boss@example.com"), {"approved": True})

    run = env.run(tenant=TENANT_A, workflow="archived-approval", key="a-1")
    assert (run.status, run.result) == ("completed", {"approved": True})
    assert env.run(tenant=TENANT_A, workflow="archive", key="a-1").status == "waiting"


def test_each_mapped_child_waits_on_its_own_token(env: WorkflowTestEnv) -> None:
    signers = [{"email": f"s{n}@example.com"} for n in range(3)]
    env.put_event(
        tenant=TENANT_A, type="contract.drafted", payload={"id": "c-2", "signers": signers}
    )
    links = {s["email"]: _mail_to(env, s["email"]) for s in signers}
    assert len(set(links.values())) == 3

    env.complete_callback(links["s2@example.com"], {"at": "10:00"})
    env.complete_callback(links["s0@example.com"], {"at": "10:05"})
    contract = env.run(tenant=TENANT_A, workflow="contract", key="c-2")
    assert contract.status == "waiting"  # s1 has not signed
    with pytest.raises(CallbackRefused, match="single-use"):
        env.complete_callback(links["s0@example.com"], {"at": "10:06"})

    env.complete_callback(links["s1@example.com"], {"at": "10:10"})
    contract = env.run(tenant=TENANT_A, workflow="contract", key="c-2")
    assert contract.status == "completed"
    assert contract.steps["signatures"] == [
        {"email": "s0@example.com", "signed": {"at": "10:05"}},
        {"email": "s1@example.com", "signed": {"at": "10:10"}},
        {"email": "s2@example.com", "signed": {"at": "10:00"}},
    ]


def test_cancelling_a_parent_closes_its_childrens_callbacks(env: WorkflowTestEnv) -> None:
    signers = [{"email": "s0@example.com"}, {"email": "s1@example.com"}]
    env.put_event(
        tenant=TENANT_A, type="contract.drafted", payload={"id": "c-3", "signers": signers}
    )
    contract = env.run(tenant=TENANT_A, workflow="contract", key="c-3")
    cancel_run(env.store, TENANT_A, contract.run_id, env.now, "withdrawn")
    env.runtime.catch_up()
    with pytest.raises(CallbackRefused, match="no longer waits"):
        env.complete_callback(_mail_to(env, "s0@example.com"), {"at": "11:00"})
    assert [r.status for r in env.runs(tenant=TENANT_A, workflow="signer")] == [
        "cancelled",
        "cancelled",
    ]
