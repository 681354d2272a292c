"""What an on-call engineer does with `wfr`: find runs across tenants (by status, time,
idempotency key, id prefix), act on them with exit codes that say what happened, and
have every action recorded on the run's stream."""

from __future__ import annotations

import importlib
from datetime import timedelta

from cli_support import T0, TENANT, Cli, send, table_count
from workflow_runner.store import Store

from tests.support import TENANT_B

SIGNUP = {"userId": "ada", "email": "ada@example.com"}


def test_runs_list_spans_tenants_and_filters_by_status(cli: Cli, store: Store) -> None:
    a = send(store, "user.signed-up", SIGNUP).started[0].run_id
    b = send(store, "user.signed-up", {"userId": "bob", "email": "b@x.io"}, tenant=TENANT_B)
    listed = cli("runs", "list", "--json").json()
    assert {(r["tenantId"], r["runId"]) for r in listed} == {
        (TENANT, a),
        (TENANT_B, b.started[0].run_id),
    }
    assert all(r["workflowVersion"] == 1 for r in listed)
    assert cli("runs", "--status", "failed", "--json").json() == []  # `wfr runs` = runs list
    text = cli("runs", "--status", "waiting").out
    assert "TENANT" in text and TENANT_B[:8] in text


def test_runs_list_by_idempotency_key_and_time(cli: Cli, store: Store) -> None:
    order = {"orderId": "r-3", "total": 5, "email": "c@example.com"}
    run_id = send(store, "order.placed", order, now=T0 + timedelta(hours=2)).started[0].run_id
    send(store, "user.signed-up", SIGNUP)
    by_key = cli("runs", "list", "--key", "r-3", "--json").json()
    assert [r["runId"] for r in by_key] == [run_id]
    assert (
        cli("runs", "list", "--key", "r-3", "--workflow", "user-onboarding", "--json").json() == []
    )
    since = cli("runs", "list", "--since", "2026-01-05T10:00:00Z", "--json").json()
    assert [r["runId"] for r in since] == [run_id]
    until = cli("runs", "list", "--until", "2026-01-05T10:00:00Z", "--json").json()
    assert [r["workflowName"] for r in until] == ["user-onboarding"]
    # A duration counts back from business time: the local clock of this database.
    store.local.set_clock(T0 + timedelta(hours=2, minutes=30))
    recent = cli("runs", "list", "--since", "1h", "--json").json()
    assert [r["runId"] for r in recent] == [run_id]
    bad = cli("runs", "list", "--since", "yesterday")
    assert bad.code == 2 and "--since: expected an instant" in bad.err


def test_runs_list_pages_with_a_cursor(cli: Cli, store: Store) -> None:
    for n in range(5):
        send(store, "user.signed-up", {"userId": f"u{n}", "email": "u@x.io"}, now=T0)
    first = cli("runs", "list", "--limit", "2")
    assert first.code == 0 and "more runs follow: add --after " in first.err
    cursor = first.err.split("--after ", 1)[1].strip()
    second = cli("runs", "list", "--limit", "2", "--after", cursor, "--json").json()
    everything = cli("runs", "list", "--json").json()
    assert [r["runId"] for r in second] == [r["runId"] for r in everything[2:4]]
    # The cursor of a JSON page is made from its last row: updatedAt~tenantId~runId.
    last = everything[3]
    rest = cli(
        "runs",
        "list",
        "--after",
        f"{last['updatedAt']}~{last['tenantId']}~{last['runId']}",
        "--json",
    ).json()
    assert [r["runId"] for r in rest] == [everything[4]["runId"]]


def test_an_unknown_workflow_is_an_error_with_a_suggestion(cli: Cli, store: Store) -> None:
    send(store, "user.signed-up", SIGNUP)
    result = cli("runs", "list", "--workflow", "user-onbording")
    assert result.code == 2 and result.out == ""
    assert "no workflow named 'user-onbording'" in result.err
    assert "did you mean 'user-onboarding'?" in result.err
    assert cli("runs", "list", "--version", "2").code == 2  # --version needs --workflow


def test_rows_older_releases_wrote_show_their_version_from_the_fingerprint(
    cli: Cli, store: Store
) -> None:
    run_id = send(store, "user.signed-up", SIGNUP).started[0].run_id
    store.conn.execute("UPDATE workflow_runs SET workflow_version = NULL")  # as 0.1.0 left it
    listed = cli("runs", "list", "--workflow", "user-onboarding", "--version", "1", "--json")
    assert [(r["runId"], r["workflowVersion"]) for r in listed.json()] == [(run_id, 1)]


