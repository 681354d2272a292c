from workflow_runner.testing import WorkflowTestEnv

TENANT = "7f0c1a52-2c11-4a1e-9b1e-000000000001"
REQUEST = {"refundId": "r-1", "paymentId": "p-9", "email": "ada@example.com"}


def test_the_refund_is_retried_until_the_provider_pays():
    answers = [ConnectionError("provider down"), {"status": "paid"}]

    def provider(ctx):
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    with WorkflowTestEnv(modules=["refund"]) as env:
        env.stub_task("refund", provider)
        env.put_event(tenant=TENANT, type="refund.requested", payload=REQUEST)
        env.put_event(tenant=TENANT, type="refund.approved", payload={"refundId": "r-1"})
        env.advance("PT1M")
        run = env.run(tenant=TENANT, workflow="refund", key="r-1")
        assert run.result == {"isSuccess": True, "refund": {"status": "paid"}}
        assert [m.subject for m in env.mails] == ["Refund requested"]
