"""`wfr callbacks complete | list`: complete a wait_for_callback by hand, with the exit
codes of docs/operating/cli.md (0 done, 1 refused with the reason, 2 bad usage or input)."""

from __future__ import annotations

import importlib
import io
import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from cli_support import T0, TENANT, Cli, table_count
from workflow_runner import run_id_for
from workflow_runner.callback_tokens import callback_links, tokens_in
from workflow_runner.definition import default_registry, load_workflow_modules
from workflow_runner.engine import ingest_domain_event, project_pending
from workflow_runner.store import Store

from tests.support import event

BASE = "https://callbacks.example.com/"
ENV = {"WORKFLOW_MODULES": "callback_workflows", "CALLBACK_BASE_URL": BASE}
RUN = run_id_for("expense-approval", "e-1")


@pytest.fixture(autouse=True)
def _expense_workflow() -> Iterator[None]:
    """The workflow is in the default registry for these tests only: other tests of
    the process (doctor's template check) see the registry without it. Imported once
    per process, so it is registered again for each test."""
    module = importlib.import_module("callback_workflows")
    default_registry().register(module.expense_approval)
    default_registry().register(module.metered_review)
    yield
    default_registry().unregister("expense-approval")
    default_registry().unregister("metered-review")


def _file(tmp_path: Path, value: Any) -> str:
    path = tmp_path / "events.json"
    path.write_text(json.dumps(value))
    return str(path)


def _filed_locally(cli: Cli, tmp_path: Path, type: str = "expense.filed") -> str:
    """File expense (or report) e-1 on the local runtime; the link its mail carried."""
    entry = {
        "Source": "expenses",
        "DetailType": type,
        "Detail": json.dumps({"tenantId": TENANT, "expenseId": "e-1"}),
    }
    filed = cli("local", "put-events", _file(tmp_path, [entry]), "--now", T0.isoformat(), env=ENV)
    assert filed.code == 0, filed.err
    *_, mail = cli("local", "mail", "--json", env=ENV).json()
    (link,) = [word for word in mail["body"].split() if word.startswith(BASE)]
    return str(link)


def test_complete_on_a_local_database_resumes_the_run_at_once(cli: Cli, tmp_path: Path) -> None:
    link = _filed_locally(cli, tmp_path)

    done = cli("callbacks", "complete", link, "--payload", '{"approved": true}', env=ENV)

    assert done.code == 0, done.err
    assert f"completed  callback of run {RUN} step 1 (expense-approval)" in done.out
    shown = cli("show", RUN, "--json", env=ENV).json()
    assert shown["status"] == "completed"
    assert shown["events"][-1]["payload"]["result"] == {"approved": True}
    assert "callbackSecret" not in json.dumps(shown)


def test_a_second_completion_exits_1_with_the_reason_and_writes_nothing(
    cli: Cli, store: Store, tmp_path: Path
) -> None:
    link = _filed_locally(cli, tmp_path)
    assert cli("callbacks", "complete", link, "--payload", "1", env=ENV).code == 0
    events = table_count(store, "wf_events")

    again = cli("callbacks", "complete", link, "--payload", "2", "--json", env=ENV)

    assert again.code == 1
    assert again.json() == {
        "completed": False,
        "reason": "already_completed",
        "error": "this callback was completed before (a token is single-use)",
    }
    assert "wfr: error: this callback was completed before" in again.err
    assert table_count(store, "wf_events") == events


