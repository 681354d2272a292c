import pytest
from workflow_runner.testing import CallbackRefused, WorkflowTestEnv

TENANT = "7f0c1a52-2c11-4a1e-9b1e-000000000001"
INVOICES = {"invoiceRunId": "i-7", "total": 1200}
ENDPOINT = "https://callbacks.example.com/"


@pytest.fixture
def env():
    environ = {"CALLBACK_BASE_URL": ENDPOINT}
    with WorkflowTestEnv(modules=["invoice_approval"], environ=environ) as env:
        yield env


def test_finance_approves_through_the_link_in_the_mail(env):
    env.put_event(tenant=TENANT, type="invoices.prepared", payload=INVOICES)
    [mail] = env.mails
    assert ENDPOINT + "wfrcb_" in mail.body
    assert env.run(tenant=TENANT, workflow="invoice-approval", key="i-7").status == "waiting"

    env.complete_callback(mail.body, {"approved": True})

    run = env.run(tenant=TENANT, workflow="invoice-approval", key="i-7")
    assert run.result == {"isSuccess": True, "invoiced": True}
    # The trigger payload, with the tenant id the event carried at TENANT_ID_PATH.
    assert [w.body for w in env.webhooks] == [{**INVOICES, "tenantId": TENANT}]
    with pytest.raises(CallbackRefused) as refused:
        env.complete_callback(mail.body, {"approved": False})
    assert refused.value.reason == "already_completed"


def test_no_answer_in_two_days_fails_the_run(env):
    env.put_event(tenant=TENANT, type="invoices.prepared", payload=INVOICES)
    env.advance("P2D")
    run = env.run(tenant=TENANT, workflow="invoice-approval", key="i-7")
    assert (run.status, run.reason) == ("failed", "returned_failure")
    assert env.webhooks == []
