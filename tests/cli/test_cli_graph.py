"""`wfr graph`: the step tree as a Mermaid flowchart, with a run's path and position."""

from __future__ import annotations

import importlib.util
from datetime import timedelta
from pathlib import Path

import pytest
from cli_support import T0, TENANT, Cli, send
from workflow_runner import Event, Steps, define_workflow, on_event
from workflow_runner.definition.dsl import DomainEvent
from workflow_runner.engine import wake_on_event
from workflow_runner.graph import flowchart
from workflow_runner.graph_render import to_mermaid
from workflow_runner.match import eq
from workflow_runner.store import Store

SIGNUP = {"userId": "active-ada", "email": "ada@example.com"}


def test_branches_are_diamonds_with_labelled_arms_that_join(cli: Cli) -> None:
    result = cli("graph", "user-onboarding")
    assert result.code == 0
    text = result.out
    assert text.startswith("---\ntitle: user-onboarding v1\n---\nflowchart TD\n")
    assert '    s3{"branch"}' in text
    assert '    s3 -- "steps.engaged" --> s3t_0' in text  # the condition, on its edges
    assert '    s3 -- "not steps.engaged" --> s3f_0' in text
    assert "    s3t_0 --> s4" in text and "    s3f_0 --> s4" in text  # the arms join
    assert '    s1(["wait P1D"])' in text
    assert "classDef" not in text  # no run, no marks


def test_waits_for_events_and_retries_have_their_own_shapes(cli: Cli) -> None:
    order = cli("graph", "order-approval").out
    assert '    s1{{"wait for order.approved"}}' in order  # its match and timeout: edges
    assert '    s2f_0("return failure")' in order
    assert '    s2t_0[["mail.send: Your order is approved"]]' in order
    hook = cli("graph", "webhook-delivery").out
    assert (
        '    s0[["webhook.send {event.payload.webhookUrl} → partner, ×3 exponential, catch"]]'
        in hook
    )
    sync = cli("graph", "inventory-sync").out
    assert '    s0["retry ×5 (exponential, base PT30S, cap PT10M)"]' in sync
    assert '    s0 -. "step fails: back off, try again" .-> s0' in sync
    assert '    s0 -- "attempt" --> s0_0' in sync


def test_for_each_loops_back_from_the_end_of_its_body() -> None:
    definition = define_workflow(
        "cli-fan-out",
        on_event("fan.out"),
        steps=lambda s: [
            s.for_each(
                over=lambda ctx: ctx.event.payload["items"],
                as_="item",
                do=[s.webhook_send(url="https://hooks.example.com/item")],
            ),
            s.return_(),
        ],
        register=False,
    )
    text = to_mermaid(flowchart(definition))
    assert '    s0{{"for each item"}}' in text
    assert '    s0 -- "item" --> s0_0' in text
    assert '    s0_0 -. "next item" .-> s0' in text
    assert '    s0 -- "done" --> s1' in text


def test_a_waiting_run_shows_its_path_and_position(cli: Cli, store: Store) -> None:
    run_id = send(store, "user.signed-up", SIGNUP).started[0].run_id
    cli("resume", run_id, "--tenant", TENANT, "--now", (T0 + timedelta(days=1)).isoformat())
    text = cli("graph", "user-onboarding", "--run", run_id, "--tenant", TENANT).out
    assert "    class start,s0,s1,s2,s3,s3t_0 visited" in text  # the engaged arm, not s3f_0
    assert "    class s4 current" in text
    assert "waiting until 2026-01-13T09:00:00.000000Z" in text


def test_a_completed_run_marks_the_rest_of_the_arm_it_ran(cli: Cli, store: Store) -> None:
    order = {"orderId": "o-9", "total": 5, "email": "a@example.com"}
    run_id = send(store, "order.placed", order).started[0].run_id
    approved = DomainEvent(
        "ok-9", "order.approved", {"orderId": "o-9", "approver": "carol"}, TENANT, T0, "tests"
    )
    assert [w.run_id for w in wake_on_event(store, approved, T0)] == [run_id]
    assert cli("resume", run_id, "--step", "1").out.startswith("completed")
    marks = cli("graph", "order-approval", "--run", run_id, "--json").json()["marks"]
    # The approved arm ran to its return, which left no trace on the stream.
    assert marks["s2t_2"] == "visited" and marks["finish"] == "visited"
    assert "s2f_0" not in marks


def test_a_failed_run_marks_the_failed_step(cli: Cli, store: Store) -> None:
    detail = {"sku": "s", "revision": 1, "failAttempts": 9}
    run_id = send(store, "inventory.changed", detail).started[0].run_id
    now = T0
    for _ in range(4):
        now += timedelta(minutes=20)
        cli("resume", run_id, "--tenant", TENANT, "--now", now.isoformat())
    marks = cli("graph", "inventory-sync", "--run", run_id, "--tenant", TENANT, "--json")
    assert marks.json()["marks"]["s0_0"] == "failed"


def test_graph_errors(cli: Cli, store: Store) -> None:
    unknown = cli("graph", "no-such-workflow")
    assert unknown.code == 2
    assert "no workflow named 'no-such-workflow' is registered" in unknown.err
    unknown_run = cli("graph", "user-onboarding", "--run", "00000000-0000-4000-8000-000000000001")
    assert unknown_run.code == 1
    assert "run 00000000-0000-4000-8000-000000000001 not found in any tenant" in unknown_run.err
    run_id = send(store, "user.signed-up", SIGNUP).started[0].run_id
    other = cli("graph", "order-approval", "--run", run_id, "--tenant", TENANT)
    assert other.code == 2 and "is a run of 'user-onboarding'" in other.err
    no_file = cli("graph", "user-onboarding", "--format", "png")
    assert no_file.code == 2 and "--output" in no_file.err


