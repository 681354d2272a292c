"""A workflow's step tree as a flowchart (Mermaid), optionally with a run's path on it.

The step tree becomes nodes and edges: a sequence is a chain, a branch a diamond with
two arms that join again, each edge labelled with when it is taken (the condition: a
reference's path, a function's name, a lambda's expression; `not` it), a for_each and
a retry a node with a loop edge back from the end of their body, waits rounded and
hexagonal nodes; a wait_for_event or wait_for_callback leaves by two edges, one for
what it waits for (the event and its match) and one for its timeout; a
wait_for_condition is a hexagon with a loop edge onto itself (check, wait, check
again). With a run, the nodes its recorded paths went through are marked `visited`
and the step it is at (waiting) or failed at is marked `current` / `failed`.

A run's stream records paths where something happened: suspensions, resumes,
failures, redrives and dispatch requests. Steps before such a point in the same list
are visited too; a branch arm that neither suspended nor dispatched anything leaves
no trace, so only its diamond is marked.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .definition.dsl import (
    AwaitCallback,
    Branch,
    BranchResult,
    CallWorkflow,
    Compute,
    CreateCallback,
    CronTrigger,
    EventTrigger,
    ForEach,
    MailSend,
    Map,
    Parallel,
    Retry,
    Return,
    Step,
    Task,
    Wait,
    WaitForCallback,
    WaitForCondition,
    WaitForEvent,
    WebhookSend,
    WorkflowDefinition,
)
from .definition.retry import RetryPolicy
from .durations import format_instant, is_duration
from .graph_conditions import condition_text
from .graph_lanes import Cluster, lanes
from .match_builders import describe_match
from .refs import Ref
from .store import Store, StoredEvent
from .stream import (
    RETURNED_FAILURE,
    Dispatched,
    DispatchFailed,
    DispatchRequested,
    RetryScheduled,
    RunCancelled,
    RunCompleted,
    RunFailed,
    RunMigrated,
    RunRedriven,
    StepResumed,
    StepStopped,
    StepWaiting,
    StepWaitingForCallback,
    StepWaitingForCondition,
    StepWaitingForEvent,
    TaskFailed,
    TaskScheduled,
)

# Structural key of a step: one (index, arm) pair per level; for_each items and retry
# attempts do not change which node a step is.
StepKey = tuple[tuple[int, str], ...]


@dataclass
class Node:
    id: str
    label: str
    shape: str  # rect | round | diamond | hexagon | subroutine | circle | stadium
    key: StepKey | None = None


@dataclass
class Edge:
    source: str
    target: str
    label: str = ""
    dotted: bool = False


@dataclass
class Flowchart:
    """Nodes and edges of one workflow, plus the marks of a run (node id -> class)."""

    title: str
    nodes: list[Node] = field(default_factory=list)
    edges: list[Edge] = field(default_factory=list)
    marks: dict[str, str] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    clusters: list[Cluster] = field(default_factory=list)

    def node_for_id(self, node_id: str) -> Node | None:
        return next((node for node in self.nodes if node.id == node_id), None)

    def node_for(self, key: StepKey) -> Node | None:
        for node in self.nodes:
            if node.key == key:
                return node
        return None


def _node_id(key: StepKey) -> str:
    return "s" + "_".join(f"{i}{arm}" for i, arm in key)


def _static(value: Any) -> str | None:
    """A label for a step argument: static text as is, a reference as `{its.path}`."""
    if isinstance(value, Ref):
        return "{" + value.text + "}"
    return value if isinstance(value, str) else None


def _label(step: Step) -> tuple[str, str]:
    """(label, shape) of a step node."""
    if isinstance(step, Compute):
        return f"compute {step.key}", "rect"
    if isinstance(step, MailSend):
        subject = _static(step.subject)
        label = "mail.send" + (f": {subject}" if subject else "")
        return label + _awaited(step.result_key, step.retry, step.catch), "subroutine"
    if isinstance(step, WebhookSend):
        url = _static(step.url)
        label = "webhook.send" + (f" {url}" if url else "")
        return label + _awaited(step.result_key, step.retry, step.catch), "subroutine"
    if isinstance(step, Task):
        return f"task {step.key}" + _awaited(step.key, step.retry, step.catch), "subroutine"
    if isinstance(step, Wait):
        amount = _static(step.for_) or _static(step.until) or "(computed)"
        return f"wait {amount}", "stadium"
    if isinstance(step, WaitForEvent):
        into = f" → {step.result_key}" if step.result_key != step.event else ""
        return f"wait for {step.event}{into}", "hexagon"
    if isinstance(step, WaitForCallback):  # its timeout is on its edge (_wait_exits)
        label = f"wait for callback → {step.result_key}{_beats(step.heartbeat)}"
        return label + (", catch" if step.catch else ""), "hexagon"
    if isinstance(step, CreateCallback):
        timeout = _static(step.timeout) or "(computed)"
        return f"create callback {step.name}, timeout {timeout}{_beats(step.heartbeat)}", "stadium"
    if isinstance(step, AwaitCallback):
        catch = ", catch" if step.catch else ""
        return f"await callback {step.name} → {step.result_key}{catch}", "hexagon"
    if isinstance(step, WaitForCondition):
        pace = step.every if step.backoff == "fixed" else f"from {step.every} doubling"
        if step.cap:
            pace += f" to {step.cap}"
        limits = [f"≤{step.max_attempts} checks"] if step.max_attempts else []
        limits += [f"timeout {step.timeout}"] if step.timeout else []
        tail = f", {', '.join(limits)}" if limits else ""
        catch = ", catch" if step.catch else ""
        return f"wait for condition → {step.key}, every {pace}{tail}{catch}", "hexagon"
    if isinstance(step, Return):
        value = step.value
        failed = isinstance(value, dict) and value.get("isSuccess") is False
        return ("return failure" if failed else "return"), "round"
    if isinstance(step, Branch):
        return "branch", "diamond"
    if isinstance(step, ForEach):
        return f"for each {step.as_}", "hexagon"
    if isinstance(step, Retry):
        return f"retry ×{step.times} ({step.backoff}, base {step.base}, cap {step.cap})", "rect"
    if isinstance(step, CallWorkflow):
        if not step.wait:
            return f"start workflow {step.workflow}", "subroutine"
        into = f" → {step.result_key}" if step.result_key else ""
        return f"call workflow {step.workflow}{into}" + (", catch" if step.catch else ""), (
            "subroutine"
        )
    if isinstance(step, Map):
        into = f" → {step.result_key}" if step.result_key else ""
        catch = ", catch" if step.catch else ""
        policy = f", {step.completion.describe()}" if step.completion else ""
        return (
            f"map {step.workflow} ×{step.concurrency} at once{into}{policy}{catch}",
            "subroutine",
        )
    if isinstance(step, BranchResult):
        value = _static(step.value)
        return "branch result" + (f" {value}" if value else ""), "round"
    if isinstance(step, Parallel):
        into = f" → {step.result_key}" if step.result_key else ""
        policy = f", {step.completion.describe()}" if step.completion else ""
        catch = ", catch" if step.catch else ""
        if step.branches is not None:
            limit = f", {step.max_concurrency} at once" if step.max_concurrency else ""
            count = len(step.branches)
            what = f"{count} branch{'' if count == 1 else 'es'}{limit}"
            return f"parallel ({what}){into}{policy}{catch}", "diamond"
        return f"parallel ({len(step.steps)} tasks){into}{policy}{catch}", "diamond"
    return type(step).__name__, "rect"  # pragma: no cover - every step kind is above


def _beats(heartbeat: str | None) -> str:
    return f", heartbeat {heartbeat}" if heartbeat else ""


def _wait_exits(step: WaitForEvent | WaitForCallback, node_id: str) -> list[tuple[str, str]]:
    """A wait's two ways on: what it waits for arrives, or its timeout passes."""
    timeout = _static(step.timeout)
    when = "in time"  # a computed timeout
    if timeout is not None:
        when = f"in {timeout}" if is_duration(timeout) else f"by {timeout}"
    if isinstance(step, WaitForCallback):
        return [(node_id, "answered"), (node_id, f"no answer {when}: timeout")]
    where = "" if step.match is None else f" where {describe_match(step.match)}"
    return [(node_id, f"{step.event}{where}"), (node_id, f"no {step.event} {when}: timeout")]


