"""The console in a real headless Chromium (Debian's `chromium`, driven by Playwright):
open the runs list, filter to failed, open a run and see its graph, cancel a waiting
run; and, as `wfr console --host` serves it, get in with the link it prints (its
operator token) and act, while a page that rebinds its name to the console is refused;
and migrate waiting runs after seeing, on the dry run, what would move; and see a
full flow-control limit on the Limits page and the run it holds back.
Screenshots go to the test's temporary directory and, once a test has passed, to
build/console-screenshots/: the docs site built after it shows those (never stale), and
`make screenshots` copies them over the committed ones in docs/console/."""

from __future__ import annotations

import re
import shutil
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from workflow_runner import DomainEvent, run_id_for
from workflow_runner.console import ConsoleConfig, make_console_server
from workflow_runner.definition import default_registry
from workflow_runner.engine import ingest_domain_event, project_pending
from workflow_runner.local.runtime import catch_up_local
from workflow_runner.local.sink import webhook_sink
from workflow_runner.store import Store

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "console"))
from console_support import ROOT, populate, send
from test_console_migrate import V1, V2, registry

from tests.browser.headless import ARGS, CHROMIUM, needs_chromium, playwright_api
from tests.flow.flows import REGISTRY as FLOW_REGISTRY
from tests.flow.flows import at, held_run, put
from tests.support import TENANT_A, TENANT_B, network_address, serving_console

pytestmark = needs_chromium


@pytest.fixture
def console_url(db_url: str, store: Store) -> Iterator[tuple[str, Any]]:
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=2)
    # A local database (what `wfr demo` and `wfr local` leave): its clock is business time,
    # and actions nudge the local projection and dispatcher.
    store.local.set_clock(start + timedelta(hours=2))
    runs = populate(store, start)
    for n, (user, tenant) in enumerate(
        [("carol", TENANT_A), ("dan", TENANT_B), ("erin", TENANT_A), ("frank", TENANT_B)]
    ):
        send(
            store,
            "user.signed-up",
            {"userId": user, "email": f"{user}@example.com"},
            now=start + timedelta(minutes=30 + 7 * n),
            tenant=tenant,
        )
    for n in range(3):
        order = {"orderId": f"o-{100 + n}", "total": 20 + n, "email": "shop@example.com"}
        send(store, "order.placed", order, now=start + timedelta(minutes=60 + 9 * n))
    # Deliver what the runs asked for, as the nudged StepDispatcher would have. The
    # inventory partner answers 410 Gone: that fire-and-forget webhook fails for good.
    with webhook_sink({"/inventory-synced": [410]}) as sink:
        redirect = {"WFR_WEBHOOK_REDIRECTS": f"hooks.example.com={sink.url}"}
        catch_up_local(store, default_registry(), redirect, ROOT / "template.yaml")
    with _serving(_config(db_url, default_registry(), allow_actions=True)) as base:
        yield base, runs


@contextmanager
def _serving(config: ConsoleConfig) -> Iterator[str]:
    """Serve the console in a thread on a free port of 127.0.0.1; yields its address."""
    server, app = make_console_server(config, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1})
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
        app.pool.close()


def _config(db_url: str, registry: Any, allow_actions: bool = False) -> ConsoleConfig:
    """The console as these tests serve it: this project's template, a fixed label."""
    return ConsoleConfig(
        database_url=db_url,
        registry=registry,
        allow_actions=allow_actions,
        template=ROOT / "template.yaml",
        database_label="workflow_runner on 127.0.0.1",
    )


@contextmanager
def _page() -> Iterator[Any]:
    """A 1360x900 page of Debian's headless chromium, closed afterwards."""
    with playwright_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            yield browser.new_page(viewport={"width": 1360, "height": 900})
        finally:
            browser.close()


def _text_outside_the_graph(page: Any) -> list[str]:
    """The texts of the page's graph that the browser draws (partly) outside its viewBox."""
    return page.evaluate(
        """() => {
            const svg = document.querySelector("svg.graph");
            const view = svg.viewBox.baseVal;
            return [...svg.querySelectorAll("text")].filter((text) => {
                const box = text.getBBox();
                return box.x < view.x || box.x + box.width > view.x + view.width
                    || box.y < view.y || box.y + box.height > view.y + view.height;
            }).map((text) => text.textContent);
        }"""
    )


FRESH_SHOTS = ROOT / "build" / "console-screenshots"


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    return tmp_path


def publish(shots: Path) -> None:
    """Copy a passed test's screenshots (not those in subfolders, looked at only) to
    build/console-screenshots/: the docs site's build shows them in place of the
    committed ones in docs/console/ (docs/hooks/outside_files.py), and `make
    screenshots` commits them there; a test run leaves the tree as it was."""
    FRESH_SHOTS.mkdir(parents=True, exist_ok=True)
    for png in shots.glob("*.png"):
        shutil.copy(png, FRESH_SHOTS / png.name)


