"""What operators see of flow control: `wfr runs show` says what holds a run back and
which limit, `wfr limits` lists keys with their work in flight and queued, `wfr runs list
--skipped` the triggers that started nothing, with why."""

from __future__ import annotations

import io
import json
import re
from typing import Any

from workflow_runner.cli import main
from workflow_runner.store import Store

from tests.flow.flows import at, held_run, put, run_of
from tests.support import TENANT_A


def wfr(db_url: str, *argv: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(
        list(argv),
        out=out,
        err=err,
        environ={"DATABASE_URL": db_url, "WORKFLOW_MODULES": "sample_workflows"},
    )
    return code, out.getvalue() + err.getvalue()


def test_runs_show_says_which_limit_holds_a_run_back(db_url: str, store: Store) -> None:
    run_id = held_run(store)
    code, text = wfr(db_url, "runs", "show", run_id, "--tenant", TENANT_A)
    assert code == 0, text
    assert "run waits for concurrency 2 of per-account key 'a-1' (per tenant)" in text
    assert "until a slot frees" in text

    code, text = wfr(db_url, "runs", "show", run_id, "--tenant", TENANT_A, "--json")
    shown: dict[str, Any] = json.loads(text)
    assert [w.split(" until")[0] for w in shown["limitWaits"]] == [
        "run waits for concurrency 2 of per-account key 'a-1' (per tenant)"
    ]


def test_runs_show_says_when_a_throttled_run_starts(db_url: str, store: Store) -> None:
    for n in range(3):
        put(store, "throttled", n)
    code, text = wfr(db_url, "runs", "show", run_of("throttled", 2), "--tenant", TENANT_A)
    assert code == 0, text
    assert "run waits for throttle: throttle 10 per 0:01:00 of throttled key 'a-1'" in text
    assert "until 2030-01-01T09:00:12+00:00" in text


def test_the_console_says_when_a_throttled_run_starts(db_url: str, store: Store) -> None:
    from tests.console.console_support import console

    for n in range(3):
        put(store, "throttled", n)

    shown = console(db_url).get(f"/runs/{run_of('throttled', 2)}", tenant=TENANT_A)

    assert shown.status == 200
    where = re.search(r'<p class="where">(.*?)</p>', shown.text)
    assert where is not None, shown.text
    assert "Held before its first step by flow control (throttle); starts " in where[1]
    assert 'datetime="2030-01-01T09:00:12Z"' in where[1]


def test_wfr_limits_lists_keys_with_work_in_flight_and_queued(db_url: str, store: Store) -> None:
    held_run(store)
    for n in range(4):
        put(store, "throttled", n)
    code, text = wfr(db_url, "limits", "--json", "--now", at(61).isoformat())
    assert code == 0, text
    rows = {(r["kind"], r["workflowName"]): r for r in json.loads(text)}
    concurrency = rows[("concurrency", "per-account")]
    assert (concurrency["limit"], concurrency["keyValue"]) == (2, "a-1")
    assert (concurrency["inFlight"], concurrency["queued"]) == (2, 1)
    throttle = rows[("throttle", "throttled")]
    assert throttle["limit"] == 10 and throttle["periodMs"] == 60_000

    code, text = wfr(db_url, "limits", "--workflow", "per-account", "--now", at(61).isoformat())
    assert code == 0 and "per-account" in text and "throttled" not in text, text


def test_runs_list_skipped_says_why_a_trigger_started_nothing(db_url: str, store: Store) -> None:
    for n in range(5):
        put(store, "rate-limited", n, now=at(n))
    put(store, "singleton-skip", 1)
    put(store, "singleton-skip", 2)
    code, text = wfr(db_url, "runs", "list", "--skipped", "--json")
    assert code == 0, text
    reasons = sorted((s["workflowName"], s["reason"]) for s in json.loads(text))
    assert reasons == [
        ("rate-limited", "rate_limit"),
        ("rate-limited", "rate_limit"),
        ("singleton-skip", "singleton"),
    ]
    code, text = wfr(db_url, "runs", "--skipped", "--workflow", "singleton-skip")
    assert code == 0 and "singleton: a run of this key has not settled (key 'a-1')" in text


def test_the_console_shows_the_limits_page_and_what_holds_a_run_back(
    db_url: str, store: Store
) -> None:
    from tests.console.console_support import console

    run_id = held_run(store)
    client = console(db_url)
    limits = client.get("/limits")
    assert limits.status == 200
    assert "per-account" in limits.text and "a-1" in limits.text
    assert 'href="/limits"' in client.get("/").text

    shown = client.get(f"/runs/{run_id}", tenant=TENANT_A)
    assert shown.status == 200
    assert "Held by flow control: run waits for concurrency 2 of per-account" in shown.text
    # The held fact's wake time is when the run queued: the page does not offer it as
    # the time the run starts.
    assert "Held before its first step by flow control (concurrency); starts when a slot" in (
        shown.text
    )
    assert "Waiting at step 0 until" not in shown.text