def _awaited(result_key: str | None, retry: RetryPolicy | None, catch: bool) -> str:
    """What a task's node adds: where its result goes, its attempts, whether it catches."""
    if result_key is None:
        return ""
    attempts = f", ×{retry.max_attempts} {retry.backoff}" if retry else ""
    once = ", at most once" if retry and retry.at_most_once else ""
    return f" → {result_key}{attempts}{once}" + (", catch" if catch else "")


class _Builder:
    def __init__(self, chart: Flowchart) -> None:
        self.chart = chart
        self.created: dict[str, list[str]] = {}  # callback name -> its create nodes
        self.awaited: list[tuple[str, str]] = []  # (callback name, await node)

    def add(self, step: Step, key: StepKey) -> Node:
        label, shape = _label(step)
        node = Node(_node_id(key), label, shape, key)
        self.chart.nodes.append(node)
        if isinstance(step, CreateCallback):
            self.created.setdefault(step.name, []).append(node.id)
        elif isinstance(step, AwaitCallback):
            self.awaited.append((step.name, node.id))
        return node

    def link_callbacks(self) -> None:
        """A dotted edge from each create_callback node to each await_callback node of
        its name: where the answer the await takes comes from."""
        for name, node_id in self.awaited:
            for made in self.created.get(name, []):
                self.chart.edges.append(Edge(made, node_id, f"callback {name}", dotted=True))

    def link(self, exits: Iterable[tuple[str, str]], target: str) -> None:
        for source, label in exits:
            self.chart.edges.append(Edge(source, target, label))

    def sequence(
        self, steps: Sequence[Step], prefix: StepKey, entry_exits: list[tuple[str, str]]
    ) -> list[tuple[str, str]]:
        """Chain `steps` after `entry_exits`; return the open exits (node id, edge label)."""
        exits = entry_exits
        for index, step in enumerate(steps):
            key = (*prefix, (index, ""))
            exits = self.step(step, key, exits)
        return exits

    def step(self, step: Step, key: StepKey, exits: list[tuple[str, str]]) -> list[tuple[str, str]]:
        node = self.add(step, key)
        self.link(exits, node.id)
        head = key[:-1]
        index = key[-1][0]
        if isinstance(step, Return):
            self.chart.edges.append(Edge(node.id, "finish"))
            return []
        if isinstance(step, BranchResult):
            return [(node.id, "branch ends")]
        if isinstance(step, Branch):
            condition = condition_text(step.if_)
            true_exits = self.sequence(step.on_true, (*head, (index, "t")), [(node.id, condition)])
            false_exits = self.sequence(
                step.on_false, (*head, (index, "f")), [(node.id, f"not {condition}")]
            )
            return true_exits + false_exits
        if isinstance(step, (WaitForEvent, WaitForCallback)):
            return _wait_exits(step, node.id)
        if isinstance(step, ForEach):
            body = self.sequence(step.do, (*head, (index, "")), [(node.id, "item")])
            for source, label in body:
                self.chart.edges.append(Edge(source, node.id, label or "next item", dotted=True))
            return [(node.id, "done")]
        if isinstance(step, Parallel) and step.branches is not None:
            return lanes(
                self.chart.nodes,
                self.chart.clusters,
                self.sequence,
                step,
                node.id,
                (*head, (index, "")),
            )
        if isinstance(step, Parallel):
            joined: list[tuple[str, str]] = []
            for j, task in enumerate(step.steps):
                joined += self.step(task, (*head, (index, ""), (j, "")), [(node.id, "at once")])
            return joined
        if isinstance(step, WaitForCondition):
            # Drawn as a loop: check, wait, check again, until Done (or it gives up).
            self.chart.edges.append(
                Edge(node.id, node.id, "not yet: wait, check again", dotted=True)
            )
            return [(node.id, "done")]
        if isinstance(step, Retry):
            body = self.sequence(step.do, (*head, (index, "")), [(node.id, "attempt")])
            self.chart.edges.append(
                Edge(node.id, node.id, "step fails: back off, try again", dotted=True)
            )
            return body
        return [(node.id, "")]