def test_an_operator_finds_a_failed_run_and_cancels_a_waiting_one(
    console_url: tuple[str, Any], shots: Path, store: Store
) -> None:
    base, runs = console_url
    with _page() as page:
        errors: list[str] = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on(
            "request",
            lambda r: (
                errors.append(f"left the console: {r.url}") if not r.url.startswith(base) else None
            ),
        )

        page.goto(base + "/")
        assert page.locator("table.runs tbody tr").count() == 13
        page.screenshot(path=str(shots / "runs.png"), full_page=True)

        page.get_by_role("link", name="Failed", exact=True).click()
        page.wait_for_url("**/?status=failed")
        rows = page.locator("table.runs tbody tr")
        assert rows.count() == 1
        assert "inventory-sync" in rows.first.inner_text()
        page.screenshot(path=str(shots / "runs-failed.png"), full_page=True)

        rows.first.locator("a").first.click()
        page.wait_for_url(f"**/runs/{runs.ids['failed']}**")
        graph = page.locator("svg.graph")
        assert graph.is_visible() and graph.bounding_box()["width"] > 200  # type: ignore[index]
        assert page.locator("svg.graph g.node.failed").count() == 1
        assert page.get_by_role("link", name="Redrive").is_visible()
        page.screenshot(path=str(shots / "run-failed.png"), full_page=True)

        page.goto(base + "/?status=waiting&workflow=order-approval")
        page.locator("table.runs tbody tr").filter(has_text=TENANT_A[:8]).last.locator(
            "a"
        ).first.click()
        page.wait_for_url("**/runs/**")
        waiting_url = page.url
        assert page.locator("svg.graph g.node.current").count() == 1
        assert _text_outside_the_graph(page) == []  # the wait's long label, in real fonts
        page.screenshot(path=str(shots / "run-waiting.png"), full_page=True)

        page.get_by_role("link", name="Cancel run").click()
        page.wait_for_url("**/cancel?**")
        page.get_by_label("Reason").fill("customer cancelled by phone")
        page.screenshot(path=str(shots / "cancel-confirm.png"), full_page=True)
        page.locator("#confirm").click()
        page.wait_for_url("**outcome=cancelled**")
        assert page.get_by_text("The run was cancelled.").is_visible()
        assert page.locator("h1 .status-cancelled").is_visible()
        assert page.locator("svg.graph g.node.failed").count() == 1  # "cancelled here"
        page.screenshot(path=str(shots / "run-cancelled.png"), full_page=True)
        run_id = waiting_url.split("/runs/")[1].split("?")[0]
        types = [e.type for e in store.streams.load(TENANT_A, run_id)]
        assert types[-2:] == ["workflow.operator-action", "workflow.run-cancelled"]

        page.goto(base + "/pending")
        pending = page.locator("table.pending tbody tr")
        assert pending.count() == 9  # ten waited; the one cancelled left at once
        assert run_id[:8] not in page.locator("table.pending").inner_text()
        page.screenshot(path=str(shots / "pending.png"), full_page=True)
        page.get_by_role("link", name="Deliveries", exact=True).click()
        page.wait_for_url("**/deliveries")
        failed_rows = page.locator("table.deliveries tbody tr")
        assert failed_rows.count() == 1 and "410" in failed_rows.first.inner_text()
        page.screenshot(path=str(shots / "deliveries.png"), full_page=True)

        page.goto(base + "/doctor")
        # The failed webhook is worth a look, with a link to the deliveries.
        assert page.locator("section.finding-warning").count() == 1
        assert page.locator("section.finding-warning a[href^='/deliveries?tenant=']").count() == 1
        page.screenshot(path=str(shots / "doctor.png"), full_page=True)
    assert errors == []
    publish(shots)


