"""`wfr migrate | runs | pending | resume | cancel` against real PostgreSQL."""

from __future__ import annotations

import uuid

import pytest
from cli_support import OTHER_TENANT, TENANT, Cli, send, table_count
from workflow_runner.store import Store

SIGNUP = {"userId": "active-ada", "email": "ada@example.com"}


def test_help_works_for_every_command(cli: Cli, capsys: pytest.CaptureFixture[str]) -> None:
    commands = [
        [],
        ["migrate"],
        ["runs"],
        ["runs", "list"],
        ["runs", "show"],
        ["pending"],
        ["resume"],
        ["cancel"],
        ["redrive"],
        ["graph"],
        ["doctor"],
        ["local"],
        ["local", "put-events"],
        ["local", "tick"],
        ["local", "clock"],
        ["local", "mail"],
        ["demo"],
    ]
    for command in commands:
        result = cli(*command, "--help")
        assert result.code == 0, command
        assert "usage: wfr" in capsys.readouterr().out


def test_unknown_command_is_a_usage_error(cli: Cli, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli("frobnicate").code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_missing_database_url_says_how_to_give_one(cli: Cli) -> None:
    result = cli("runs", "list", "--tenant", TENANT, env={"DATABASE_URL": ""})
    assert result.code == 2
    assert "--database-url" in result.err and "DATABASE_URL" in result.err


def test_migrate_is_idempotent_and_reports_json(cli: Cli) -> None:
    result = cli("migrate", "--json")
    assert result.code == 0
    assert result.json() == {"applied": []}  # the test database is migrated already
    assert cli("migrate").out.strip() == "schema is up to date"


def test_runs_list_json_filters_by_workflow_and_status(cli: Cli, store: Store) -> None:
    send(store, "user.signed-up", SIGNUP)
    send(store, "inventory.changed", {"sku": "A-1", "revision": 1})  # completes in one pass
    everything = cli("runs", "list", "--tenant", TENANT, "--json").json()
    assert {r["workflowName"] for r in everything} == {"user-onboarding", "inventory-sync"}
    assert set(everything[0]) == {
        "runId",
        "tenantId",
        "workflowName",
        "workflowVersion",
        "status",
        "version",
        "definitionFingerprint",
        "triggerEventType",
        "startedAt",
        "updatedAt",
    }
    waiting = cli("runs", "list", "--tenant", TENANT, "--status", "waiting", "--json").json()
    assert [r["workflowName"] for r in waiting] == ["user-onboarding"]
    by_name = cli("--json", "runs", "list", "--tenant", TENANT, "--workflow", "inventory-sync")
    assert [r["status"] for r in by_name.json()] == ["completed"]


def test_runs_list_of_another_tenant_is_empty(cli: Cli, store: Store) -> None:
    send(store, "user.signed-up", SIGNUP)
    assert cli("runs", "list", "--tenant", OTHER_TENANT, "--json").json() == []
    assert "no runs" in cli("runs", "list", "--tenant", OTHER_TENANT).out


def test_runs_show_json_has_the_contract_shape(cli: Cli, store: Store) -> None:
    run_id = send(store, "user.signed-up", SIGNUP).started[0].run_id
    shown = cli("runs", "show", run_id, "--tenant", TENANT, "--json")
    assert shown.code == 0
    body = shown.json()
    assert set(body) == {
        "runId",
        "tenantId",
        "workflowName",
        "workflowVersion",
        "status",
        "events",
        "deliveries",
        "parentRunId",
        "children",
        "callbacks",
        "localLog",  # added by issue 31: empty off the local runtime
    }
    assert body["callbacks"] == []  # none handed out (tests/cli/test_cli_callbacks.py: some)
    assert body["localLog"] == []
    assert body["workflowVersion"] == 1
    assert (body["runId"], body["tenantId"]) == (run_id, TENANT)
    assert (body["workflowName"], body["status"]) == ("user-onboarding", "waiting")
    assert [e["type"] for e in body["events"]] == [
        "workflow.run-started",
        "workflow.step.waiting",
    ]
    first = body["events"][0]
    assert set(first) == {"version", "type", "payload", "recordedAt"}
    assert first["version"] == 1 and first["recordedAt"] == "2026-01-05T09:00:00.000000Z"
    assert first["payload"]["workflowName"] == "user-onboarding"
    # The welcome mail's own stream: requested, not delivered yet.
    (mail,) = body["deliveries"]
    assert set(mail) == {"requestId", "version", "type", "payload", "recordedAt"}
    assert (mail["type"], mail["payload"]["stepKind"]) == ("step.dispatch-requested", "mail.send")


def test_runs_show_text_is_a_timeline(cli: Cli, store: Store) -> None:
    run_id = send(store, "user.signed-up", SIGNUP).started[0].run_id
    out = cli("runs", "show", run_id, "--tenant", TENANT).out
    assert "user-onboarding" in out and "waiting" in out
    assert "step 1: wait until 2026-01-06T09:00:00Z" in out
    assert "\033[" not in out  # no colour when stdout is not a terminal


def test_runs_show_unknown_run_and_wrong_tenant_fail_clearly(cli: Cli, store: Store) -> None:
    run_id = send(store, "user.signed-up", SIGNUP).started[0].run_id
    unknown = str(uuid.uuid4())
    missing = cli("runs", "show", unknown, "--tenant", TENANT)
    assert missing.code == 1
    assert missing.err.strip() == f"wfr: error: run {unknown} not found for tenant {TENANT}"
    assert missing.out == ""
    wrong = cli("runs", "show", run_id, "--tenant", OTHER_TENANT, "--json")
    assert wrong.code == 1 and "not found for tenant" in wrong.err and wrong.out == ""


def test_ids_must_be_uuids(cli: Cli) -> None:
    bad_tenant = cli("runs", "list", "--tenant", "acme")
    assert bad_tenant.code == 2
    assert "--tenant must be a UUID, got 'acme'" in bad_tenant.err
    bad_run = cli("runs", "show", "run-1", "--tenant", TENANT)
    assert bad_run.code == 2
    assert "RUN_ID: run id must be a UUID or at least its first 4 hex digits" in bad_run.err


def test_pending_json_and_due_before(cli: Cli, store: Store) -> None:
    onboarding = send(store, "user.signed-up", SIGNUP).started[0].run_id
    order = {"orderId": "o-1", "total": 5, "email": "a@example.com"}
    send(store, "order.placed", order)
    rows = cli("pending", "--tenant", TENANT, "--json").json()
    assert [r["workflowName"] for r in rows] == ["user-onboarding", "order-approval"]
    assert set(rows[0]) == {
        "tenantId",
        "runId",
        "stepIndex",
        "workflowName",
        "suspension",
        "wakeAt",
        "retryAttempt",
        "waitEventType",
        "awaitedEventId",
        "suspensionVersion",
        "leasedUntil",
    }
    assert rows[0]["runId"] == onboarding and rows[0]["wakeAt"] == "2026-01-06T09:00:00.000000Z"
    assert rows[1]["waitEventType"] == "order.approved"
    soon = cli("pending", "--tenant", TENANT, "--due-before", "2026-01-07T00:00:00Z", "--json")
    assert [r["runId"] for r in soon.json()] == [onboarding]


def test_pending_rejects_a_bad_instant(cli: Cli) -> None:
    result = cli("pending", "--tenant", TENANT, "--due-before", "tomorrow")
    assert result.code == 2
    assert "--due-before" in result.err and "tomorrow" in result.err


def test_resume_not_due_then_forced(cli: Cli, store: Store) -> None:
    run_id = send(store, "user.signed-up", SIGNUP).started[0].run_id
    before = table_count(store, "wf_events")
    early = cli("resume", run_id, "--tenant", TENANT, "--now", "2026-01-05T12:00:00Z")
    assert early.code == 1 and early.out == ""
    assert "is not due until 2026-01-06T09:00:00Z; nothing was resumed" in early.err
    assert "--force" in early.err
    assert table_count(store, "wf_events") == before  # no operator action recorded either
    forced = cli(
        "resume", run_id, "--tenant", TENANT, "--force", "--now", "2026-01-05T12:00:00Z", "--json"
    ).json()
    assert forced["outcome"] == "suspended" and forced["suspendedAt"] == 4
    assert forced["nextWakeAt"] == "2026-01-12T12:00:00.000000Z"
    events = cli("runs", "show", run_id, "--tenant", TENANT, "--json").json()["events"]
    resumed = [e for e in events if e["type"] == "workflow.step.resumed"]
    assert resumed[0]["payload"]["resumedBy"] == "forced"


def test_resume_due_run_at_its_time(cli: Cli, store: Store) -> None:
    run_id = send(store, "user.signed-up", SIGNUP).started[0].run_id
    result = cli(
        "resume", run_id, "--tenant", TENANT, "--step", "1", "--now", "2026-01-06T09:00:00Z"
    )
    assert result.code == 0 and result.out.startswith("suspended")


def test_resume_bad_now_writes_nothing(cli: Cli, store: Store) -> None:
    run_id = send(store, "user.signed-up", SIGNUP).started[0].run_id
    before = table_count(store, "wf_events")
    result = cli("resume", run_id, "--tenant", TENANT, "--now", "2026-13-01T00:00Z")
    assert result.code == 2 and "--now" in result.err
    assert table_count(store, "wf_events") == before


def test_resume_wrong_tenant_is_not_found(cli: Cli, store: Store) -> None:
    run_id = send(store, "user.signed-up", SIGNUP).started[0].run_id
    before = table_count(store, "wf_events")
    result = cli("resume", run_id, "--tenant", OTHER_TENANT, "--force")
    assert result.code == 1 and "not found for tenant" in result.err
    assert table_count(store, "wf_events") == before


def test_cancel_then_cancel_again_then_a_settled_run(cli: Cli, store: Store) -> None:
    run_id = send(store, "user.signed-up", SIGNUP).started[0].run_id
    first = cli("cancel", run_id, "--tenant", TENANT, "--reason", "user left", "--json")
    assert first.code == 0
    assert first.json() == {
        "outcome": "cancelled",
        "tenantId": TENANT,
        "runId": run_id,
        "status": "cancelled",
    }
    events = cli("runs", "show", run_id, "--tenant", TENANT, "--json").json()["events"]
    assert events[-1]["type"] == "workflow.run-cancelled"
    assert events[-1]["payload"]["reason"] == "user left"
    again = cli("cancel", run_id, "--tenant", TENANT)
    assert again.code == 0 and again.out.startswith("already-cancelled")
    done = send(store, "inventory.changed", {"sku": "A-1", "revision": 1})
    settled = cli("cancel", done.started[0].run_id, "--tenant", TENANT)
    assert settled.code == 1
    assert "already completed; nothing to cancel" in settled.err


def test_cancel_wrong_tenant_writes_nothing(cli: Cli, store: Store) -> None:
    run_id = send(store, "user.signed-up", SIGNUP).started[0].run_id
    before = table_count(store, "wf_events")
    result = cli("cancel", run_id, "--tenant", OTHER_TENANT)
    assert result.code == 1 and "not found" in result.err
    assert table_count(store, "wf_events") == before
    assert cli("runs", "show", run_id, "--tenant", TENANT, "--json").json()["status"] == "waiting"


def test_global_options_work_before_and_after_the_command(cli: Cli, store: Store) -> None:
    send(store, "user.signed-up", SIGNUP)
    before = cli("--json", "runs", "list", "--tenant", TENANT).json()
    after = cli("runs", "list", "--tenant", TENANT, "--json").json()
    assert before == after and len(before) == 1


def test_erase_event_fails_the_waiting_run_and_leaves_no_copy(cli: Cli, store: Store) -> None:
    run_id = send(store, "user.signed-up", SIGNUP, event_id="signup-1").started[0].run_id
    result = cli("erase-event", "signup-1", "--tenant", TENANT, "--reason", "GDPR-42", "--json")
    assert result.code == 0
    body = result.json()
    assert body["eventId"] == "signup-1" and body["alreadyErased"] is False
    assert body["runsFailed"] == {run_id: "trigger_event_erased"}
    assert cli("runs", "show", run_id, "--tenant", TENANT, "--json").json()["status"] == "failed"
    again = cli("erase-event", "signup-1", "--tenant", TENANT)
    assert again.code == 0 and "was already erased" in again.out


def test_erase_event_unknown_event_or_bad_tenant_writes_nothing(cli: Cli, store: Store) -> None:
    send(store, "user.signed-up", SIGNUP, event_id="signup-2")
    before = table_count(store, "wf_events")
    missing = cli("erase-event", "no-such-event", "--tenant", TENANT)
    foreign = cli("erase-event", "signup-2", "--tenant", OTHER_TENANT)
    bad = cli("erase-event", "signup-2", "--tenant", "not-a-uuid")
    assert (missing.code, foreign.code, bad.code) == (1, 1, 2)
    assert "not found" in missing.err and "not found" in foreign.err
    assert table_count(store, "wf_events") == before