def flowchart(definition: WorkflowDefinition) -> Flowchart:
    """The flowchart of a workflow's step tree."""
    trigger = definition.trigger
    if isinstance(trigger, CronTrigger):
        start = f"cron {trigger.schedule}"
    elif isinstance(trigger, EventTrigger):
        start = f"on {trigger.event_type}"
    else:
        start = "called by a workflow"
    chart = Flowchart(title=f"{definition.name} v{definition.version}")
    chart.nodes.append(Node("start", start, "circle"))
    builder = _Builder(chart)
    exits = builder.sequence(definition.steps, (), [("start", "")])
    chart.nodes.append(Node("finish", "end", "circle"))
    builder.link(exits, "finish")
    builder.link_callbacks()
    return chart


def _key_of(path: Sequence[dict[str, Any]]) -> StepKey:
    key: list[tuple[int, str]] = []
    for frame in path:
        arm = frame.get("arm")
        key.append((int(frame["i"]), "t" if arm == "true" else "f" if arm == "false" else ""))
    return tuple(key)


def _visit(chart: Flowchart, key: StepKey) -> None:
    """Mark the node at `key`, its ancestors, and the earlier siblings at every level."""
    for depth in range(len(key)):
        for earlier in range(key[depth][0] + 1):
            node = chart.node_for((*key[:depth], (earlier, "")))
            if node is not None:
                chart.marks.setdefault(node.id, "visited")


