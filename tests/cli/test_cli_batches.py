"""Where runs are looked at, a map or parallel under a completion policy shows what it
did: `wfr runs show` (its timeline's stop line, its JSON events and children) and `wfr
graph` (the policy on the node, and a run's stopped step); the console's side is in
tests/console/test_console_batches.py."""

from __future__ import annotations

from cli_support import TENANT, Cli
from workflow_runner.graph import flowchart, run_chart
from workflow_runner.graph_render import to_mermaid
from workflow_runner.store import Store

from tests.batch_runs import MAPPER, stopped_map


def test_runs_show_says_what_the_stop_did_in_words_and_in_json(cli: Cli, store: Store) -> None:
    parent, kids = stopped_map(store)
    text = cli("runs", "show", parent, "--tenant", TENANT).out
    assert "step.stopped" in text
    assert "step 0: map stopped (min_successful_reached): cancelled item(s) 2" in text
    assert "2 child run(s) settled, 1 failed: min_successful_reached" in text
    shown = cli("runs", "show", parent, "--tenant", TENANT, "--json").json()
    [stop] = [e["payload"] for e in shown["events"] if e["type"] == "workflow.step.stopped"]
    assert (stop["cancelled"], stop["reason"]) == ([2], "min_successful_reached")
    [resumed] = [e["payload"] for e in shown["events"] if e["type"] == "workflow.tasks.scheduled"]
    batch = resumed["resultsDelta"]["batch"]
    assert batch["failures"] == [{"index": 0, "reason": "returned_failure", "runId": kids[0]}]
    assert (batch["succeeded"], batch["completion"]) == (1, "min_successful_reached")
    assert resumed["completion"] == {"toleratedFailurePct": 50}
    assert [(c["index"], c["status"]) for c in shown["children"]] == [
        (0, "failed"),
        (1, "completed"),
        (2, "cancelled"),
    ]
    child = cli("runs", "show", kids[2], "--tenant", TENANT, "--json").json()
    [cancelled] = [e for e in child["events"] if e["type"] == "workflow.run-cancelled"]
    assert cancelled["payload"]["reason"] == "map stopped (min_successful_reached)"
    assert child["events"][0]["payload"]["mapIndex"] == 2


def test_the_graph_names_the_policy_and_marks_a_stopped_step(store: Store) -> None:
    text = to_mermaid(flowchart(MAPPER))
    assert '[["map shown-kid ×10 at once → batch, until 1 succeed, tolerate 1 failure(s)"]]' in text
    assert '{"parallel (2 tasks) → both, tolerate 50% failed"}' in text
    assert "task a → a, ×1 exponential, at most once" in text
    parent, _ = stopped_map(store)
    chart = run_chart(store, MAPPER, TENANT, parent)
    assert "stopped early: min_successful_reached" in chart.notes.values()
