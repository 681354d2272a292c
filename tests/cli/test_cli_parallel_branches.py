"""Where runs are looked at, a parallel's branches show as such: `wfr runs show` names
the parallel and its branches in the timeline, and lists each branch's run under its own
workflow (`…/branch-k`) with the step `parallel`, in words and in JSON."""

from __future__ import annotations

from datetime import UTC, datetime

from cli_support import TENANT, Cli
from workflow_runner import DomainEvent, Event, WorkflowRegistry, define_workflow, on_event
from workflow_runner.engine import ingest_domain_event
from workflow_runner.engine.children import start_children
from workflow_runner.store import Store

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
QUOTES = define_workflow(
    name="shown-quotes",
    trigger=on_event("quotes.go"),
    idempotency_key=Event.payload["id"],
    steps=lambda s: [
        s.parallel(
            branches=[[s.wait(for_="PT1H")], [s.wait(for_="PT2H")]],
            max_concurrency=2,
            result_key="quotes",
        )
    ],
    register=False,
)


def test_runs_show_names_the_branches(cli: Cli, store: Store) -> None:
    registry = WorkflowRegistry()
    registry.register(QUOTES)
    event = DomainEvent("e-1", "quotes.go", {"id": "q1"}, TENANT, T0, "tests")
    [run] = ingest_domain_event(store, event, T0, registry).started
    start_children(store, registry, T0)
    text = cli("runs", "show", run.run_id, "--tenant", TENANT).out
    assert "step 0: parallel of 2 branch(es) (shown-quotes/0/branch-*), 2 at once" in text
    assert "shown-quotes/0/branch-1" in text
    shown = cli("runs", "show", run.run_id, "--tenant", TENANT, "--json").json()
    assert [(c["workflowName"], c["step"], c["index"], c["status"]) for c in shown["children"]] == [
        ("shown-quotes/0/branch-0", "parallel", 0, "running"),
        ("shown-quotes/0/branch-1", "parallel", 1, "running"),
    ]
    kid = shown["children"][1]["runId"]
    child = cli("runs", "show", kid, "--tenant", TENANT, "--json").json()
    assert child["workflowName"] == "shown-quotes/0/branch-1"
    assert child["parentRunId"] == run.run_id
    assert child["events"][0]["payload"]["mapIndex"] == 1