def _run_to_the_end(chart: Flowchart) -> None:
    """A completed run ran every step list it entered to its end or to a return: mark the
    steps after a visited one in the same list (a branch arm, a loop body) visited."""
    for node in list(chart.nodes):
        if node.key is None or chart.marks.get(node.id) != "visited":
            continue
        *prefix, (index, arm) = node.key
        later = index + 1
        while (sibling := chart.node_for((*prefix, (later, arm)))) is not None:
            chart.marks.setdefault(sibling.id, "visited")
            if sibling.shape == "round":  # a return: the run ended here
                break
            later += 1


def delivery_paths(
    dispatch_events: Iterable[StoredEvent],
) -> tuple[list[Sequence[dict[str, Any]]], list[Sequence[dict[str, Any]]]]:
    """(paths of every requested delivery, paths of those that failed for good) from a
    run's dispatch-stream events (StreamStore.dispatch_events_of_run)."""
    requested: dict[str, Sequence[dict[str, Any]]] = {}
    failed: dict[str, Sequence[dict[str, Any]]] = {}
    for e in dispatch_events:
        fact = e.fact
        if isinstance(fact, DispatchRequested):
            requested[e.stream_id] = fact.path
            failed.pop(e.stream_id, None)  # a redelivery starts over
        elif isinstance(fact, DispatchFailed) and e.stream_id in requested:
            failed[e.stream_id] = requested[e.stream_id]
        elif isinstance(fact, Dispatched):
            failed.pop(e.stream_id, None)
    return list(requested.values()), list(failed.values())


def run_chart(
    store: Store, definition: WorkflowDefinition, tenant_id: str, run_id: str
) -> Flowchart:
    """The workflow's flowchart with a run's path, position, failed tasks and failed
    deliveries marked (the definition the run is pinned to, when given that one)."""
    chart = flowchart(definition)
    events = store.streams.load(tenant_id, run_id)
    requested, failed = delivery_paths(store.streams.dispatch_events_of_run(tenant_id, run_id))
    mark_run(chart, definition, events, requested, failed)
    return chart


