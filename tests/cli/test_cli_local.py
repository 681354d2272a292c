"""`wfr local put-events | tick | clock | mail`: the functions of template.yaml on the
test database, with a business clock that persists between invocations."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

import pytest
from cli_support import TENANT, Cli, table_count
from workflow_runner import ports
from workflow_runner.aws import lambda_support
from workflow_runner.durations import format_instant
from workflow_runner.local.sink import webhook_sink
from workflow_runner.store import Store
from workflow_runner.testing import WorkflowTestEnv

from tests.support import nested

T0 = "2026-01-05T09:00:00Z"


def entry(detail_type: str, **detail: Any) -> dict[str, Any]:
    return {
        "Source": "shop",
        "DetailType": detail_type,
        "Detail": json.dumps({"tenantId": TENANT, **detail}),
        "EventBusName": "workflow-runner-dev",
    }


def write(tmp_path: Path, value: Any, name: str = "events.json") -> str:
    path = tmp_path / name
    path.write_text(value if isinstance(value, str) else json.dumps(value))
    return str(path)


def runs(cli: Cli) -> dict[str, str]:
    listed = cli("runs", "list", "--tenant", TENANT, "--json").json()
    return {r["workflowName"]: r["status"] for r in listed}


def test_put_events_starts_runs_and_runs_what_follows(
    cli: Cli, store: Store, tmp_path: Path
) -> None:
    file = write(tmp_path, [entry("user.signed-up", userId="active-ada", email="ada@example.com")])
    result = cli("local", "put-events", file, "--now", T0)
    assert result.code == 0, result.err
    assert "trigger_projection: started user-onboarding" in result.out
    assert "step 1: wait until 2026-01-06T09:00:00Z" in result.out
    assert "mail to ada@example.com: Welcome!" in result.out  # the nudged dispatcher ran
    assert runs(cli) == {"user-onboarding": "waiting"}
    pending = cli("pending", "--tenant", TENANT, "--json").json()
    assert len(pending) == 1  # the nudged projection ran too


def test_put_events_accepts_full_events_and_the_entries_wrapper(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    full = {
        "detail-type": "data.processed",
        "source": "exports",
        "detail": {"tenantId": TENANT, "webhookUrl": "https://h.example.com/x", "data": {}},
    }
    assert cli("local", "put-events", write(tmp_path, full), "--now", T0).code == 0
    wrapped = {"Entries": [entry("user.signed-up", userId="u1", email="u1@example.com")]}
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(wrapped)))
    result = cli("local", "put-events", "-", "--json")
    assert result.code == 0
    body = result.json()
    assert body["now"] == "2026-01-05T09:00:00.000000Z"  # the clock persisted
    event = body["events"][0]
    assert event["detailType"] == "user.signed-up"
    assert event["routedTo"] == ["trigger_projection", "event_wakeup"]
    started = event["functions"][0]["response"]["started"]
    assert started[0]["workflow"] == "user-onboarding"
    assert [m["subject"] for m in event["mail"]] == ["Welcome!"]
    assert set(runs(cli)) == {"webhook-delivery", "user-onboarding"}
    # The nudged worker ran the webhook task: h.example.com does not resolve here, a
    # network error, so the task waits for its retry.
    assert runs(cli)["webhook-delivery"] == "waiting"


def test_an_awaited_event_wakes_its_run_at_once(cli: Cli, tmp_path: Path) -> None:
    placed = entry("order.placed", orderId="o-1", total=10, email="a@example.com")
    cli("local", "put-events", write(tmp_path, [placed]), "--now", T0)
    approved = entry("order.approved", orderId="o-1", approver="carol")
    result = cli("local", "put-events", write(tmp_path, [approved], "approved.json"))
    assert result.code == 0
    assert "event_wakeup: woke" in result.out
    assert "resumed by event" in result.out
    assert runs(cli) == {"order-approval": "completed"}


def test_time_travel_across_days_with_real_webhooks(cli: Cli, tmp_path: Path) -> None:
    signup = entry("user.signed-up", userId="bob", email="bob@example.com")
    with webhook_sink() as sink:
        env = {"WFR_WEBHOOK_REDIRECTS": f"hooks.example.com={sink.url}"}
        cli("local", "put-events", write(tmp_path, [signup]), "--now", T0, env=env)
        day = cli("local", "tick", "--until", "2026-01-06T12:00:00Z", "--every", "PT6H", env=env)
        assert day.code == 0
        # The wait of one day fires at its time, not at the next 6-hourly tick.
        assert "── 2026-01-06T09:00:00Z" in day.out
        assert "mail to bob@example.com: Getting started" in day.out
        # The cron workflow ran at 09:00 too (the due scan starts it for every tenant).
        assert runs(cli) == {"user-onboarding": "waiting", "daily-report": "completed"}
        week = cli(
            "local",
            "tick",
            "--until",
            "2026-01-13T10:00:00Z",
            "--every",
            "P1D",
            "--json",
            env=env,
        )
        assert week.code == 0
        received = [(r.method, r.path, r.body) for r in sink.received]
    assert runs(cli)["user-onboarding"] == "completed"
    assert ("POST", "/crm-onboarding", {"userId": "bob", "stage": "day8"}) in received
    assert all(r.idempotency_key for r in sink.received)
    cycles = week.json()["cycles"]
    assert cycles[-1]["now"] == "2026-01-13T10:00:00.000000Z"
    mail = cli("local", "mail", "--json").json()
    assert [m["subject"] for m in mail] == ["Welcome!", "Getting started"]


def test_retries_fire_at_their_backoff_times(cli: Cli, tmp_path: Path) -> None:
    changed = entry("inventory.changed", sku="s-1", revision=1, failAttempts=2)
    cli("local", "put-events", write(tmp_path, [changed]), "--now", T0)
    result = cli("local", "tick", "--until", "2026-01-05T09:10:00Z", "--every", "PT5M", "--json")
    events = [
        (e["recordedAt"], e["type"])
        for cycle in result.json()["cycles"]
        for e in cycle["events"]
        if e["streamType"] == "workflow-run"
    ]
    assert ("2026-01-05T09:00:30.000000Z", "workflow.retry.scheduled") in events
    assert ("2026-01-05T09:01:30.000000Z", "workflow.run-completed") in events


def test_the_clock_persists_and_only_moves_forward(cli: Cli, store: Store, tmp_path: Path) -> None:
    assert cli("local", "tick", "--now", "2026-02-01T00:00:00Z").code == 0
    clock = cli("local", "clock", "--json").json()
    assert clock == {"now": "2026-02-01T00:00:00.000000Z", "queue": []}
    assert "nothing was due" in cli("local", "tick").out
    before = table_count(store, "wf_events")
    back = cli("local", "tick", "--now", "2026-01-01T00:00:00Z")
    assert back.code == 2 and "local time only moves forward" in back.err
    signup = write(tmp_path, [entry("user.signed-up", userId="u", email="u@example.com")])
    back_put = cli("local", "put-events", signup, "--now", "2026-01-01T00:00:00Z")
    assert back_put.code == 2
    assert table_count(store, "wf_events") == before
    assert cli("local", "clock", "--json").json()["now"] == "2026-02-01T00:00:00.000000Z"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "events.json is not JSON (line 1, column 2"),
        ("[]", "expected a non-empty list"),
        (
            '[{"Source": "s", "DetailType": "user.signed-up", "Detail": "{oops"}]',
            "entry 1: Detail is not JSON (line 1, column 2",
        ),
        ('[{"Source": "s", "Detail": "{}"}]', "entry 1: needs Source, DetailType and Detail"),
        ("[" * 100_000 + "]" * 100_000, "events.json is nested deeper than 102 levels (the limit)"),
        (
            json.dumps([entry("user.signed-up") | {"Detail": "[" * 100_000}]),
            "entry 1: Detail is nested deeper than 99 levels (the limit)",
        ),
        (
            json.dumps([entry("user.signed-up", blob="x" * 300_000)]),
            "entry 1: Detail is 300064 bytes, over the 262144-byte limit",
        ),
        (
            '[{"Source": "s", "DetailType": "user.signed-up", "Detail": "{\\"userId\\": 1}"}]',
            "entry 1:",
        ),
    ],
)
def test_a_malformed_event_file_writes_nothing(
    cli: Cli, store: Store, tmp_path: Path, content: str, message: str
) -> None:
    result = cli("local", "put-events", write(tmp_path, content), "--now", T0)
    assert result.code == 2
    assert message in result.err and result.err.startswith("wfr: error: ")
    assert table_count(store, "inbox") == 0
    assert table_count(store, "local_runtime_clock") == 0


def test_an_event_nested_to_the_limit_starts_its_run(cli: Cli, tmp_path: Path) -> None:
    """A detail 99 levels deep makes an event of 100, the most an event may nest, in a
    file two levels deeper still ({"Entries": [...]})."""
    deep = {"Source": "shop", "DetailType": "user.signed-up", "EventBusName": "dev"}
    detail = {"tenantId": TENANT, "userId": "u", "email": "u@example.com", "deep": nested(98)}
    full = {"detail-type": "user.signed-up", "source": "shop", "detail": detail | {"userId": "v"}}
    entries = {"Entries": [deep | {"Detail": json.dumps(detail)}, full]}
    result = cli("local", "put-events", write(tmp_path, entries), "--now", T0)
    assert result.code == 0, result.err
    listed = cli("runs", "list", "--tenant", TENANT, "--json").json()
    assert sorted(r["workflowName"] for r in listed) == ["user-onboarding", "user-onboarding"]


def test_one_bad_entry_stops_the_whole_file(cli: Cli, store: Store, tmp_path: Path) -> None:
    good = entry("user.signed-up", userId="u", email="u@example.com")
    bad = {"Source": "s", "DetailType": "user.signed-up", "Detail": json.dumps({"x": 1})}
    result = cli("local", "put-events", write(tmp_path, [good, bad]))
    assert result.code == 2 and "entry 2:" in result.err
    assert table_count(store, "inbox") == 0 and table_count(store, "wf_events") == 0


def test_bad_time_arguments(cli: Cli, tmp_path: Path) -> None:
    file = write(tmp_path, [entry("user.signed-up", userId="u", email="u@example.com")])
    bad_now = cli("local", "put-events", file, "--now", "yesterday")
    assert bad_now.code == 2 and 'Invalid ISO-8601 instant "yesterday"' in bad_now.err
    assert cli("local", "tick", "--until", T0).code == 2  # --until without --every
    bad_every = cli("local", "tick", "--until", T0, "--every", "1 hour")
    assert bad_every.code == 2 and "--every" in bad_every.err
    missing = cli("local", "put-events", str(tmp_path / "nope.json"))
    assert missing.code == 2 and "cannot read" in missing.err


def test_an_event_no_workflow_uses_is_ignored(cli: Cli, store: Store, tmp_path: Path) -> None:
    result = cli("local", "put-events", write(tmp_path, [entry("user.deleted", userId="u")]))
    assert result.code == 0
    assert "trigger_projection: ignored (no registered workflow is triggered" in result.out
    assert table_count(store, "inbox") == 0


def test_the_local_runtime_leaves_the_process_as_it_found_it(cli: Cli, tmp_path: Path) -> None:
    before = getattr(ports, "_runtime", None)
    cli(
        "local",
        "put-events",
        write(tmp_path, [entry("user.signed-up", userId="u", email="u@example.com")]),
    )
    assert getattr(ports, "_runtime", None) is before
    assert "POWERTOOLS_METRICS_DISABLED" not in os.environ
    assert lambda_support.metrics.metric_set == {}  # nothing left for a later flush


def test_runs_show_links_a_parent_and_its_child_runs(cli: Cli, tmp_path: Path) -> None:
    orders = [{"orderId": f"o-{n}", "email": "c@example.com"} for n in range(3)]
    batch = entry("batch.submitted", batchId="b-1", orders=orders)
    assert cli("local", "put-events", write(tmp_path, [batch]), "--now", T0).code == 0
    listed = cli("runs", "list", "--tenant", TENANT, "--json").json()
    parent = next(r["runId"] for r in listed if r["workflowName"] == "batch-fulfilment")
    shown = cli("runs", "show", parent, "--tenant", TENANT, "--json").json()
    # Every child ended; the batch waits for finance to approve its invoice run.
    assert shown["status"] == "waiting" and shown["parentRunId"] is None
    children = shown["children"]
    assert [(c["workflowName"], c["index"], c["status"]) for c in children] == [
        ("fulfil-order", n, "completed") for n in range(3)
    ]
    child = cli("runs", "show", children[0]["runId"], "--tenant", TENANT)
    assert f"child of run {parent}" in child.out
    text = cli("runs", "show", parent, "--tenant", TENANT).out
    assert "CHILD RUN" in text and children[2]["runId"] in text


def test_every_duration_option_takes_both_spellings(cli: Cli, tmp_path: Path) -> None:
    """`--every 6h` was refused while `--since 2h` was accepted: one parser now reads
    every duration a person types, ISO-8601 or a number and a unit."""
    signup = entry("user.signed-up", userId="ada", email="ada@example.com")
    assert cli("local", "put-events", write(tmp_path, [signup]), "--now", T0).code == 0
    for args in (
        ("local", "tick", "--until", "2026-01-06T12:00:00Z", "--every", "6h"),
        ("runs", "list", "--since", "2h"),
        ("runs", "list", "--since", "PT2H"),
        ("purge", "--dry-run", "--older-than", "2h"),
        ("dispatches", "list", "--since", "1h30m"),
    ):
        result = cli(*args)
        assert result.code == 0, (args, result.err)
    bad = cli("local", "tick", "--until", "2026-01-07T12:00:00Z", "--every", "6 hours")
    assert bad.code == 2
    assert 'Invalid duration "6 hours"' in bad.err and '"6h"' in bad.err


def test_cron_runs_start_at_their_instant_in_wfr_local_as_in_the_test_kit(
    cli: Cli, tmp_path: Path, pg_server_url: str
) -> None:
    """`--every P1D` from 10:05 ran the 09:00 report at 10:05 (a day late, the tenant's
    cron clock only starting at the first tick); the kit ran it at 09:00. Both stop at
    every cron instant now, and both start with a cycle, as the minutely schedule would."""
    signup = entry("user.signed-up", userId="ada", email="ada@example.com")
    start, until = "2026-01-05T10:05:00Z", "2026-01-07T10:05:00Z"
    cli("local", "put-events", write(tmp_path, [signup]), "--now", start)
    result = cli("local", "tick", "--until", until, "--every", "P1D", "--json")
    assert result.code == 0, result.err
    local = sorted(
        (e["payload"]["cronScheduledAt"], e["recordedAt"])
        for cycle in result.json()["cycles"]
        for e in cycle["events"]
        if e["type"] == "workflow.run-started" and e["payload"].get("cronScheduledAt")
    )
    assert local == [
        ("2026-01-06T09:00:00.000000Z", "2026-01-06T09:00:00.000000Z"),
        ("2026-01-07T09:00:00.000000Z", "2026-01-07T09:00:00.000000Z"),
    ]
    with WorkflowTestEnv(
        modules=["sample_workflows"], now=start, database_url=pg_server_url
    ) as env:
        env.put_event(tenant=TENANT, type="user.signed-up", payload=json.loads(signup["Detail"]))
        env.advance_to(until)
        kit = sorted(
            (r.events[0].payload["cronScheduledAt"], format_instant(r.events[0].recorded_at))
            for r in env.runs(tenant=TENANT, workflow="daily-report")
        )
    assert kit == local


def test_a_repeated_trigger_names_the_run_that_already_exists(cli: Cli, tmp_path: Path) -> None:
    signup = entry("user.signed-up", userId="ada", email="ada@example.com")
    first = cli("local", "put-events", write(tmp_path, [signup], "a.json"), "--now", T0)
    [run] = cli("runs", "list", "--json").json()
    again = cli("local", "put-events", write(tmp_path, [signup], "b.json"))
    assert again.code == 0 and first.code == 0
    assert (
        f"trigger_projection: started nothing: user-onboarding run {run['runId']} already "
        "exists for idempotency key 'onboarding:ada' (waiting)"
    ) in again.out
    as_json = cli("--json", "local", "put-events", write(tmp_path, [signup], "c.json")).json()
    answer = as_json["events"][0]["functions"][0]["response"]
    assert answer["started"] == []
    assert answer["existing"] == [
        {"workflow": "user-onboarding", "runId": run["runId"], "key": "onboarding:ada"}
    ]
    cheap = entry("order.placed", orderId="o-0", total=0, email="a@example.com")
    filtered = cli("local", "put-events", write(tmp_path, [cheap], "d.json"))
    assert "started nothing: order-approval's trigger filter said no" in filtered.out