def test_png_is_rendered_or_refused_clearly(cli: Cli, tmp_path: Path) -> None:
    target = tmp_path / "graph.png"
    result = cli("graph", "order-approval", "--format", "png", "--output", str(target))
    if importlib.util.find_spec("matplotlib") is None:
        assert result.code == 1
        assert "PNG output needs matplotlib" in result.err
        assert not target.exists()
    else:
        assert result.code == 0
        assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_mermaid_to_a_file(cli: Cli, tmp_path: Path) -> None:
    target = tmp_path / "graph.mmd"
    result = cli("graph", "daily-report", "--output", str(target))
    assert result.code == 0
    assert '    start(("cron 0 9 * * *"))' in target.read_text()


@pytest.mark.parametrize(
    "name",
    ["user-onboarding", "order-approval", "inventory-sync", "webhook-delivery", "shipping-quote"],
)
def test_every_node_is_connected(cli: Cli, name: str) -> None:
    lines = cli("graph", name).out.splitlines()
    nodes = {
        line.split("(")[0].split("[")[0].split("{")[0].strip()
        for line in lines[4:]
        if "-->" not in line and "-." not in line and line.startswith("    ")
    }
    edges = " ".join(line for line in lines if "-->" in line or ".->" in line)
    for node in nodes - {"classDef", "class"}:
        assert f" {node} " in f" {edges} ", node


def test_the_branches_of_a_parallel_are_lanes_that_join_after_it() -> None:
    definition = define_workflow(
        "cli-lanes",
        on_event("lanes.go"),
        steps=lambda s: [
            s.parallel(
                branches=[
                    [s.wait(for_="PT1H"), s.task("slow", lambda ctx: 1)],
                    [s.compute("fast", lambda ctx: 2), s.branch_result("done")],
                ],
                max_concurrency=1,
                result_key="both",
            ),
            s.return_(),
        ],
        register=False,
    )
    text = to_mermaid(flowchart(definition))
    assert '    s0{"parallel (2 branches, 1 at once) → both"}' in text
    lane = text.index('    subgraph s0_b0 ["branch 0"]\n')
    assert text[lane:].startswith(
        '    subgraph s0_b0 ["branch 0"]\n'
        '        s0b0_0(["wait PT1H"])\n'
        '        s0b0_1[["task slow → slow, ×3 exponential"]]\n'
        "    end\n"
        '    subgraph s0_b1 ["branch 1"]\n'
        '        s0b1_0["compute fast"]\n'
        '        s0b1_1("branch result done")\n'
        "    end\n"
    )
    assert '    s0 -- "branch 0" --> s0b0_0' in text
    assert '    s0 -- "branch 1" --> s0b1_0' in text
    assert "    s0b0_1 --> s1" in text  # the lanes join at the step after the parallel
    assert '    s0b1_1 -- "branch ends" --> s1' in text


def test_a_misspelt_workflow_is_bad_input_with_the_closest_names(cli: Cli) -> None:
    """The README promises exit 2 and the closest names for an unknown workflow, as
    `wfr runs list --workflow` gives them."""
    result = cli("graph", "order-aproval")
    assert result.code == 2
    assert result.out == ""
    assert "no workflow named 'order-aproval' is registered" in result.err
    assert "did you mean 'order-approval'?" in result.err
    listed = cli("runs", "list", "--workflow", "order-aproval")
    assert listed.code == 2 and "did you mean 'order-approval'?" in listed.err


def _paid(ctx: object) -> bool:
    return True


def test_conditions_matches_and_timeouts_are_on_the_edges(cli: Cli) -> None:
    """`s.branch(if_=Steps["payment"])` was drawn as a bare "branch": the edges now say
    when each is taken — the condition (a reference's path, a function's name, a
    lambda's expression), the awaited event and its match, the timeout."""
    payment = define_workflow(
        name="payment-flow",
        trigger=on_event("payment.started"),
        awaits={"paid": "payment.paid"},
        register=False,
        steps=lambda s: [
            s.wait_for_event("paid", match=eq("orderId", Event.payload["orderId"]), timeout="P2D"),
            s.branch(if_=Steps["payment.paid"], on_true=[s.return_({"isSuccess": True})]),
            s.branch(if_=_paid, on_true=[s.compute("a", lambda ctx: 1)]),
            s.branch(if_=lambda ctx: ctx.event.payload["total"] > 100, on_true=[]),
            s.wait_for_callback("answer", timeout="PT12H"),
            s.return_(),
        ],
    )
    text = to_mermaid(flowchart(payment))
    assert '    s0{{"wait for payment.paid"}}' in text
    assert '    s0 -- "payment.paid where orderId == event.payload.orderId" --> s1' in text
    assert '    s0 -- "no payment.paid in P2D: timeout" --> s1' in text
    assert "    s1 -- \"steps['payment.paid']\" --> s1t_0" in text
    assert "    s1 -- \"not steps['payment.paid']\" --> s2" in text
    assert '    s2 -- "_paid(ctx)" --> s2t_0' in text
    assert '    s2 -- "not _paid(ctx)" --> s3' in text
    assert "    s3 -- \"ctx.event.payload['total'] > 100\" --> s4" in text
    assert '    s4 -- "answered" --> s5' in text
    assert '    s4 -- "no answer in PT12H: timeout" --> s5' in text
    order = cli("graph", "order-approval").out
    assert '-- "order.approved where orderId == event.payload.orderId" -->' in order
    assert '-- "no order.approved in P3D: timeout" -->' in order