def test_an_unknown_or_expired_token_exits_1(cli: Cli, tmp_path: Path) -> None:
    link = _filed_locally(cli, tmp_path)
    result = cli("callbacks", "complete", "wfrcb_" + "A" * 43, "--payload", "{}", env=ENV)
    assert (result.code, result.err.strip()) == (1, "wfr: error: unknown callback token")
    after = (T0 + timedelta(days=3)).isoformat()
    late = cli("callbacks", "complete", link, "--payload", "{}", "--now", after, "--json", env=ENV)
    assert (late.code, late.json()["reason"]) == (1, "expired")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--payload", "{approved}"], "--payload is not JSON (line 1, column 2"),
        (["--payload", "[" * 100_000], "--payload is nested deeper than 100 levels (the limit)"),
        (
            ["--payload", json.dumps("x" * 300_000)],
            "--payload is 300002 bytes, over the 262144-byte limit",
        ),
        (["--payload-file", "/nonexistent/answer.json"], "--payload-file /nonexistent"),
        ([], ""),  # argparse: one of --payload and --payload-file is required
    ],
)
def test_bad_input_exits_2_and_writes_nothing(
    cli: Cli, store: Store, tmp_path: Path, argv: list[str], message: str
) -> None:
    link = _filed_locally(cli, tmp_path)
    events = table_count(store, "wf_events")
    result = cli("callbacks", "complete", link, *argv, env=ENV)
    assert result.code == 2
    assert message in result.err
    assert table_count(store, "wf_events") == events


def test_the_payload_can_come_from_a_file_or_stdin(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    link = _filed_locally(cli, tmp_path)
    monkeypatch.setattr("sys.stdin", io.StringIO('{"approved": false}'))
    result = cli("callbacks", "complete", link, "--payload-file", "-", "--json", env=ENV)
    assert result.code == 0, result.err
    body = result.json()
    assert (body["completed"], body["runId"], body["resumed"]) == (True, RUN, True)
    shown = cli("show", RUN, "--json", env=ENV).json()
    assert shown["events"][-1]["payload"]["result"] == {"approved": False}


def test_on_a_deployed_database_the_completion_leaves_the_resume_to_the_due_scan(
    cli: Cli, store: Store
) -> None:
    registry = load_workflow_modules({"WORKFLOW_MODULES": "callback_workflows"})
    with callback_links(BASE):
        filed = event("expense.filed", {"expenseId": "e-1"}, TENANT)
        ingest_domain_event(store, filed, T0, registry)
    project_pending(store, T0)
    request = store.conn.execute("SELECT request FROM dispatch_outbox").fetchone()
    assert request is not None
    (token,) = tokens_in(request["request"]["body"])
    later = (T0 + timedelta(hours=2)).isoformat()

    result = cli(
        "callbacks", "complete", token, "--payload", '{"approved": true}', "--now", later, env=ENV
    )

    assert result.code == 0, result.err
    assert "resumes at the deployment's next due scan" in result.out
    (row,) = store.pending.for_tenant(TENANT)
    assert row.awaited_event_id is not None and row.run_id == RUN
    listed = cli("callbacks", "list", "--run", RUN[:8], "--json", env=ENV).json()
    assert [(c["stepIndex"], c["status"]) for c in listed] == [(1, "completed")]
    assert listed[0]["eventId"] == row.awaited_event_id
    table = cli("callbacks", "list", "--run", RUN, env=ENV)
    assert "TOKEN SHA-256" in table.out and token not in table.out


@pytest.mark.parametrize(
    "base", ["callbacks.example.com/", "https://callbacks.example.com/?token=", "ftp://x.io/"]
)
def test_a_callback_base_url_that_cannot_carry_a_token_exits_2_and_writes_nothing(
    cli: Cli, store: Store, tmp_path: Path, base: str
) -> None:
    entry = {
        "Source": "expenses",
        "DetailType": "expense.filed",
        "Detail": json.dumps({"tenantId": TENANT, "expenseId": "e-1"}),
    }
    env = {**ENV, "CALLBACK_BASE_URL": base}
    result = cli("local", "put-events", _file(tmp_path, [entry]), "--now", T0.isoformat(), env=env)
    assert result.code == 2
    assert f"CALLBACK_BASE_URL: {base!r} is not an http(s) URL" in result.err
    assert table_count(store, "wf_events") == 0


# --- fail, heartbeat, list ------------------------------------------------------------------

REVIEW = run_id_for("metered-review", "e-1")


def test_fail_on_a_local_database_fails_the_run_at_once_and_stores_no_message(
    cli: Cli, store: Store, tmp_path: Path
) -> None:
    link = _filed_locally(cli, tmp_path)

    done = cli(
        "callbacks",
        "fail",
        link,
        "--error",
        "Rejected",
        "--message",
        "ann@example.com: no",
        env=ENV,
    )

    assert done.code == 0, done.err
    assert f"failed  callback of run {RUN} step 1 (expense-approval)" in done.out
    shown = cli("show", RUN, "--json", env=ENV).json()
    assert (shown["status"], shown["events"][-1]["payload"]["reason"]) == (
        "failed",
        "callback_failed",
    )
    assert "ann@" not in json.dumps(shown)
    assert [(c["status"], c["error"]) for c in shown["callbacks"]] == [("failed", "Rejected")]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--error", "no spaces please"], "is not an error name"),
        (["--error", "X", "--message", "x" * 2001], "over the 2000-character limit"),
        ([], ""),  # argparse: --error is required
    ],
)
def test_a_bad_failure_exits_2_and_writes_nothing(
    cli: Cli, store: Store, tmp_path: Path, argv: list[str], message: str
) -> None:
    link = _filed_locally(cli, tmp_path)
    events = table_count(store, "wf_events")
    result = cli("callbacks", "fail", link, *argv, env=ENV)
    assert result.code == 2 and message in result.err, result.err
    assert table_count(store, "wf_events") == events


