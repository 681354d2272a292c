"""A workflow's flowchart as inline SVG, with a run's path and position on it.

The chart of `graph.flowchart()` is a tree of step lists with branch arms and loop
bodies. It is laid out in layers (a simple Sugiyama layout): every node gets the layer
of its longest path from the start over the forward edges; an edge that skips layers
runs through invisible waypoints, so it never crosses a node; within a layer, nodes sit
under the average of their predecessors (a branch's `true` arm left of its `false`
arm) and are pushed apart where they would overlap. Loop edges (for_each, retry) are
drawn as curves on the right. `graph.mark_run()`'s marks become CSS classes: visited
steps and the edges between them are the run's path, `current` is where it waits,
`failed` where it failed.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field

from ..graph import Edge, Flowchart, Node
from .html import Markup, el, join

CHAR_WIDTH = 7.4  # px per character at the 12.5 px label font, generous
LINE_HEIGHT = 16
NOTE_LINE_HEIGHT = 14
PAD_X = 14
PAD_Y = 9
GAP_X = 30
GAP_Y = 40
MARGIN = 20
WRAP = 36
LABEL_CHAR_WIDTH = 6.4  # the 11 px edge-label font
DUMMY_WIDTH = 12


@dataclass
class Box:
    """A node (or an invisible waypoint of a long edge) placed on the canvas;
    `x` is its centre, `y` its top."""

    id: str
    node: Node | None
    lines: list[str] = field(default_factory=list)
    note: list[str] = field(default_factory=list)
    w: float = DUMMY_WIDTH
    h: float = 0.0
    rank: int = 0
    x: float = 0.0
    y: float = 0.0

    @property
    def bottom(self) -> float:
        return self.y + self.h

    @property
    def mid(self) -> float:
        return self.y + self.h / 2


@dataclass
class Route:
    """A forward edge through its waypoints (box ids, source first)."""

    boxes: list[str]
    label: str


@dataclass
class Loop:
    """A loop edge (for_each's next item, retry's next attempt) drawn on the right."""

    d: str
    label: list[str]
    label_x: float
    label_y: float


@dataclass
class Layout:
    boxes: dict[str, Box]
    routes: list[Route]
    loops: list[Loop]
    width: float
    height: float


def _loop(boxes: dict[str, Box], source_id: str, target_id: str, label: str) -> Loop:
    source, target = boxes[source_id], boxes[target_id]
    lines = _wrap(label, 20, 2) if label else []
    if source_id == target_id:
        x, y = source.x + source.w / 2, source.mid
        d = f"M{x:.1f},{y - 8:.1f} C{x + 44:.1f},{y - 30:.1f} {x + 44:.1f},{y + 30:.1f} "
        d += f"{x:.1f},{y + 8:.1f}"
        return Loop(d, lines, x + 40, y - 4 * len(lines) + 4)
    # A loop goes back up; a callback's create-to-await edge goes down: the boxes between.
    low, high = sorted((target.rank, source.rank))
    span = [b for b in boxes.values() if low <= b.rank <= high]
    right = max(b.x + b.w / 2 for b in span) + 26
    sx, sy = source.x + source.w / 2, source.mid
    tx, ty = target.x + target.w / 2, target.mid
    d = f"M{sx:.1f},{sy:.1f} C{right:.1f},{sy:.1f} {right:.1f},{ty:.1f} {tx:.1f},{ty:.1f}"
    return Loop(d, lines, right + 2, (sy + ty) / 2 - 6 * len(lines) + 10)


_MICROS = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\.\d+Z")


def _wrap(text: str, width: int = WRAP, max_lines: int = 3) -> list[str]:
    """Lines of at most `width` characters: broken at spaces, and a word longer than a
    line (a URL) after a slash or a dot rather than anywhere."""
    pieces: list[tuple[str, bool]] = []  # (text, preceded by a space)
    for word in _MICROS.sub(r"\1Z", text).split():
        spaced = True
        while len(word) > width:
            cut = max(word.rfind("/", 0, width), word.rfind(".", 0, width))
            cut = cut + 1 if cut > width // 3 else width
            pieces.append((word[:cut], spaced))
            word, spaced = word[cut:], False
        pieces.append((word, spaced))
    lines: list[str] = []
    for piece, spaced in pieces:
        joined = (lines[-1] + (" " if spaced else "") + piece) if lines else piece
        if lines and len(joined) <= width:
            lines[-1] = joined
        else:
            lines.append(piece)
    lines = lines or [""]
    if len(lines) > max_lines:
        lines = [*lines[: max_lines - 1], lines[max_lines - 1][: width - 1] + "…"]
    return lines


def _size(box: Box) -> None:
    assert box.node is not None
    text_w = max(len(line) for line in [*box.lines, *box.note]) * CHAR_WIDTH
    text_h = len(box.lines) * LINE_HEIGHT + len(box.note) * NOTE_LINE_HEIGHT
    shape = box.node.shape
    if shape == "diamond":
        box.w, box.h = max(text_w * 1.6 + 24, 96), text_h * 1.9 + 22
    elif shape == "hexagon":
        box.w, box.h = text_w + 2 * PAD_X + 28, text_h + 2 * PAD_Y
    elif shape == "subroutine":
        box.w, box.h = text_w + 2 * PAD_X + 16, text_h + 2 * PAD_Y
    else:
        box.w, box.h = text_w + 2 * PAD_X, text_h + 2 * PAD_Y
    box.w = max(box.w, 60)


def _merged(edges: list[Edge]) -> list[Edge]:
    """Edges between the same two nodes (a wait's event and its timeout, a branch arm
    that is empty) as one route whose label names both ways, so labels never overlap."""
    by_pair: dict[tuple[str, str], Edge] = {}
    for e in edges:
        seen = by_pair.get((e.source, e.target))
        if seen is None:
            by_pair[(e.source, e.target)] = e
        elif e.label:
            label = f"{seen.label} / {e.label}" if seen.label else e.label
            by_pair[(e.source, e.target)] = Edge(e.source, e.target, label, e.dotted)
    return list(by_pair.values())


def layout(chart: Flowchart) -> Layout:
    """Place the chart's nodes in layers and route its edges."""
    order = {node.id: n for n, node in enumerate(chart.nodes)}
    boxes: dict[str, Box] = {}
    for node in chart.nodes:
        box = Box(node.id, node, _wrap(node.label))
        if node.id in chart.notes:
            box.note = _wrap(chart.notes[node.id], WRAP + 4, 2)
        _size(box)
        boxes[node.id] = box
    forward = [e for e in chart.edges if not e.dotted and order[e.target] > order[e.source]]
    loops = [(e.source, e.target, e.label) for e in chart.edges if e not in forward]
    forward = _merged(forward)
    # Layers: longest path over the forward edges. A for_each's "done" edge must also
    # pass below its body (the body's last steps loop back to it).
    constraints = [(e.source, e.target) for e in forward]
    for source, target, _ in loops:
        for e in forward:
            if e.source == target and e.label == "done" and source != target:
                constraints.append((source, e.target))
    rank = {node.id: 0 for node in chart.nodes}
    for _ in range(len(chart.nodes)):
        changed = False
        for source, target in constraints:
            if rank[target] < rank[source] + 1:
                rank[target] = rank[source] + 1
                changed = True
        if not changed:
            break
    for box in boxes.values():
        box.rank = rank[box.id]
    routes: list[Route] = []
    preds: dict[str, list[tuple[str, int]]] = {box_id: [] for box_id in boxes}
    for index, e in enumerate(forward):
        chain = [e.source]
        for step in range(rank[e.source] + 1, rank[e.target]):
            dummy = Box(f"{e.source}>{e.target}#{step}", None, rank=step)
            boxes[dummy.id] = dummy
            preds[dummy.id] = []
            chain.append(dummy.id)
        chain.append(e.target)
        for a, b in itertools.pairwise(chain):
            preds[b].append((a, index))
        routes.append(Route(chain, e.label))
    _place(boxes, preds, order)
    # An edge label hangs beside its edge and may reach past the outermost step: the
    # canvas holds every label (as wide as _label_span estimates) as well as the steps.
    labelled = [route for route in routes if route.label]
    overflow = MARGIN - min((_label_span(boxes, r)[0] for r in labelled), default=MARGIN)
    for box in boxes.values():
        box.x += max(overflow, 0.0)
    drawn = [_loop(boxes, source, target, label) for source, target, label in loops]
    right = max(b.x + b.w / 2 for b in boxes.values())
    right = max([right, *(_label_span(boxes, r)[1] for r in labelled)])
    for loop in drawn:
        longest = max((len(line) for line in loop.label), default=0)
        right = max(right, loop.label_x + longest * LABEL_CHAR_WIDTH, loop.label_x)
    height = max(b.bottom for b in boxes.values()) + MARGIN
    return Layout(boxes, routes, drawn, right + MARGIN, height)


