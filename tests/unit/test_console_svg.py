"""The console's graph: every step drawn once, nothing overlapping, a branch's arms side
by side, edges that skip layers routed around the steps in between, labels escaped, and
every label inside the drawing."""

from __future__ import annotations

import itertools
import re
from xml.etree import ElementTree

import pytest
import sample_workflows  # noqa: F401  (registers the samples)
from workflow_runner import define_workflow, on_event
from workflow_runner.console.svg import CHAR_WIDTH, LABEL_CHAR_WIDTH, Box, layout, to_svg
from workflow_runner.definition import WorkflowDefinition, default_registry
from workflow_runner.graph import flowchart

SAMPLES = [d.name for d in default_registry().latest_all()]


def _overlap(a: Box, b: Box) -> bool:
    return abs(a.x - b.x) < (a.w + b.w) / 2 and a.y < b.y + b.h and b.y < a.y + a.h


@pytest.mark.parametrize("name", SAMPLES)
def test_every_step_is_drawn_once_and_no_two_overlap(name: str) -> None:
    chart = flowchart(default_registry().latest(name))
    plan = layout(chart)
    drawn = [b for b in plan.boxes.values() if b.node is not None]
    assert sorted(b.id for b in drawn) == sorted(n.id for n in chart.nodes)
    for a, b in itertools.combinations(plan.boxes.values(), 2):
        assert not _overlap(a, b), (a.id, b.id)
    assert all(b.x - b.w / 2 >= 0 and b.x + b.w / 2 <= plan.width for b in drawn)
    svg = to_svg(chart)
    assert svg.count('class="node ') == len(chart.nodes)


def test_branch_arms_sit_left_and_right_and_a_skipping_edge_avoids_the_arm() -> None:
    chart = flowchart(default_registry().latest("order-approval"))
    boxes = layout(chart).boxes
    branch, true_arm, false_arm = boxes["s2"], boxes["s2t_0"], boxes["s2f_0"]
    assert true_arm.x < branch.x < false_arm.x
    assert true_arm.rank == false_arm.rank == branch.rank + 1
    # The false arm ends early; its edge to the end passes waypoints beside the true arm.
    waypoints = [b for b in boxes.values() if b.node is None and b.id.startswith("s2f_0>")]
    assert waypoints and all(w.x > boxes["s2t_1"].x + boxes["s2t_1"].w / 2 for w in waypoints)


def test_a_loop_body_comes_before_what_follows_the_loop() -> None:
    wf = define_workflow(
        "loop",
        on_event("loop.started"),
        steps=lambda s: [
            s.for_each(over=[1, 2], as_="n", do=[s.compute("a", lambda c: 1), s.wait(for_="PT1M")]),
            s.return_({"isSuccess": True}),
        ],
        register=False,
    )
    boxes = layout(flowchart(wf)).boxes
    loop, body_end, after = boxes["s0"], boxes["s0_1"], boxes["s1"]
    assert loop.rank < body_end.rank < after.rank


def test_labels_are_escaped_and_long_words_wrap_at_slashes() -> None:
    wf = define_workflow(
        "escape",
        on_event("escape.started"),
        steps=lambda s: [
            s.compute("<script>alert(1)</script>", lambda c: 1),
            s.webhook_send(url="https://hooks.example.com/a/very/long/path/to/somewhere"),
        ],
        register=False,
    )
    svg = to_svg(flowchart(wf))
    assert "<script>" not in svg and "&lt;script&gt;alert(1)&lt;/script&gt;" in svg
    spans = re.findall(r"<tspan[^>]*>([^<]*)</tspan>", svg)
    assert "https://hooks.example.com/a/very/" in spans


def test_the_branches_of_a_parallel_are_drawn_as_lanes_around_their_steps() -> None:
    definition = define_workflow(
        "svg-lanes",
        on_event("lanes.go"),
        steps=lambda s: [
            s.parallel(
                branches=[
                    [s.wait(for_="PT1H"), s.compute("a", lambda ctx: 1)],
                    [s.compute("b", lambda ctx: 2)],
                ]
            ),
            s.return_(),
        ],
        register=False,
    )
    chart = flowchart(definition)
    assert [(c.label, c.node_ids) for c in chart.clusters] == [
        ("branch 0", ["s0b0_0", "s0b0_1"]),
        ("branch 1", ["s0b1_0"]),
    ]
    boxes = layout(chart).boxes
    assert boxes["s0b0_0"].x != boxes["s0b1_0"].x  # side by side
    svg = str(to_svg(chart))
    assert svg.count('class="lane"') == 2
    assert 'data-cluster="s0_b0"' in svg and ">branch 1</text>" in svg


def test_a_waits_two_edges_to_the_same_step_are_one_route_naming_both() -> None:
    waiting = define_workflow(
        name="svg-wait",
        trigger=on_event("svg.go"),
        awaits={"ok": "svg.ok"},
        register=False,
        steps=lambda s: [s.wait_for_event("ok", timeout="P1D"), s.return_()],
    )
    plan = layout(flowchart(waiting))
    [route] = [r for r in plan.routes if r.boxes[0] == "s0"]
    assert route.label == "svg.ok / no svg.ok in P1D: timeout"


def _text_extents(svg: str) -> list[tuple[str, float, float, float]]:
    """(line, left, right, baseline) of every line of text in the SVG, as wide as the
    renderer's own estimate: a node's lines centred, an edge's label by its anchor."""
    ns = "{http://www.w3.org/2000/svg}"
    extents = []
    for text in ElementTree.fromstring(svg).iter(f"{ns}text"):
        in_node = text.get("class") == "label"
        anchor = "middle" if in_node else text.get("text-anchor", "start")
        lines = [(t.text or "", t.get("x")) for t in text.iter(f"{ns}tspan")]
        for line, x in lines or [(text.text or "", text.get("x"))]:
            width = len(line) * (CHAR_WIDTH if in_node else LABEL_CHAR_WIDTH)
            left = float(str(x)) - {"start": 0.0, "middle": width / 2, "end": width}[anchor]
            extents.append((line, left, left + width, float(str(text.get("y")))))
    return extents


def _long_labels() -> WorkflowDefinition:
    """A wait whose match and timeout make a long label on the rightmost edge, then a
    branch whose long conditions hang left of its left arm and right of its right arm."""

    def the_approval_arrived_in_time_and_was_signed_by_a_manager(ctx: object) -> bool:
        return True

    return define_workflow(
        name="svg-long-labels",
        trigger=on_event("svg.go"),
        awaits={"ok": "svg.approved-by-every-manager-of-the-account"},
        register=False,
        steps=lambda s: [
            s.wait_for_event("ok", timeout="P30D"),
            s.branch(
                if_=the_approval_arrived_in_time_and_was_signed_by_a_manager,
                on_true=[s.compute("x", lambda ctx: 1)],
                on_false=[s.return_({"isSuccess": False})],
            ),
        ],
    )


@pytest.mark.parametrize("name", [*SAMPLES, "svg-long-labels"])
def test_every_label_lies_within_the_drawing(name: str) -> None:
    definition = _long_labels() if name == "svg-long-labels" else default_registry().latest(name)
    svg = str(to_svg(flowchart(definition)))
    view = re.search(r'<svg [^>]*viewBox="([^"]+)"', svg)
    assert view is not None
    left, top, width, height = (float(v) for v in view.group(1).split())
    extents = _text_extents(svg)
    assert extents
    outside = [
        (line, round(a), round(b))
        for line, a, b, y in extents
        if a < left or b > left + width or not top < y < top + height
    ]
    assert outside == [], f"viewBox {view.group(1)}"
