"""`wfr doctor`: each invariant check finds what it should, says how to fix it, and the
exit code is 1 exactly when something is wrong."""

from __future__ import annotations

from pathlib import Path

from cli_support import TENANT, Cli, send
from workflow_runner.store import Store

SIGNUP = {"userId": "active-ada", "email": "ada@example.com"}

NARROW_TEMPLATE = """\
Transform: AWS::Serverless-2016-10-31
Resources:
  TriggerProjectionFunction:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: functions/trigger_projection/
      Handler: app.handler
      Events:
        Triggers:
          Type: EventBridgeRule
          Properties:
            Pattern:
              source: [{ "anything-but": [workflow-runner] }]
              detail-type: [user.signed-up, order.placed]
  EventWakeupFunction:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: functions/event_wakeup/
      Handler: app.handler
      Events:
        Awaited:
          Type: EventBridgeRule
          Properties:
            Pattern:
              detail-type: [{ prefix: payment. }]
"""


# The business time of the data the tests send: "overdue" is judged against it.
NOW = "2026-01-05T09:00:00Z"


def _checks(result_json: dict[str, object]) -> dict[str, dict[str, object]]:
    return {c["name"]: c for c in result_json["checks"]}  # type: ignore[attr-defined,index]


def test_a_healthy_database_passes(cli: Cli, store: Store) -> None:
    send(store, "user.signed-up", SIGNUP)
    result = cli("doctor", "--now", NOW)
    assert result.code == 0, result.out
    assert "ok: no problems found" in result.out
    body = cli("doctor", "--now", NOW, "--json").json()
    assert body["ok"] is True and body["problems"] == 0
    assert {c["status"] for c in body["checks"]} == {"ok"}


def test_a_stranded_run_is_a_problem_with_a_fix(cli: Cli, store: Store) -> None:
    run_id = send(store, "user.signed-up", SIGNUP).started[0].run_id
    store.conn.execute("DELETE FROM workflow_run_pending")
    result = cli("doctor", "--now", NOW, "--json")
    assert result.code == 1
    check = _checks(result.json())["every unsettled run has a pending row"]
    assert check["status"] == "problem"
    assert any(run_id in item for item in check["items"])  # type: ignore[attr-defined]
    assert "wfr resume" in check["fix"]  # type: ignore[operator]
    text = cli("doctor", "--now", NOW)
    assert text.code == 1 and "fix: resume each one now" in text.out


def test_an_unprojected_run_is_lag_not_a_problem(cli: Cli, store: Store) -> None:
    from cli_support import T0
    from workflow_runner.definition import default_registry
    from workflow_runner.definition.dsl import DomainEvent
    from workflow_runner.engine import ingest_domain_event

    event = DomainEvent("e-lag", "user.signed-up", SIGNUP, TENANT, T0, "tests")
    ingest_domain_event(store, event, T0, default_registry())  # no projection run
    result = cli("doctor", "--now", NOW, "--json")
    assert result.code == 0
    checks = _checks(result.json())
    assert checks["every unsettled run has a pending row"]["status"] == "warning"
    assert checks["pending projection lag"]["status"] == "warning"
    assert "2 event(s) not applied" in checks["pending projection lag"]["summary"]  # type: ignore[operator]


def test_a_pending_row_of_a_settled_run_is_a_problem(cli: Cli, store: Store) -> None:
    run_id = send(store, "user.signed-up", SIGNUP).started[0].run_id
    store.conn.execute("UPDATE workflow_runs SET status = 'completed' WHERE run_id = %s", (run_id,))
    result = cli("doctor", "--now", NOW, "--json", "--tenant", TENANT)
    assert result.code == 1
    check = _checks(result.json())["no pending row for a settled run"]
    assert check["status"] == "problem"
    assert "rebuild the pending projection" in check["fix"]  # type: ignore[operator]


def test_waiting_runs_on_an_unregistered_definition_are_a_problem(cli: Cli, store: Store) -> None:
    send(store, "user.signed-up", SIGNUP)
    store.conn.execute("UPDATE workflow_run_pending SET definition_fingerprint = 'f00dfeed'")
    result = cli("doctor", "--now", NOW, "--json")
    assert result.code == 1
    check = _checks(result.json())["waiting runs resume on the registered definitions"]
    assert check["status"] == "problem"
    assert "workflow_definition_changed" in check["summary"]  # type: ignore[operator]
    assert "f00dfeed" in check["items"][0]  # type: ignore[index]
    assert "version=N+1" in check["fix"]  # type: ignore[operator]


def test_the_tenant_filter_limits_the_run_checks(cli: Cli, store: Store) -> None:
    send(store, "user.signed-up", SIGNUP)
    store.conn.execute("DELETE FROM workflow_run_pending")
    other = "7f0c1a52-2c11-4a1e-9b1e-0000000000ff"
    assert cli("doctor", "--now", NOW, "--tenant", other).code == 0
    assert cli("doctor", "--now", NOW, "--tenant", TENANT).code == 1


def test_template_that_misses_event_types(cli: Cli, tmp_path: Path) -> None:
    template = tmp_path / "template.yaml"
    template.write_text(NARROW_TEMPLATE)
    result = cli("doctor", "--now", NOW, "--template", str(template), "--json")
    assert result.code == 1
    check = _checks(result.json())["template routes every trigger and awaited event type"]
    assert check["status"] == "problem"
    assert check["items"] == [
        "trigger type 'account.updated' does not reach trigger_projection",
        "trigger type 'batch.submitted' does not reach trigger_projection",
        "trigger type 'data.processed' does not reach trigger_projection",
        "trigger type 'inventory.changed' does not reach trigger_projection",
        "trigger type 'parcel.ready' does not reach trigger_projection",
        "trigger type 'shipment.ready' does not reach trigger_projection",
        "awaited type 'order.approved' does not reach event_wakeup",
    ]


def test_the_project_template_routes_every_sample_type(cli: Cli) -> None:
    project = Path(__file__).resolve().parents[2] / "template.yaml"
    result = cli("doctor", "--now", NOW, "--template", str(project), "--json")
    check = _checks(result.json())["template routes every trigger and awaited event type"]
    assert check["status"] == "ok", check


def test_a_missing_template_file_is_a_usage_error(cli: Cli, tmp_path: Path) -> None:
    result = cli("doctor", "--now", NOW, "--template", str(tmp_path / "nope.yaml"))
    assert result.code == 2 and "no such file" in result.err