def mark_run(
    chart: Flowchart,
    definition: WorkflowDefinition,
    run_events: Sequence[StoredEvent],
    dispatch_paths: Iterable[Sequence[dict[str, Any]]] = (),
    failed_deliveries: Iterable[Sequence[dict[str, Any]]] = (),
) -> None:
    """Mark a run's path and position on the flowchart (in place).

    Args:
        chart: the workflow's flowchart.
        definition: the definition the chart was drawn from.
        run_events: the run's stored stream events, oldest first.
        dispatch_paths: paths of the run's dispatch requests (mail, webhooks).
        failed_deliveries: paths of those whose delivery failed for good.
    """
    chart.marks["start"] = "visited"
    position: tuple[StepKey, str, str] | None = None
    for path in dispatch_paths:
        _visit(chart, _key_of(path))
    task_paths: dict[str, StepKey] = {}
    for e in run_events:
        fact = e.fact
        if isinstance(fact, TaskScheduled):
            task_paths[fact.task_id] = _key_of(fact.entry_path)
        elif isinstance(fact, TaskFailed) and fact.task_id in task_paths:
            node = chart.node_for(task_paths[fact.task_id])
            if node is not None:
                chart.marks[node.id] = "failed"
                chart.notes[node.id] = f"task failed: {fact.error_class} ({fact.reason})"
        elif isinstance(fact, StepStopped):
            node = chart.node_for(_key_of(fact.path or [{"i": fact.step_index}]))
            if node is not None:
                chart.notes[node.id] = f"stopped early: {fact.reason}"
        waits = (StepWaiting, StepWaitingForEvent, RetryScheduled, TaskScheduled)
        if isinstance(fact, (*waits, StepWaitingForCallback, StepWaitingForCondition)):
            key = _key_of(fact.entry_path)
            _visit(chart, key)
            if isinstance(fact, TaskScheduled):
                note = f"waiting for {fact.step_kind} {fact.task_key!r}"
            elif isinstance(fact, RetryScheduled):
                note = f"retry {fact.attempt}/{fact.max_attempts} failed, next at"
                note += f" {format_instant(fact.wake_at)}"
            elif isinstance(fact, StepWaitingForCondition):
                note = f"condition not met on check {fact.attempts}, next check at"
                note += f" {format_instant(fact.wake_at)}"
            elif isinstance(fact, StepWaiting):
                note = f"waiting until {format_instant(fact.wake_at)}"
            elif isinstance(fact, StepWaitingForCallback):
                what = f"callback {fact.name!r}" if fact.name else "a callback"
                note = f"waiting for {what} until {format_instant(fact.due_at)}"
            else:
                note = f"waiting for {fact.event_type} until {format_instant(fact.timeout_at)}"
            position = (key, "current", note)
        elif isinstance(fact, StepResumed):
            position = None
        elif isinstance(fact, RunFailed) and fact.reason == RETURNED_FAILURE:
            _visit(chart, ((len(definition.steps) - 1, ""),))
            position = ((), "failed", "returned a failure")
        elif isinstance(fact, RunFailed):
            last = len(definition.steps) - 1
            key = _key_of(fact.path or [{"i": min(fact.step_index, last)}])
            _visit(chart, key)
            position = (key, "failed", f"failed: {fact.error}")
        elif isinstance(fact, RunCompleted):
            for index in range(len(definition.steps)):
                node = chart.node_for(((index, ""),))
                if node is not None:
                    chart.marks.setdefault(node.id, "visited")
            _run_to_the_end(chart)
            chart.marks["finish"] = "visited"
            position = None
        elif isinstance(fact, RunCancelled):
            if position is not None:
                position = (position[0], "failed", "cancelled here")
        elif isinstance(fact, RunRedriven):
            position = None
        elif isinstance(fact, RunMigrated) and position is not None:
            key = _key_of(fact.to_path)
            _visit(chart, key)
            position = (key, position[1], f"{position[2]} (migrated to v{fact.to_version})")
    for path in failed_deliveries:
        node = chart.node_for(_key_of(path))
        if node is not None:
            chart.marks[node.id] = "failed"
            chart.notes[node.id] = "delivery failed"
    if position is not None:
        key, mark, note = position
        node = chart.node_for(key) if key else chart.node_for_id("finish")
        if node is not None:
            chart.marks[node.id] = mark
            chart.notes[node.id] = note
