"""The console's run page of a parallel of branches: where the run waits (its branches'
family), each branch's run listed under its own workflow with the step `parallel`, and
the graph with each branch a lane; a branch's own page draws the branch's steps."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from console_support import Client
from workflow_runner import DomainEvent, Event, WorkflowRegistry, define_workflow, on_event
from workflow_runner.console import ConsoleApp, ConsoleConfig, allowed_hosts
from workflow_runner.engine import ingest_domain_event
from workflow_runner.engine.children import start_children
from workflow_runner.store import Store

from tests.support import TENANT_A as TENANT

ROOT = Path(__file__).resolve().parents[2]
T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
QUOTES = define_workflow(
    name="console-quotes",
    trigger=on_event("quotes.go"),
    idempotency_key=Event.payload["id"],
    steps=lambda s: [
        s.parallel(
            branches=[[s.wait(for_="PT1H")], [s.wait(for_="PT2H"), s.compute("b", lambda c: 1)]],
            result_key="quotes",
        )
    ],
    register=False,
)


def test_the_run_page_lists_the_branches_and_draws_them_as_lanes(db_url: str, store: Store) -> None:
    registry = WorkflowRegistry()
    registry.register(QUOTES)
    event = DomainEvent("e-1", "quotes.go", {"id": "q1"}, TENANT, T0, "tests")
    [run] = ingest_domain_event(store, event, T0, registry).started
    start_children(store, registry, T0)
    config = ConsoleConfig(
        database_url=db_url,
        registry=registry,
        template=ROOT / "template.yaml",
        allowed_hosts=allowed_hosts("127.0.0.1", 8080),
        database_label="test database",
    )
    client = Client(ConsoleApp(config))
    page = client.get(f"/runs/{run.run_id}", tenant=TENANT)
    assert page.status == 200
    assert "for 2 child run(s) of console-quotes/0/branch-*" in page.text
    children = page.text.split('class="children"')[1].split("</table>")[0]
    assert "<td>console-quotes/0/branch-0</td><td>parallel</td>" in children
    assert "<td>console-quotes/0/branch-1</td><td>parallel</td>" in children
    assert page.text.count('class="lane"') == 2
    kid = store.children.of_run(TENANT, run.run_id)[1].child_run_id
    branch = client.get(f"/runs/{kid}", tenant=TENANT)
    assert branch.status == 200
    assert "compute b" in branch.text  # the branch's own steps