def _label_place(boxes: dict[str, Box], route: Route) -> tuple[float, float, str]:
    """(x, baseline y, text-anchor) of a forward edge's label: just below its source,
    on the side its first segment turns to."""
    source, after = boxes[route.boxes[0]], boxes[route.boxes[1]]
    x1, x2 = source.x, after.x
    if x2 >= x1:
        return x1 + (x2 - x1) * 0.35 + 8, source.bottom + 14, "start"
    return x1 + (x2 - x1) * 0.35 - 8, source.bottom + 14, "end"


def _label_span(boxes: dict[str, Box], route: Route) -> tuple[float, float]:
    """(left, right) of a forward edge's label on the canvas, its width estimated."""
    x, _, anchor = _label_place(boxes, route)
    width = len(route.label) * LABEL_CHAR_WIDTH
    return (x, x + width) if anchor == "start" else (x - width, x)


def _place(
    boxes: dict[str, Box], preds: dict[str, list[tuple[str, int]]], order: dict[str, int]
) -> None:
    layers: dict[int, list[Box]] = {}
    for box in boxes.values():
        layers.setdefault(box.rank, []).append(box)
    top = float(MARGIN)
    for level in sorted(layers):
        row = layers[level]

        def wanted(box: Box) -> float:
            sources = [boxes[p].x for p, _ in preds[box.id]]
            return sum(sources) / len(sources) if sources else 0.0

        def key(box: Box) -> tuple[float, int, int]:
            first_edge = min((i for _, i in preds[box.id]), default=0)
            return (wanted(box), first_edge, order.get(box.id, 0))

        row.sort(key=key)
        desired = [wanted(b) for b in row]
        xs: list[float] = []
        for i, box in enumerate(row):
            x = desired[i]
            if xs:
                x = max(x, xs[-1] + (row[i - 1].w + box.w) / 2 + GAP_X)
            xs.append(x)
        shift = sum(desired) / len(desired) - sum(xs) / len(xs)
        height = max((b.h for b in row), default=0.0)
        for box, x in zip(row, xs, strict=True):
            box.x = x + shift
            box.y = top + (height - box.h) / 2
        top += height + GAP_Y
    left = min(b.x - b.w / 2 for b in boxes.values())
    for box in boxes.values():
        box.x += MARGIN - left


