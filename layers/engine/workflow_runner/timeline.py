"""A run's timeline for people: one line per stream event, shared by the CLI, the
local runtime's activity and the demo."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from .definition.branches import family_base
from .durations import parse_instant
from .errors import InvalidInput
from .step_paths import describe_path
from .store import LoggedLine, Store, StoredEvent
from .stream import (
    NEVER,
    RUN_STREAM,
    CallbackCompleted,
    CallbackCreated,
    CallbackFailed,
    CallbackHeartbeat,
    ChildrenRequested,
    ChildrenSettled,
    ChildrenWaiting,
    DispatchAttemptFailed,
    Dispatched,
    DispatchFailed,
    DispatchRequested,
    OperatorAction,
    RetryScheduled,
    RunCancelled,
    RunCompleted,
    RunFailed,
    RunMigrated,
    RunRedriven,
    RunStarted,
    StepEventMatched,
    StepResumed,
    StepStopped,
    StepWaiting,
    StepWaitingForCallback,
    StepWaitingForCondition,
    StepWaitingForEvent,
    SuspensionFact,
    TaskAttemptFailed,
    TaskCompleted,
    TaskFailed,
    TaskScheduled,
    TasksScheduled,
)


def instant(value: datetime | str | None) -> str:
    """An instant for a table cell or message: UTC to the second, e.g. 2026-01-05T09:00:00Z."""
    if value is None:
        return "-"
    moment = value
    if isinstance(value, str):
        try:
            moment = parse_instant(value)
        except InvalidInput:
            return value
    assert isinstance(moment, datetime)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def wake_text(wake_at: datetime) -> str:
    """When a pending row wakes, for a table: an instant, or "when its task ends" for a
    run waiting on a task (its row wakes on the task's outcome, not at a time)."""
    return "when its task ends" if wake_at >= NEVER else instant(wake_at)


def describe_event(e: StoredEvent) -> str:
    """One line saying what a run-stream event means."""
    f = e.fact
    if isinstance(f, RunStarted):
        source = f.cron_scheduled_at or f.trigger_event_id or "-"
        text = f"{f.workflow_name} v{f.workflow_version} on {f.trigger_event_type} ({source})"
        text += f", child of run {f.parent_run_id}" if f.parent_run_id else ""
        return text + (f" (map item {f.map_index})" if f.map_index is not None else "")
    if isinstance(f, StepWaiting):
        return f"step {f.step_index}: wait until {instant(f.wake_at)}"
    if isinstance(f, StepWaitingForEvent):
        return f"step {f.step_index}: wait for {f.event_type} until {instant(f.timeout_at)}"
    if isinstance(f, (StepWaitingForCallback, *_CALLBACK_FACTS)):
        return _describe_callback(f)
    if isinstance(f, StepWaitingForCondition):
        limits = f" of {f.max_attempts}" if f.max_attempts else ""
        deadline = f", gives up at {instant(f.timeout_at)}" if f.timeout_at else ""
        return (
            f"step {f.step_index}: condition {f.key!r} not met on check {f.attempts}{limits}, "
            f"next check at {instant(f.wake_at)}{deadline}"
        )
    if isinstance(f, RetryScheduled):
        return (
            f"step {f.step_index}: attempt {f.attempt}/{f.max_attempts} "
            f"failed ({f.error}), next at {instant(f.wake_at)}"
        )
    if isinstance(f, StepEventMatched):
        return f"step {f.step_index}: matched {f.event_type} {f.event_id}"
    if isinstance(f, StepResumed):
        return f"step {f.step_index}: resumed by {f.resumed_by}"
    if isinstance(f, RunCompleted):
        return f"result {f.result}"
    if isinstance(f, RunFailed):
        return f"step {f.step_index}: {f.reason or f.error}"
    if isinstance(f, RunCancelled):
        return str(f.reason or "-")
    if isinstance(f, RunRedriven):
        return f"from step {f.from_step_index} on definition {f.definition_fingerprint[:12]}…"
    if isinstance(f, RunMigrated):
        return (
            f"moved from {describe_path(f.from_path or [{'i': f.from_step_index}])} to "
            f"{describe_path(f.to_path)} of v{f.to_version} "
            f"(definition {f.to_fingerprint[:12]}…)"
        )
    if isinstance(f, OperatorAction):
        text = f"{f.action} by {f.by}"
        if f.step_index is not None:
            text += f" (step {f.step_index})"
        return text + (f": {f.reason}" if f.reason else "")
    if isinstance(f, TaskScheduled):
        return (
            f"step {f.step_index}: {f.step_kind} {f.task_key!r} (up to {f.max_attempts} attempts)"
        )
    if isinstance(f, TaskAttemptFailed):
        retry = f", next at {instant(f.retry_at)}" if f.retry_at else ""
        return f"task {f.task_key!r} attempt {f.attempt} failed ({f.error_class}){retry}"
    if isinstance(f, TaskCompleted):
        return f"task {f.task_key!r} done on attempt {f.attempt}"
    if isinstance(f, TaskFailed):
        return (
            f"task {f.task_key!r} failed after {f.attempts} attempt(s): "
            f"{f.error_class} ({f.reason})"
        )
    if isinstance(f, TasksScheduled):
        keys = ", ".join(repr(t.task_key) for t in f.tasks)
        policy = f", {f.completion.describe()}" if f.completion else ""
        return f"step {f.step_index}: {len(f.tasks)} tasks at once ({keys}){policy}"
    if isinstance(f, ChildrenWaiting):
        if f.join_kind == "call":
            return f"step {f.step_index}: called {f.child_workflow} (run {f.child_run_id})"
        family = family_base(f.child_workflow)
        if family is not None:  # a parallel of branches (definition/branches.py)
            return (
                f"step {f.step_index}: parallel of {f.children} branch(es) ({family}), "
                f"{f.concurrency} at once"
                + (f", {f.completion.describe()}" if f.completion else "")
            )
        return (
            f"step {f.step_index}: map over {f.children} item(s) of {f.child_workflow}, "
            f"{f.concurrency} at once" + (f", {f.completion.describe()}" if f.completion else "")
        )
    if isinstance(f, ChildrenSettled):
        ended = f": {f.completion}" if f.completion else ""
        if f.failed:
            # The first failure counted with it (one counted earlier is not named here).
            first = f" ({f.reason}, run {f.child_run_id})" if f.reason else ""
            return f"{f.settled} child run(s) settled, {f.failed} failed{first}{ended}"
        return f"{f.settled} child run(s) settled{ended}"
    if isinstance(f, StepStopped):
        return _stopped(f)
    if isinstance(f, ChildrenRequested):
        return f"step {f.step_index}: started {f.child_workflow} ({len(f.child_run_ids)} run(s))"
    if isinstance(f, DispatchRequested):
        again = f" (redelivery {f.redelivery})" if f.redelivery else ""
        return f"step {f.step_index}: {f.step_kind} requested{again}"
    if isinstance(f, DispatchAttemptFailed):
        retry = f", next at {instant(f.retry_at)}" if f.retry_at else ""
        return f"{f.step_kind} attempt {f.attempt} failed: {f.error}{retry}"
    if isinstance(f, Dispatched):
        return f"{f.step_kind} delivered" + (
            f" (HTTP {f.status})" if f.step_kind == "webhook.send" else ""
        )
    if isinstance(f, DispatchFailed):
        return f"{f.step_kind} failed: {f.error}" + (f" ({f.reason})" if f.reason else "")
    return ""


def _stopped(f: StepStopped) -> str:
    """A map or parallel that ended early: which items it stopped, and why."""
    text = f"step {f.step_index}: {f.kind} stopped ({f.reason})"
    if f.kind == "parallel":
        keys = ", ".join(repr(k) for k in f.task_keys)
        return f"{text}: task(s) {keys} not run again"
    parts = []
    if f.cancelled:
        parts.append("cancelled item(s) " + ", ".join(str(i) for i in f.cancelled))
    if f.kept:
        parts.append("left item(s) " + ", ".join(str(i) for i in f.kept) + " to another owner")
    if f.not_started:
        parts.append(f"{f.not_started} never started")
    return f"{text}: {'; '.join(parts)}" if parts else text


_CALLBACK_FACTS = (CallbackCreated, CallbackCompleted, CallbackFailed, CallbackHeartbeat)


def _describe_callback(
    f: StepWaitingForCallback
    | CallbackCreated
    | CallbackCompleted
    | CallbackFailed
    | CallbackHeartbeat,
) -> str:
    """A callback's fact in words: a wait or await, a creation, an answer, a heartbeat."""
    named = f"callback {f.name!r}" if f.name else "callback"
    every = f.heartbeat_seconds if isinstance(f, (StepWaitingForCallback, CallbackCreated)) else 0
    beats = f", heartbeat every {duration(timedelta(seconds=every))}" if every else ""
    kept = "" if getattr(f, "run_due", True) else "; kept for its await"
    if isinstance(f, StepWaitingForCallback):
        what = f"await {named}" if f.name else "wait for a callback"
        text = f"step {f.step_index}: {what} (result {f.result_key!r}) until {instant(f.due_at)}"
        return text + beats
    if isinstance(f, CallbackCreated):
        return f"step {f.step_index}: {named} created, open until {instant(f.timeout_at)}{beats}"
    if isinstance(f, CallbackCompleted):
        return f"step {f.step_index}: {named} completed (payload: event {f.event_id}){kept}"
    if isinstance(f, CallbackFailed):
        return f"step {f.step_index}: {named} failed: {f.message}{kept}"
    return f"step {f.step_index}: {named} heartbeat, open until {instant(f.deadline)}"


def shown_payload(e: StoredEvent) -> dict[str, Any]:
    """A stored payload as people and tools may see it: without the run's callback
    secret, with which anyone who read it could make the run's callback tokens."""
    return {k: v for k, v in e.payload.items() if k != "callbackSecret"}


def _compact(payload: object, limit: int = 160) -> str:
    """An event this module has no words for (a newer release's type): its payload."""
    text = json.dumps(payload, ensure_ascii=False, separators=(", ", ": "), default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def duration(delta: timedelta) -> str:
    """A duration for people: 850 ms, 42 s, 3 min 5 s, 2 h 5 min, 6 d 3 h."""
    seconds = delta.total_seconds()
    if seconds < 1:
        return f"{round(seconds * 1000)} ms"
    if seconds < 60:
        return f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:.1f} s"
    minutes, sec = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    if days:
        return f"{days} d {hours} h" if hours else f"{days} d"
    if hours:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    return f"{minutes} min {sec} s" if sec else f"{minutes} min"


@dataclass(frozen=True)
class TimelineEntry:
    """One event of a run's timeline (its own stream or one of its dispatch streams).

    `after`: time since the previous entry; `took`: how long what this event ends took
    (a wait until its resume, a delivery since its request, the run until it ended).
    """

    event: StoredEvent
    detail: str
    after: timedelta | None
    took: timedelta | None

    @property
    def on_dispatch_stream(self) -> bool:
        return self.event.stream_type != RUN_STREAM


def timeline_entries(timeline: Sequence[StoredEvent]) -> list[TimelineEntry]:
    """A run's timeline (run_timeline's woven events) with, for each event, the time
    since the one before and, where it ends something, how long that took."""
    merged = list(timeline)
    started = next((e.recorded_at for e in merged if e.stream_type == RUN_STREAM), None)
    suspended_at: datetime | None = None
    requested: dict[str, datetime] = {}
    entries: list[TimelineEntry] = []
    previous: datetime | None = None
    for e in merged:
        fact = e.fact
        took: timedelta | None = None
        if isinstance(fact, SuspensionFact):
            suspended_at = e.recorded_at
        elif isinstance(fact, StepResumed) and suspended_at is not None:
            took, suspended_at = e.recorded_at - suspended_at, None
        elif isinstance(fact, DispatchRequested):
            requested[e.stream_id] = e.recorded_at
        elif e.stream_type != RUN_STREAM and e.stream_id in requested:
            took = e.recorded_at - requested[e.stream_id]
        elif isinstance(fact, (RunCompleted, RunFailed, RunCancelled)) and started is not None:
            took = e.recorded_at - started
        after = None if previous is None else e.recorded_at - previous
        entries.append(TimelineEntry(e, describe_event(e) or _compact(e.payload), after, took))
        previous = e.recorded_at
    return entries


def run_timeline(store: Store, tenant_id: str, run_id: str) -> list[StoredEvent]:
    """A run's stream with its fire-and-forget deliveries' events woven in, in time order
    (the run stream's own order kept)."""
    events = store.streams.load(tenant_id, run_id)
    deliveries = store.streams.dispatch_events_of_run(tenant_id, run_id)
    merged = [(e.recorded_at, 0, e.version, e) for e in events]
    merged += [(e.recorded_at, 1, e.position, e) for e in deliveries]
    return [e for *_, e in sorted(merged, key=lambda item: item[:3])]


def activity_rows(store: Store, events: list[StoredEvent]) -> list[list[str]]:
    """One table row (time, run, workflow, event, detail) per appended stream event;
    dispatch outcomes name the run and workflow that requested them."""
    names: dict[tuple[str, str], str] = {}

    def workflow_of(tenant_id: str, run_id: str) -> str:
        if (tenant_id, run_id) not in names:
            summary = store.runs.get(tenant_id, run_id)
            names[(tenant_id, run_id)] = summary.workflow_name if summary else "?"
        return names[(tenant_id, run_id)]

    rows = []
    for e in events:
        fact = e.fact
        if e.stream_type == RUN_STREAM:
            workflow = getattr(fact, "workflow_name", None) or workflow_of(e.tenant_id, e.stream_id)
            rows.append(
                [
                    instant(e.recorded_at),
                    e.stream_id[:8],
                    workflow,
                    e.type.removeprefix("workflow."),
                    describe_event(e),
                ]
            )
        elif isinstance(fact, (Dispatched, DispatchFailed, DispatchAttemptFailed)):
            first = store.streams.load(e.tenant_id, e.stream_id)[:1]
            origin = first[0].fact if first else None
            requested = origin if isinstance(origin, DispatchRequested) else None
            if isinstance(fact, Dispatched) and fact.step_kind == "webhook.send":
                detail = f"HTTP {fact.status}"
            elif isinstance(fact, DispatchFailed) and fact.reason:
                detail = f"{fact.error} ({fact.reason})"
            elif isinstance(fact, Dispatched):
                detail = ""
            else:
                detail = fact.error
            rows.append(
                [
                    instant(e.recorded_at),
                    requested.run_id[:8] if requested else "",
                    requested.workflow_name if requested else "",
                    f"{fact.step_kind} {e.type.removeprefix('step.')}",
                    detail,
                ]
            )
    return rows


def log_json(line: LoggedLine) -> dict[str, Any]:
    """A line of the local log (run_log.py) as `--json` shows it."""
    return {
        "tenantId": line.tenant_id,
        "runId": line.run_id,
        "loggedAt": line.logged_at,
        "message": line.message,
        "taskKey": line.task_key,
        "detail": line.detail,
    }
