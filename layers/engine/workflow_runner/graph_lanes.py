"""The branches of a parallel in a flowchart (graph.py): each branch a lane, a cluster
of the nodes of its steps, drawn from the parallel's node; the lanes join at the step
after the parallel (Mermaid subgraphs; lanes behind the console's steps)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .definition.dsl import Parallel, Step

StepKey = tuple[tuple[int, str], ...]
Exits = list[tuple[str, str]]


@dataclass
class Cluster:
    """A group of nodes drawn together: one branch of a parallel (a lane)."""

    id: str
    label: str
    node_ids: list[str] = field(default_factory=list)


def lanes(
    nodes: Sequence[Any],
    clusters: list[Cluster],
    sequence: Callable[[Sequence[Step], StepKey, Exits], Exits],
    step: Parallel,
    node_id: str,
    at: StepKey,
) -> Exits:
    """Chain each branch after the parallel's node as a lane; the lanes' open exits."""
    if not step.branches:
        return [(node_id, "nothing to run")]
    joined: Exits = []
    *head, (index, _arm) = at
    for k, lane in enumerate(step.branches):
        first = len(nodes)
        joined += sequence(lane, (*head, (index, f"b{k}")), [(node_id, f"branch {k}")])
        ids = [n.id for n in nodes[first:]]
        clusters.append(Cluster(f"{node_id}_b{k}", f"branch {k}", ids))
    return joined