# --- drawing -------------------------------------------------------------------------


def _shape(box: Box) -> Markup:
    assert box.node is not None
    x0, y0, w, h = box.x - box.w / 2, box.y, box.w, box.h
    shape = box.node.shape
    if shape == "diamond":
        points = " ".join(
            f"{px:.1f},{py:.1f}"
            for px, py in ((box.x, y0), (x0 + w, box.mid), (box.x, y0 + h), (x0, box.mid))
        )
        return el("polygon", points=points, class_="shape")
    if shape == "hexagon":
        inset = 14
        corners = (
            (x0 + inset, y0),
            (x0 + w - inset, y0),
            (x0 + w, box.mid),
            (x0 + w - inset, y0 + h),
            (x0 + inset, y0 + h),
            (x0, box.mid),
        )
        points = " ".join(f"{px:.1f},{py:.1f}" for px, py in corners)
        return el("polygon", points=points, class_="shape")
    radius = {"round": h / 2, "stadium": h / 2, "circle": h / 2}.get(shape, 6)
    rect = el(
        "rect",
        x=f"{x0:.1f}",
        y=f"{y0:.1f}",
        width=f"{w:.1f}",
        height=f"{h:.1f}",
        rx=f"{radius:.1f}",
        class_="shape",
    )
    if shape == "subroutine":
        lines = join(
            el(
                "line",
                x1=f"{x:.1f}",
                y1=f"{y0:.1f}",
                x2=f"{x:.1f}",
                y2=f"{y0 + h:.1f}",
                class_="shape-line",
            )
            for x in (x0 + 8, x0 + w - 8)
        )
        return Markup(rect + lines)
    return rect


