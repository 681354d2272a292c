"""A flowchart drawn: Mermaid text, or a PNG (with matplotlib, when installed)."""

from __future__ import annotations

import importlib
import io

from .errors import WorkflowRunnerError
from .graph import Flowchart

_SHAPES = {
    "rect": ("[", "]"),
    "round": ("(", ")"),
    "stadium": ("([", "])"),
    "diamond": ("{", "}"),
    "hexagon": ("{{", "}}"),
    "subroutine": ("[[", "]]"),
    "circle": ("((", "))"),
}


def _quote(text: str) -> str:
    return '"' + text.replace('"', "#quot;") + '"'


def to_mermaid(chart: Flowchart) -> str:
    """Mermaid `flowchart TD` source of a chart, with classes for a run's marks."""
    lines = ["---", f"title: {chart.title}", "---", "flowchart TD"]
    opened: list[str] = []  # the clusters the node lines are inside, innermost last
    for node in chart.nodes:
        left, right = _SHAPES[node.shape]
        label = node.label
        if node.id in chart.notes:
            label = f"{label}<br/><i>{chart.notes[node.id]}</i>"
        inside = _clusters_of(chart, node.id)
        while opened and opened[-1] not in inside:
            opened.pop()
            lines.append("    " * (len(opened) + 1) + "end")
        for cluster_id in inside[len(opened) :]:
            lines.append(
                "    " * (len(opened) + 1)
                + f"subgraph {cluster_id} [{_quote(_cluster_label(chart, cluster_id))}]"
            )
            opened.append(cluster_id)
        lines.append("    " * (len(opened) + 1) + f"{node.id}{left}{_quote(label)}{right}")
    while opened:
        opened.pop()
        lines.append("    " * (len(opened) + 1) + "end")
    for edge in chart.edges:
        arrow = "-.->" if edge.dotted else "-->"
        if edge.label:
            text = _quote(edge.label)
            arrow = f"-. {text} .->" if edge.dotted else f"-- {text} -->"
        lines.append(f"    {edge.source} {arrow} {edge.target}")
    if chart.marks:
        lines.append("    classDef visited fill:#d8f3dc,stroke:#2d6a4f")
        lines.append("    classDef current fill:#fff3bf,stroke:#f08c00,stroke-width:3px")
        lines.append("    classDef failed fill:#ffe3e3,stroke:#c92a2a,stroke-width:3px")
        for mark in ("visited", "current", "failed"):
            ids = [node_id for node_id, m in chart.marks.items() if m == mark]
            if ids:
                lines.append(f"    class {','.join(ids)} {mark}")
    return "\n".join(lines) + "\n"


def _clusters_of(chart: Flowchart, node_id: str) -> list[str]:
    """The clusters holding a node, outermost first (a nested parallel's lanes sit in
    its branch's lane)."""
    holding = [c for c in chart.clusters if node_id in c.node_ids]
    return [c.id for c in sorted(holding, key=lambda c: -len(c.node_ids))]


def _cluster_label(chart: Flowchart, cluster_id: str) -> str:
    return next(c.label for c in chart.clusters if c.id == cluster_id)


class GraphUnavailable(WorkflowRunnerError):
    """The requested rendering needs a library that is not installed."""


def _ranks(chart: Flowchart) -> dict[str, int]:
    """Longest-path layer of every node over the forward (solid) edges."""
    rank = {node.id: 0 for node in chart.nodes}
    order = {node.id: n for n, node in enumerate(chart.nodes)}
    forward = [e for e in chart.edges if not e.dotted and order[e.target] > order[e.source]]
    # Nodes are created in an order consistent with the forward edges, so one sweep
    # in creation order settles the longest paths.
    for node in chart.nodes:
        for edge in forward:
            if edge.source == node.id:
                rank[edge.target] = max(rank[edge.target], rank[node.id] + 1)
    return rank


def to_png(chart: Flowchart) -> bytes:
    """Render a chart as PNG with matplotlib (an optional dependency).

    Raises:
        GraphUnavailable: matplotlib is not installed.
    """
    try:
        matplotlib = importlib.import_module("matplotlib")
    except ImportError as error:
        raise GraphUnavailable(
            "PNG output needs matplotlib, which is not installed "
            "(pip install matplotlib); or use --format mermaid and render the text with "
            "any Mermaid renderer (GitHub, mermaid.live, mermaid-cli)"
        ) from error
    matplotlib.use("Agg")
    plt = importlib.import_module("matplotlib.pyplot")
    rank = _ranks(chart)
    layers: dict[int, list[str]] = {}
    for node in chart.nodes:
        layers.setdefault(rank[node.id], []).append(node.id)
    where: dict[str, tuple[float, float]] = {}
    for level, ids in layers.items():
        for k, node_id in enumerate(ids):
            where[node_id] = ((k - (len(ids) - 1) / 2) * 4.0, -level * 1.4)
    width = max(len(ids) for ids in layers.values()) * 4.0 + 2
    fig, ax = plt.subplots(figsize=(max(6.0, width * 0.9), max(4.0, len(layers) * 1.0)))
    ax.set_axis_off()
    colours = {"visited": "#d8f3dc", "current": "#fff3bf", "failed": "#ffe3e3"}
    for edge in chart.edges:
        if edge.source == edge.target:
            continue
        (x1, y1), (x2, y2) = where[edge.source], where[edge.target]
        ax.annotate(
            "",
            xy=(x2, y2 + 0.25),
            xytext=(x1, y1 - 0.25),
            arrowprops={
                "arrowstyle": "->",
                "linestyle": ":" if edge.dotted else "-",
                "connectionstyle": "arc3,rad=0.3" if edge.dotted else "arc3",
            },
        )
        if edge.label:
            ax.text((x1 + x2) / 2, (y1 + y2) / 2, edge.label, fontsize=7, color="#555555")
    for node in chart.nodes:
        x, y = where[node.id]
        label = node.label + (f"\n{chart.notes[node.id]}" if node.id in chart.notes else "")
        style = "round" if node.shape in ("round", "stadium", "circle") else "square"
        if node.shape in ("diamond", "hexagon"):
            style = "darrow" if node.shape == "hexagon" else "round4"
        ax.text(
            x,
            y,
            label,
            ha="center",
            va="center",
            fontsize=8,
            bbox={
                "boxstyle": f"{style},pad=0.4",
                "facecolor": colours.get(chart.marks.get(node.id, ""), "white"),
                "edgecolor": "#333333",
            },
        )
    xs = [x for x, _ in where.values()]
    ys = [y for _, y in where.values()]
    ax.set_xlim(min(xs) - 3, max(xs) + 3)
    ax.set_ylim(min(ys) - 1, max(ys) + 1)
    ax.set_title(chart.title)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return buffer.getvalue()
