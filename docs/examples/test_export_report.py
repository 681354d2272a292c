from datetime import timedelta

from my_app import exports
from workflow_runner.testing import WorkflowTestEnv

TENANT = "7f0c1a52-2c11-4a1e-9b1e-000000000001"
REQUEST = {"exportId": "x-1", "email": "ada@example.com"}


def test_the_link_goes_out_once_the_export_is_done(monkeypatch):
    states = iter(["running", "running", "running", "done"])
    asked = []

    def status(export_id):
        asked.append(env.now)
        return {"state": next(states), "url": "https://reports.example.com/x-1.csv"}

    monkeypatch.setattr(exports, "status", status)
    with WorkflowTestEnv(modules=["export_report"]) as env:
        start = env.now
        env.put_event(tenant=TENANT, type="export.requested", payload=REQUEST)
        env.advance("PT1H")
        # Checked at once, then after 1, 2 and 4 minutes (exponential from PT1M).
        assert [t - start for t in asked] == [timedelta(minutes=m) for m in (0, 1, 3, 7)]
        assert [m.body for m in env.mails] == ["https://reports.example.com/x-1.csv"]
        run = env.run(tenant=TENANT, workflow="export-report", key="x-1")
        assert run.steps["export"] == {"url": "https://reports.example.com/x-1.csv", "checks": 4}


def test_an_export_that_fails_or_never_finishes_ends_the_run_as_failed(monkeypatch):
    monkeypatch.setattr(exports, "status", lambda export_id: {"state": "running"})
    with WorkflowTestEnv(modules=["export_report"]) as env:
        env.put_event(tenant=TENANT, type="export.requested", payload=REQUEST)
        env.advance("PT7H")
        run = env.run(tenant=TENANT, workflow="export-report", key="x-1")
        assert run.status == "failed"
        assert run.steps["export"]["reason"] == "condition_not_met"  # the 6 hours ran out

    monkeypatch.setattr(exports, "status", lambda export_id: {"state": "failed"})
    with WorkflowTestEnv(modules=["export_report"]) as env:
        env.put_event(tenant=TENANT, type="export.requested", payload=REQUEST)
        run = env.run(tenant=TENANT, workflow="export-report", key="x-1")
        assert run.steps["export"] == {
            "failed": True,
            "reason": "condition_check_failed",
            "error": "RuntimeError",
            "attempts": 1,
        }
        assert env.mails == []