def _text(box: Box) -> Markup:
    total = len(box.lines) * LINE_HEIGHT + len(box.note) * NOTE_LINE_HEIGHT
    y = box.mid - total / 2 + LINE_HEIGHT * 0.75
    spans = []
    for line in box.lines:
        spans.append(el("tspan", line, x=f"{box.x:.1f}", y=f"{y:.1f}"))
        y += LINE_HEIGHT
    for line in box.note:
        spans.append(el("tspan", line, x=f"{box.x:.1f}", y=f"{y:.1f}", class_="note"))
        y += NOTE_LINE_HEIGHT
    return el("text", join(spans), x=f"{box.x:.1f}", y=f"{box.mid:.1f}", class_="label")


def _path(points: list[tuple[float, float]]) -> str:
    d = f"M{points[0][0]:.1f},{points[0][1]:.1f}"
    for (x1, y1), (x2, y2) in itertools.pairwise(points):
        dy = (y2 - y1) / 2
        d += f" C{x1:.1f},{y1 + dy:.1f} {x2:.1f},{y2 - dy:.1f} {x2:.1f},{y2:.1f}"
    return d


def to_svg(chart: Flowchart, title: str | None = None) -> Markup:
    """The chart as an inline <svg> element (classes styled by the console's CSS)."""
    plan = layout(chart)
    boxes = plan.boxes
    marked = set(chart.marks)
    parts: list[Markup] = [
        Markup(
            '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
            'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
            'class="arrowhead"/></marker><marker id="arrow-taken" viewBox="0 0 10 10" '
            'refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse">'
            '<path d="M0,0 L10,5 L0,10 z" class="arrowhead taken"/></marker></defs>'
        )
    ]
    for cluster in chart.clusters:  # a parallel's branch: a lane behind its steps
        inside = [boxes[i] for i in cluster.node_ids if i in boxes]
        if not inside:
            continue
        left = min(b.x - b.w / 2 for b in inside) - 8
        right = max(b.x + b.w / 2 for b in inside) + 8
        top = min(b.y for b in inside) - 18
        bottom = max(b.bottom for b in inside) + 8
        parts.append(
            el(
                "g",
                el(
                    "rect",
                    x=f"{left:.1f}",
                    y=f"{top:.1f}",
                    width=f"{right - left:.1f}",
                    height=f"{bottom - top:.1f}",
                    rx="6",
                ),
                el("text", cluster.label, x=f"{left + 6:.1f}", y=f"{top + 12:.1f}"),
                class_="lane",
                data_cluster=cluster.id,
            )
        )
    for route in plan.routes:
        chain = [boxes[b] for b in route.boxes]
        points = [(chain[0].x, chain[0].bottom)]
        points += [(b.x, b.mid) for b in chain[1:-1]]
        points.append((chain[-1].x, chain[-1].y))
        taken = route.boxes[0] in marked and route.boxes[-1] in marked
        parts.append(
            el(
                "path",
                d=_path(points),
                class_="edge taken" if taken else "edge",
                marker_end="url(#arrow-taken)" if taken else "url(#arrow)",
            )
        )
        if route.label:
            lx, ly, anchor = _label_place(boxes, route)
            parts.append(
                el(
                    "text",
                    route.label,
                    x=f"{lx:.1f}",
                    y=f"{ly:.1f}",
                    class_="edge-label",
                    text_anchor=anchor,
                )
            )
    for loop in plan.loops:
        parts.append(el("path", d=loop.d, class_="edge loop", marker_end="url(#arrow)"))
        if loop.label:
            spans = join(
                el("tspan", line, x=f"{loop.label_x:.1f}", dy="0" if n == 0 else "13")
                for n, line in enumerate(loop.label)
            )
            parts.append(
                el(
                    "text",
                    spans,
                    x=f"{loop.label_x:.1f}",
                    y=f"{loop.label_y:.1f}",
                    class_="edge-label",
                )
            )
    for box in boxes.values():
        if box.node is None:
            continue
        mark = chart.marks.get(box.id, "")
        tooltip = box.node.label + (f" — {chart.notes[box.id]}" if box.id in chart.notes else "")
        parts.append(
            el(
                "g",
                el("title", tooltip),
                _shape(box),
                _text(box),
                class_=f"node {box.node.shape} {mark}".strip(),
                data_node=box.id,
            )
        )
    return el(
        "svg",
        join(parts),
        xmlns="http://www.w3.org/2000/svg",
        viewBox=f"0 0 {plan.width:.0f} {plan.height:.0f}",
        width=f"{plan.width:.0f}",
        height=f"{plan.height:.0f}",
        class_="graph",
        role="img",
        aria_label=title or chart.title,
    )
