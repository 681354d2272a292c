"""The console's pages on a real PostgreSQL, requested through its WSGI application."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from console_support import T0, Client, console, populate, send
from workflow_runner import on_event
from workflow_runner.definition import WorkflowRegistry
from workflow_runner.engine import resume_run, wake_on_event
from workflow_runner.store import Store

from tests.support import TENANT_A, TENANT_B, event, register, trigger


@pytest.fixture
def client(db_url: str) -> Client:
    return console(db_url)


def _rows(text: str) -> list[str]:
    body = text.split("<tbody>", 1)[1].split("</tbody>", 1)[0] if "<tbody>" in text else ""
    return re.findall(r"<tr>(.*?)</tr>", body)


def test_runs_list_names_each_run_workflow_and_status_across_tenants(
    client: Client, store: Store
) -> None:
    runs = populate(store)
    page = client.get("/")
    assert page.status == 200 and page.headers["Content-Type"].startswith("text/html")
    rows = _rows(page.text)
    assert len(rows) == len(runs.ids)
    for name, run_id in runs.ids.items():
        row = next(r for r in rows if run_id in r)
        assert runs.tenants[name][:8] in row
    assert any("inventory-sync" in r and "status-failed" in r for r in rows)
    assert any("user-onboarding" in r and TENANT_B[:8] in r for r in rows)


def test_runs_list_filters(client: Client, store: Store) -> None:
    runs = populate(store)
    failed = _rows(client.get("/", status="failed").text)
    assert len(failed) == 1 and runs.ids["failed"] in failed[0]
    onboarding = _rows(client.get("/", workflow="user-onboarding", version="1").text)
    assert {runs.ids["onboarding"], runs.ids["onboarding-b"]} == {
        re.search(r"/runs/([0-9a-f-]{36})", r).group(1)
        for r in onboarding  # type: ignore[union-attr]
    }
    assert _rows(client.get("/", workflow="user-onboarding", version="2").text) == []
    tenant_b = _rows(client.get("/", tenant=TENANT_B).text)
    assert len(tenant_b) == 1 and runs.ids["onboarding-b"] in tenant_b[0]
    by_key = _rows(client.get("/", key="r-3").text)
    assert len(by_key) == 1 and runs.ids["order"] in by_key[0]
    recent = _rows(client.get("/", since="2026-01-05T10:00:00Z").text)
    assert [runs.ids["failed"] in r for r in recent] == [True]


def test_bad_filters_are_named_and_list_nothing(client: Client, store: Store) -> None:
    populate(store)
    typo = client.get("/", workflow="order-aproval")
    assert typo.status == 400
    assert "did you mean &#x27;order-approval&#x27;" in typo.text
    assert _rows(typo.text) == []
    bad_since = client.get("/", since="yesterday")
    assert bad_since.status == 400 and "since: expected an instant" in bad_since.text
    assert client.get("/", tenant="acme").status == 400
    assert client.get("/", after="garbage").status == 400


def test_runs_list_pages_by_keyset_without_gaps_or_repeats(client: Client, store: Store) -> None:
    # 120 summaries, many sharing an updated_at: the keyset must break ties by tenant, id.
    for n in range(120):
        tenant = TENANT_A if n % 2 else TENANT_B
        store.runs.upsert(
            tenant,
            f"00000000-0000-4000-8000-{n:012d}",
            "user-onboarding",
            "waiting",
            2,
            "f" * 64,
            "user.signed-up",
            T0 + timedelta(seconds=n // 7),
            workflow_version=1,
        )
    seen: list[str] = []
    page = client.get("/")
    pages = 0
    while True:
        pages += 1
        seen += re.findall(r'href="/runs/([0-9a-f-]{36})\?tenant=([0-9a-f-]{36})"', page.text)
        found = re.search(r'href="/\?after=([^"]+)" class="btn" rel="next"', page.text)
        if not found:
            break
        page = client.get("/", after=found.group(1).replace("%7E", "~").replace("%3A", ":"))
    assert pages == 3
    assert len(seen) == 120 and len(set(seen)) == 120


def test_run_page_shows_timeline_graph_pending_row_and_results(
    client: Client, store: Store
) -> None:
    runs = populate(store)
    page = client.get(f"/runs/{runs.ids['order']}", tenant=TENANT_A)
    assert page.status == 200
    text = page.text
    assert "order-approval" in text and "status-waiting" in text
    assert '<svg xmlns="http://www.w3.org/2000/svg"' in text
    # The run waits at its wait_for_event step (s1): current; the mail before it: visited.
    assert re.search(r'class="node hexagon current" data-node="s1"', text)
    assert re.search(r'class="node subroutine visited" data-node="s0"', text)
    assert "step.waiting-for-event" in text and "run-started" in text
    assert "step.dispatch-requested" in text  # the delivery's stream is on the timeline
    assert "Pending row" in text and "order.approved" in text
    assert "Idempotency key" in text and "r-3" in text


def test_failed_run_page_marks_the_failed_step(client: Client, store: Store) -> None:
    runs = populate(store)
    text = client.get(f"/runs/{runs.ids['failed']}").text
    assert "status-failed" in text
    assert re.search(r'class="node \w+ failed" data-node="s0_0"', text)
    assert "failed at step 0" in text and "PartnerUnavailable" in text


def test_awaited_results_are_shown_by_reference_never_copied(db_url: str, store: Store) -> None:
    registry = WorkflowRegistry()
    register(
        registry,
        name="approval-then-wait",
        trigger=on_event("thing.requested"),
        awaits={"approved": "thing.approved"},
        steps=lambda s: [
            s.compute("asked", lambda ctx: {"by": "tests"}),
            s.wait_for_event(event="thing.approved", timeout="P1D", result_key="approval"),
            s.wait(for_="PT1H"),
            s.return_({"isSuccess": True}),
        ],
    )
    run_id = trigger(store, registry, "thing.requested", {}, T0).started[0].run_id
    woken = wake_on_event(store, event("thing.approved", {"secret": "s3cr3t-payload"}), T0)
    assert [w.run_id for w in woken] == [run_id]
    resume_run(store, TENANT_A, run_id, 1, T0, registry=registry)
    client = console(db_url)
    client.app.config.registry = registry
    text = client.get(f"/runs/{run_id}").text
    assert "awaited event" in text and woken[0].event_id in text
    assert "s3cr3t-payload" not in text  # the payload stays in the inbox
    assert "&quot;by&quot;: &quot;tests&quot;" in text  # ordinary results are shown


def test_run_ids_by_prefix_ambiguity_and_absence(client: Client, store: Store) -> None:
    runs = populate(store)
    prefix = client.get(f"/runs/{runs.ids['order'][:8]}")
    assert prefix.status == 200 and runs.ids["order"] in prefix.text
    # The same run id in two tenants (run ids carry no tenant): the prefix is ambiguous.
    shared = send(
        store, "user.signed-up", {"userId": "ada", "email": "x@example.com"}, tenant=TENANT_B
    )
    assert shared == runs.ids["onboarding"]
    both = client.get(f"/runs/{shared[:6]}")
    assert "Which run?" in both.text and TENANT_A in both.text and TENANT_B in both.text
    assert client.get(f"/runs/{shared}", tenant=TENANT_B).status == 200
    assert client.get("/runs/0000abcd").status == 404
    assert client.get("/runs/abc").status == 404  # too short to be a prefix: no such page


def test_values_from_workflows_and_operators_are_escaped(client: Client, store: Store) -> None:
    order = {"orderId": "<script>alert(1)</script>", "total": 1, "email": "f@example.com"}
    run_id = send(store, "order.placed", order)
    from workflow_runner.engine.cancel import cancel_run

    cancel_run(store, TENANT_A, run_id, T0, reason='<img src=x onerror="alert(2)">')
    text = client.get(f"/runs/{run_id}").text
    assert "<script>alert(1)" not in text and "&lt;script&gt;alert(1)" in text
    assert "<img src=x" not in text and "&lt;img src=x onerror=" in text


def test_pending_page_lists_waiting_runs_of_every_tenant_soonest_first(
    client: Client, store: Store
) -> None:
    runs = populate(store)
    rows = _rows(client.get("/pending").text)
    ids = [re.search(r"/runs/([0-9a-f-]{36})", r).group(1) for r in rows]  # type: ignore[union-attr]
    assert set(ids) == {runs.ids["onboarding"], runs.ids["onboarding-b"], runs.ids["order"]}
    assert ids.index(runs.ids["order"]) == 2  # waits 3 days; the sign-ups 1 day
    # Due means due in business time: the local clock when the database has one.
    store.local.set_clock(T0 + timedelta(hours=1))
    assert _rows(client.get("/pending", due="1").text) == []
    store.local.set_clock(T0 + timedelta(days=1, seconds=1))
    due = _rows(client.get("/pending", due="1").text)
    assert len(due) == 2 and all("late</span>" in r for r in due)


def _finding(text: str, name: str) -> str:
    found = re.search(r'<section class="finding finding-(\w+)"><h2>.*?</span> ' + name, text)
    assert found, name
    return found.group(1)


def test_doctor_page_reports_a_stranded_run_with_a_link(client: Client, store: Store) -> None:
    runs = populate(store)
    store.local.set_clock(T0 + timedelta(hours=2))  # doctor judges in business time
    check = "every unsettled run has a pending row"
    assert _finding(client.get("/doctor").text, check) == "ok"
    store.conn.execute("DELETE FROM workflow_run_pending WHERE run_id = %s", (runs.ids["order"],))
    text = client.get("/doctor").text
    assert _finding(text, check) == "problem" and "problem(s) found" in text
    assert f'href="/runs/{runs.ids["order"]}?tenant={TENANT_A}"' in text


def test_pages_forbid_framing_and_foreign_scripts(client: Client, store: Store) -> None:
    page = client.get("/")
    policy = page.headers["Content-Security-Policy"]
    assert "default-src 'self'" in policy and "frame-ancestors 'none'" in policy
    assert page.headers["X-Frame-Options"] == "DENY"
    css = client.get("/static/console.css")
    assert css.status == 200 and css.headers["Content-Type"].startswith("text/css")
    assert "http" not in re.sub(r"https?://www\.w3\.org", "", css.text)  # nothing from a CDN
    assert client.get("/static/../app.py").status == 404


def test_requests_for_another_host_are_refused(client: Client, store: Store) -> None:
    # A web page that rebinds its own name to 127.0.0.1 sends its own Host header.
    assert client.request("GET", "/", host="evil.example:8080").status == 421
    assert client.request("GET", "/", host="localhost:8080").status == 200


def test_unknown_pages_are_404(client: Client) -> None:
    assert client.get("/nope").status == 404


def test_a_run_waiting_for_its_task_says_so(db_url: str, store: Store) -> None:
    registry = WorkflowRegistry()
    register(
        registry,
        name="pay",
        trigger=on_event("pay.go"),
        steps=lambda s: [s.task("charge", lambda ctx: {"ok": True}), s.return_()],
    )
    run_id = trigger(store, registry, "pay.go", {}, T0).started[0].run_id
    client = console(db_url)
    client.app.config.registry = registry
    page = client.get(f"/runs/{run_id}").text
    assert "Waiting at step 0 for its task charge" in page
    assert "task.scheduled" in page and "9999" not in page
    pending = _rows(client.get("/pending").text)
    assert len(pending) == 1 and "its task" in pending[0] and "9999" not in pending[0]