def test_an_operator_gets_in_with_the_printed_link_and_a_rebinding_page_does_not(
    db_url: str, store: Store, shots: Path
) -> None:
    checks = shots / "token-flow"  # looked at, not for the site
    checks.mkdir()
    runs = populate(store)
    run_id = runs.ids["order"]
    # `--host` on this machine's network address; where it has none, loopback with
    # --require-token asks for the token the same way.
    address = network_address()
    where = ["--host", address] if address else ["--require-token"]
    args = ["console", "--port", "0", "--allow-actions", *where]
    env = {"WORKFLOW_MODULES": "sample_workflows"}
    with serving_console(args, db_url, env=env) as (printed, _):
        found = re.fullmatch(r"(http://([^/]+):(\d+))/\?token=[\w-]+", printed)
        assert found, printed
        base, host, port = found.groups()
        with playwright_api.sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path=str(CHROMIUM),
                # A page at attacker.example whose name now resolves to the console.
                args=[*ARGS, f"--host-resolver-rules=MAP attacker.example {host}"],
            )
            context = browser.new_context(viewport={"width": 1360, "height": 900})
            page = context.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))

            page.goto(f"{base}/runs/{run_id}/cancel?tenant={TENANT_A}")
            assert page.get_by_role("heading", name="Operator token required").is_visible()
            assert page.locator("input[name=csrf]").count() == 0
            page.screenshot(path=str(shots / "token-required.png"), full_page=True)

            page.goto(printed)
            page.wait_for_url(base + "/")
            assert page.locator("table.runs tbody tr").count() == 6
            [cookie] = context.cookies()
            assert cookie["name"] == f"wfr_console_{port}"
            assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
            page.screenshot(path=str(checks / "token-entered.png"), full_page=True)

            page.goto(f"{base}/runs/{run_id}?tenant={TENANT_A}")
            page.get_by_role("link", name="Cancel run").click()
            page.wait_for_url("**/cancel?**")
            page.get_by_label("Reason").fill("operator with the token")
            page.locator("#confirm").click()
            page.wait_for_url("**outcome=cancelled**")
            assert page.get_by_text("The run was cancelled.").is_visible()
            page.screenshot(path=str(checks / "token-action-done.png"), full_page=True)
            types = [e.type for e in store.streams.load(TENANT_A, run_id)]
            assert types[-2:] == ["workflow.operator-action", "workflow.run-cancelled"]

            # The operator's own browser, cookie and all, visiting the rebinding page.
            answer = page.goto(f"http://attacker.example:{port}/")
            assert answer is not None and answer.status == 421
            assert page.get_by_text("does not serve the host").is_visible()
            page.screenshot(path=str(checks / "rebinding-refused.png"), full_page=True)
            browser.close()
    assert errors == []
    publish(shots)


def test_an_operator_migrates_waiting_runs_after_seeing_what_would_move(
    db_url: str, store: Store, shots: Path
) -> None:
    now = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
    for key in ("r-1", "r-2"):
        event = DomainEvent(f"e-{key}", "refund.asked", {"id": key}, TENANT_A, now, "tests")
        ingest_domain_event(store, event, now, registry(V1))
    project_pending(store, now)
    # v1 is gone from the code: its waiting runs need moving.
    config = _config(db_url, registry(V2), allow_actions=True)
    with _serving(config) as base, _page() as page:
        page.goto(base + "/?workflow=refund&status=waiting")
        page.get_by_role("link", name="Migrate waiting runs to v2").click()
        page.wait_for_url("**/workflows/refund/migrate?to=2**")
        # Without a mapping each run's own step 0 is the inserted compute: refused.
        assert page.locator("table#migration .status-failed").count() == 2
        assert page.locator("#confirm").count() == 0
        page.get_by_label("Mapping").fill("0=1")
        page.get_by_role("button", name="Show what would move").click()
        page.wait_for_url("**map=0%3D1**")
        assert page.locator("table#migration .status-running").count() == 2  # would move
        page.get_by_label("Reason").fill("a check was added before the approval")
        page.screenshot(path=str(shots / "migrate-confirm.png"), full_page=True)
        page.locator("#confirm").click()
        page.wait_for_load_state()
        assert page.get_by_text("refund → v2: 2 moved, 0 already on v2").is_visible()
        page.screenshot(path=str(shots / "migrate-done.png"), full_page=True)
    for key in ("r-1", "r-2"):
        types = [e.type for e in store.streams.load(TENANT_A, run_id_for("refund", key))]
        assert types[-2:] == ["workflow.operator-action", "workflow.run-migrated"]
    publish(shots)


def test_an_operator_sees_a_full_limit_and_the_run_it_holds_back(
    db_url: str, store: Store, shots: Path
) -> None:
    """Account a-1's two slots are leased to running tasks and a third run queues: the
    Limits page shows the key full with one queued, and the run's page says what holds
    it back."""
    run_id = held_run(store)
    for n in range(4):
        put(store, "throttled", n)
    store.local.set_clock(at(61))  # the console's now: this local database's business time
    with _serving(_config(db_url, FLOW_REGISTRY)) as base, _page() as page:
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(base + "/")
        page.get_by_role("link", name="Limits", exact=True).click()
        page.wait_for_url("**/limits")
        headers = page.locator("table.limits thead th").all_inner_texts()
        rows = page.locator("table.limits tbody tr")
        cells = rows.filter(has_text="per-account").locator("td").all_inner_texts()
        full = dict(zip(headers, cells, strict=True))
        assert (full["Kind"], full["Key"], full["Tenant"]) == ("concurrency", "a-1", TENANT_A[:8])
        assert (full["In flight"], full["Queued"]) == ("2", "1")
        assert rows.filter(has_text="throttled").filter(has_text="throttle").count() == 1
        page.screenshot(path=str(shots / "limits.png"), full_page=True)

        page.goto(f"{base}/runs/{run_id}?tenant={TENANT_A}")
        held = page.get_by_text("Held by flow control: run waits for concurrency 2 of per-account")
        assert held.is_visible() and "until a slot frees" in held.inner_text()
        page.screenshot(path=str(shots / "run-held.png"), full_page=True)
    assert errors == []
    publish(shots)
