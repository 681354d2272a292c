import pytest
from workflow_runner.testing import CallbackRefused, WorkflowTestEnv

TENANT = "7f0c1a52-2c11-4a1e-9b1e-000000000001"


@pytest.fixture
def env():
    environ = {"CALLBACK_BASE_URL": "https://callbacks.example.com/"}
    with WorkflowTestEnv(modules=["contract_signing"], environ=environ) as env:
        yield env


@pytest.fixture
def links(env):
    """What the signing service got: the task's call, stood in for by the test."""
    sent = {}

    def signing_service(ctx):
        sent.update({who: ctx.callbacks[who].url for who in ("customer", "counsel")})
        return {"envelopeId": "env-1"}

    env.stub_task("send", signing_service)
    env.put_event(tenant=TENANT, type="contract.drafted", payload={"contractId": "c-1"})
    return sent


def test_a_signature_that_comes_before_its_await_is_kept(env, links):
    env.complete_callback(links["customer"], {"signedAt": "2030-01-02"})  # customer first
    env.complete_callback(links["counsel"], {"approved": True})
    run = env.run(tenant=TENANT, workflow="contract-signing", key="c-1")
    assert run.result == {"isSuccess": True, "signature": {"signedAt": "2030-01-02"}}


def test_counsel_rejecting_ends_the_run_and_the_customer_link_with_it(env, links):
    env.fail_callback(links["counsel"], error="ClauseRejected", message="clause 7 is void")
    run = env.run(tenant=TENANT, workflow="contract-signing", key="c-1")
    assert run.result == {
        "isSuccess": False,
        "counsel": {"failed": True, "error": "ClauseRejected"},
    }
    with pytest.raises(CallbackRefused) as refused:
        env.complete_callback(links["customer"], {"signedAt": "2030-01-03"})
    assert refused.value.reason == "not_waiting"


def test_nobody_signing_in_two_weeks_ends_the_run(env, links):
    env.advance("P14D")
    run = env.run(tenant=TENANT, workflow="contract-signing", key="c-1")
    assert run.result == {"isSuccess": False, "counsel": None}
