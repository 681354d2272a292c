from itertools import pairwise

from workflow_runner.testing import WorkflowTestEnv

TENANT = "7f0c1a52-2c11-4a1e-9b1e-000000000001"


def test_a_transfer_cut_off_by_the_worker_dying_is_not_sent_again():
    sent = []

    def bank(ctx):
        sent.append(ctx.workflow.retry_attempt)
        return {"transferId": "t-1"}

    with WorkflowTestEnv(modules=["payout"]) as env:
        env.stub_task("transfer", bank)
        env.crash_task("transfer", attempt=1)  # the bank got it; the worker died
        env.put_event(tenant=TENANT, type="invoice.approved", payload={"invoiceId": "i-1"})
        env.advance("PT1M")  # the attempt's lease runs out
        run = env.run(tenant=TENANT, workflow="supplier-payout", key="i-1")
        assert sent == [1]
        assert run.steps["transfer"] == {"failed": True, "error": "TaskInterrupted", "attempts": 1}
        assert [m.subject for m in env.mails] == ["Check the transfer by hand"]


def test_an_unreachable_bank_is_tried_again_10_then_30_seconds_later():
    tried = []

    def bank(ctx):
        tried.append(ctx.now)
        if len(tried) < 3:
            raise ConnectionError("bank unreachable")
        return {"transferId": "t-2"}

    with WorkflowTestEnv(modules=["payout"]) as env:
        env.stub_task("transfer", bank)
        env.put_event(tenant=TENANT, type="invoice.approved", payload={"invoiceId": "i-2"})
        env.advance("PT5M")
        run = env.run(tenant=TENANT, workflow="supplier-payout", key="i-2")
        assert run.result == {"isSuccess": True, "transfer": {"transferId": "t-2"}}
        gaps = [(later - earlier).total_seconds() for earlier, later in pairwise(tried)]
        assert gaps == [10, 30]
