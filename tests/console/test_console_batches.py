"""The console shows a batch result (a map's under a completion policy): how it ended,
its counts, and its failures linked to their child runs; the stop in the timeline."""

from __future__ import annotations

from pathlib import Path

from console_support import Client
from workflow_runner.console import ConsoleApp, ConsoleConfig, allowed_hosts
from workflow_runner.store import Store

from tests.batch_runs import REGISTRY, TENANT, stopped_map

ROOT = Path(__file__).resolve().parents[2]


def test_the_console_shows_the_batch_with_its_failures_linked(db_url: str, store: Store) -> None:
    parent, kids = stopped_map(store)
    config = ConsoleConfig(
        database_url=db_url,
        registry=REGISTRY,
        template=ROOT / "template.yaml",
        allowed_hosts=allowed_hosts("127.0.0.1", 8080),
        database_label="test database",
    )
    page = Client(ConsoleApp(config)).get(f"/runs/{parent}", tenant=TENANT)
    assert page.status == 200
    assert "<strong>min_successful_reached</strong> · 1 succeeded · 1 failed" in page.text
    failures = page.text.split('class="batch-failures"')[1].split("</table>")[0]
    assert f"/runs/{kids[0]}?tenant={TENANT}" in failures
    assert "returned_failure" in failures
    assert "map stopped (min_successful_reached): cancelled item(s) 2" in page.text