def test_a_unique_prefix_names_a_run_everywhere(cli: Cli, store: Store) -> None:
    run_id = send(store, "user.signed-up", SIGNUP).started[0].run_id
    prefix = run_id[:8]
    shown = cli("runs", "show", prefix, "--json")
    assert shown.code == 0 and shown.json()["runId"] == run_id
    assert cli("show", prefix).out.startswith(f"run {run_id}")
    assert cli("graph", "user-onboarding", "--run", prefix, "--json").code == 0
    cancelled = cli("cancel", prefix.upper(), "--reason", "test", "--json")
    assert cancelled.json()["runId"] == run_id
    short = cli("show", run_id[:3])
    assert short.code == 2 and "at least its first 4 hex digits" in short.err


def test_an_ambiguous_prefix_lists_the_candidates(cli: Cli, store: Store) -> None:
    run_id = send(store, "user.signed-up", SIGNUP).started[0].run_id
    send(store, "user.signed-up", SIGNUP, tenant=TENANT_B)  # run ids carry no tenant
    result = cli("show", run_id[:8])
    assert result.code == 2 and "is ambiguous" in result.err
    assert f"{run_id}  tenant {TENANT}" in result.err
    assert f"{run_id}  tenant {TENANT_B}" in result.err
    assert cli("show", run_id[:8], "--tenant", TENANT_B, "--json").json()["tenantId"] == TENANT_B


def test_resume_at_a_step_the_run_is_not_waiting_at_names_the_real_one(
    cli: Cli, store: Store
) -> None:
    run_id = send(store, "user.signed-up", SIGNUP).started[0].run_id
    before = table_count(store, "wf_events")
    result = cli("resume", run_id, "--step", "0", "--force")
    assert result.code == 1
    assert "waits at step 1, not step 0; nothing was resumed" in result.err
    assert table_count(store, "wf_events") == before
    done = cli("resume", run_id, "--force", "--reason", "customer in a hurry")
    assert done.code == 0 and done.out.startswith("suspended")
    again = cli("resume", run_id, "--step", "1", "--force")
    assert again.code == 1 and "waits at step 4, not step 1" in again.err


def test_actions_are_recorded_on_the_stream_before_their_effect(cli: Cli, store: Store) -> None:
    run_id = send(store, "user.signed-up", SIGNUP).started[0].run_id
    assert cli("resume", run_id, "--force", "--reason", "asked by support").code == 0
    assert cli("cancel", run_id, "--reason", "user left").code == 0
    events = cli("show", run_id, "--json").json()["events"]
    types = [e["type"] for e in events]
    assert types[2:4] == ["workflow.operator-action", "workflow.step.resumed"]
    assert types[-2:] == ["workflow.operator-action", "workflow.run-cancelled"]
    resume, cancel = events[2]["payload"], events[-2]["payload"]
    assert (resume["action"], resume["stepIndex"], resume["reason"]) == (
        "resume",
        1,
        "asked by support",
    )
    assert cancel["action"] == "cancel" and cancel["by"].startswith("cli (")
    text = cli("show", run_id).out
    assert "operator-action" in text and "cancel by cli (" in text


def test_a_redrive_that_fails_again_exits_1(cli: Cli, store: Store) -> None:
    env = {"WORKFLOW_MODULES": "sample_workflows,oncall_workflows"}
    oncall_workflows = importlib.import_module("oncall_workflows")
    oncall_workflows.BROKEN["yes"] = True
    run_id = send(store, "oncall.partner-requested", {}).started[0].run_id
    assert cli("show", run_id, "--json").json()["status"] == "failed"
    again = cli("redrive", run_id, env=env)
    assert again.code == 1 and again.out.startswith("redriven from step 0: failed")
    assert f"run {run_id} failed again" in again.err
    oncall_workflows.BROKEN["yes"] = False
    fixed = cli("redrive", run_id, "--json", env=env)
    assert fixed.code == 0 and fixed.json()["outcome"] == "completed"


def test_pending_without_a_tenant_spans_tenants(cli: Cli, store: Store) -> None:
    send(store, "user.signed-up", SIGNUP)
    send(store, "user.signed-up", {"userId": "bob", "email": "b@x.io"}, tenant=TENANT_B)
    rows = cli("pending", "--json").json()
    assert {r["tenantId"] for r in rows} == {TENANT, TENANT_B}