def test_heartbeat_moves_the_deadline_and_list_shows_it(cli: Cli, tmp_path: Path) -> None:
    link = _filed_locally(cli, tmp_path, "report.filed")
    later = (T0 + timedelta(minutes=40)).isoformat()

    beat = cli("callbacks", "heartbeat", link, "--now", later, "--json", env=ENV)

    assert beat.code == 0, beat.err
    body = beat.json()
    assert (body["recorded"], body["runId"]) == (True, REVIEW)
    assert body["deadline"].startswith((T0 + timedelta(minutes=100)).isoformat()[:16])
    (listed,) = cli("callbacks", "list", "--run", REVIEW, "--json", env=ENV).json()
    assert listed["status"] == "waiting" and listed["heartbeatSeconds"] == 3600
    assert listed["lastHeartbeatAt"].startswith(later[:16])
    assert listed["deadline"] == body["deadline"]
    table = cli("callbacks", "list", "--run", REVIEW, env=ENV).out
    assert "LAST HEARTBEAT" in table and "(heartbeat)" in table
    shown = cli("show", REVIEW, env=ENV).out
    assert "callback of step 1 open until 2026-" in shown and "last heartbeat" in shown


def test_a_heartbeat_to_a_callback_without_an_interval_exits_1(cli: Cli, tmp_path: Path) -> None:
    link = _filed_locally(cli, tmp_path)
    result = cli("callbacks", "heartbeat", link, "--json", env=ENV)
    assert (result.code, result.json()["reason"]) == (1, "no_heartbeat")


def test_list_with_a_tenant_shows_its_open_callbacks_soonest_deadline_first(
    cli: Cli, tmp_path: Path
) -> None:
    _filed_locally(cli, tmp_path)  # deadline in 3 days
    _filed_locally(cli, tmp_path, "report.filed")  # in an hour

    listed = cli("callbacks", "list", "--tenant", TENANT, "--json", env=ENV).json()

    assert [c["runId"] for c in listed] == [REVIEW, RUN]
    assert all(c["status"] == "waiting" for c in listed)
    none = cli("callbacks", "list", env=ENV)
    assert none.code == 2 and "give --run RUN_ID" in none.err


def test_local_mail_shows_bodies_so_the_callback_link_is_at_hand(cli: Cli, tmp_path: Path) -> None:
    """The token a callback mail carried needed --json to be seen."""
    link = _filed_locally(cli, tmp_path)
    shown = cli("local", "mail", env=ENV)
    assert shown.code == 0
    assert "Subject: Approve expense?" in shown.out and "To: boss@example.com" in shown.out
    assert f"Approve or reject: {link}" in shown.out
    latest = cli("local", "mail", "--to", "boss@example.com", "--last", "1", env=ENV)
    assert link in latest.out
    assert "no mail" in cli("local", "mail", "--to", "nobody@example.com", env=ENV).out
