"""The console's page of one run, and its actions (confirm, then do)."""

from __future__ import annotations

from collections.abc import Mapping

from ..definition import WorkflowDefinition
from ..definition.branches import family_base, shown_child
from ..definition.completion import is_batch_result
from ..engine.callbacks import run_callbacks
from ..engine.run_lookup import workflow_version_of
from ..errors import UnknownWorkflow
from ..graph import run_chart
from ..store import RunSummary, StoredEvent
from ..stream import (
    ChildrenWaiting,
    FlowHeld,
    OperatorAction,
    RunCompleted,
    RunFailed,
    RunStarted,
    RunState,
    StepWaitingForCallback,
    StepWaitingForCondition,
    SuspensionFact,
    TaskScheduled,
    TasksScheduled,
    fold_run,
)
from ..timeline import duration, run_timeline, timeline_entries
from .actions import action_bar, done_notice
from .batches import batch_view
from .html import Markup, el, join, url
from .layout import (
    View,
    json_value,
    notice,
    page,
    short_id,
    status_badge,
    table,
    when,
)
from .limits_page import limit_waits_block
from .migrate import migrate_links
from .svg import to_svg


def _definition(view: View, state: RunState) -> tuple[WorkflowDefinition | None, str]:
    """The definition to draw, and a note when it is not the one the run is pinned to."""
    pinned = view.registry.find(state.workflow_name, state.fingerprint)
    if pinned is not None:
        return pinned, ""
    try:
        latest = view.registry.latest(state.workflow_name)
    except UnknownWorkflow:
        return None, (
            f"Workflow {state.workflow_name!r} is not registered in this console "
            "(WORKFLOW_MODULES), so its graph cannot be drawn."
        )
    return latest, (
        f"The definition this run is pinned to ({state.fingerprint[:12]}…) is not "
        f"registered; drawn from version {latest.version} instead."
    )


def _graph(view: View, run: RunSummary, state: RunState) -> Markup:
    definition, note = _definition(view, state)
    if definition is None:
        return notice("warning", note)
    chart = run_chart(view.store, definition, run.tenant_id, run.run_id)
    legend = el(
        "ul",
        join(
            el("li", el("span", class_=f"swatch {cls}"), text)
            for cls, text in (
                ("visited", "the run's path"),
                ("current", "where it waits"),
                ("failed", "where it failed or was cancelled"),
            )
        ),
        class_="legend",
    )
    return join(
        [
            notice("warning", note) if note else "",
            el(
                "div",
                to_svg(chart, f"{definition.name} v{definition.version}"),
                class_="graph-wrap",
            ),
            legend,
        ]
    )


def _awaited_row(key: str, ref: str | None) -> list[object]:
    if ref is None:
        return [el("code", key), el("span", "no event came (the wait timed out)", class_="muted")]
    return [
        el("code", key),
        join(
            [
                "awaited event ",
                el("code", ref),
                el(
                    "p",
                    "Referenced by id, not copied onto the run's stream: its payload stays "
                    "in the inbox (and is gone once erased).",
                    class_="muted small",
                ),
            ]
        ),
    ]


def _results(view: View, run: RunSummary, events: list[StoredEvent]) -> Markup:
    """The run's current step results (awaited events by reference only, never their
    payloads), and how the run ended."""
    rows: list[list[object]] = []
    stored = view.store.results.of_run(run.tenant_id, run.run_id)
    values = {k: v for k, v in stored.values.items() if k not in stored.awaited_refs}
    refs = dict(stored.awaited_refs)
    last = next((e for e in reversed(events) if isinstance(e.fact, SuspensionFact)), None)
    last_fact = last.fact if last is not None else None
    redacted = isinstance(last_fact, SuspensionFact) and last_fact.redacted
    if not values and not refs and isinstance(last_fact, SuspensionFact):
        # A run written by 0.1 carries every result on its latest suspension.
        refs = dict(last_fact.awaited_refs or {})
        values = {k: v for k, v in (last_fact.results or {}).items() if k not in refs}
    rows += [
        [
            el("code", key),
            batch_view(value, run.tenant_id) if is_batch_result(value) else json_value(value),
        ]
        for key, value in values.items()
    ]
    rows += [_awaited_row(key, ref) for key, ref in refs.items()]
    for e in events:
        if isinstance(e.fact, RunCompleted):
            rows.append([el("strong", "returned"), json_value(e.fact.result)])
        elif isinstance(e.fact, RunFailed):
            detail = join(
                [
                    el("span", e.fact.error),
                    el("p", f"reason: {e.fact.reason}", class_="muted small")
                    if e.fact.reason
                    else "",
                    json_value(e.fact.result) if e.fact.result is not None else "",
                ]
            )
            rows.append([el("strong", f"failed at step {e.fact.step_index}"), detail])
    intro = "Each step result as the run's passes last wrote it, and how the run ended."
    parts: list[object] = [el("p", intro, class_="muted")]
    if redacted:
        parts.append(notice("warning", "Redacted: an event these results came from was erased."))
    parts.append(table(["Key", "Value"], rows, "No step results recorded.", class_="results"))
    return join(parts)


def _summary(view: View, run: RunSummary, state: RunState) -> Markup:
    started = state.started
    version = workflow_version_of(run, view.registry)
    facts: list[tuple[str, object]] = [
        ("Run", el("code", run.run_id)),
        ("Tenant", el("code", run.tenant_id)),
        ("Workflow", f"{run.workflow_name}" + (f" v{version}" if version else "")),
        ("Definition", el("code", state.fingerprint[:16] + "…", title=state.fingerprint)),
        ("Started", when(run.started_at, view.now)),
        ("Last change", when(run.updated_at, view.now)),
    ]
    if state.settled:
        facts.append(("Ran for", duration(run.updated_at - run.started_at)))
    if isinstance(started, RunStarted):
        source = started.cron_scheduled_at or started.trigger_event_id or "–"
        facts.append(("Trigger", join([started.trigger_event_type, " ", el("code", source)])))
        if started.idempotency_key is not None:
            facts.append(("Idempotency key", el("code", started.idempotency_key)))
        if started.parent_run_id:
            parent = started.parent_run_id
            link = el("a", parent, href=url(f"/runs/{parent}", {"tenant": run.tenant_id}))
            facts.append(("Parent run", el("code", link)))
    facts.append(("Stream version", str(state.version)))
    return el("dl", join(join([el("dt", k), el("dd", v)]) for k, v in facts), class_="facts-grid")


def _timeline(view: View, run: RunSummary) -> Markup:
    rows = []
    for entry in timeline_entries(run_timeline(view.store, run.tenant_id, run.run_id)):
        e = entry.event
        stream: Markup | str
        if entry.on_dispatch_stream:
            stream = join(["delivery ", short_id(e.stream_id)])
        else:
            stream = f"run v{e.version}"
        kind = e.type.removeprefix("workflow.")
        css = "event"
        if e.type.endswith("failed"):
            css += " bad"
        if isinstance(e.fact, OperatorAction):
            css += " operator"
        rows.append(
            [
                when(e.recorded_at, view.now),
                f"+{duration(entry.after)}" if entry.after else "",
                stream,
                el("span", kind, class_=css),
                entry.detail,
                duration(entry.took) if entry.took else "",
            ]
        )
    return table(
        ["Recorded", "After", "Stream", "Event", "Detail", "Took"],
        rows,
        "The run's stream is empty.",
        class_="timeline",
        id="timeline",
    )


def _pending(view: View, run: RunSummary, settled: bool) -> Markup:
    pending = view.store.console.pending_of_run(run.tenant_id, run.run_id)
    rows = [
        [
            str(p.step_index),
            p.suspension_event_type.removeprefix("workflow."),
            p.wait_event_type or "–",
            when(p.wake_at, view.now),
            el("code", p.awaited_event_id) if p.awaited_event_id else "–",
            when(p.leased_until, view.now) if p.leased_until else "–",
        ]
        for p in pending
    ]
    lag = (
        notice(
            "warning",
            "The run has ended; its pending row goes away when PendingProjection next runs "
            "(nudged after every pass, and every minute).",
        )
        if settled and pending
        else Markup("")
    )
    return lag + table(
        ["Step", "Suspension", "Awaited type", "Due at", "Matched event", "Leased until"],
        rows,
        "No pending row: the run is not suspended (or the projection has not caught up).",
    )


def _deliveries(view: View, run: RunSummary) -> Markup:
    rows = []
    for o in view.store.outbox.of_run(run.tenant_id, run.run_id):
        action: object = ""
        if view.allow_actions and o.status == "failed":
            action = el(
                "a",
                "Redeliver",
                href=url(f"/deliveries/{o.request_id}/redeliver", {"tenant": run.tenant_id}),
                class_="btn small",
                data_action="redeliver",
            )
        rows.append(
            [
                short_id(o.request_id),
                o.step_kind,
                status_badge(o.status),
                str(o.attempts),
                when(o.created_at, view.now),
                action,
            ]
        )
    return table(
        ["Request", "Kind", "Status", "Attempts", "Requested", ""],
        rows,
        "No mail or webhook requested.",
    )


def _children(view: View, run: RunSummary) -> Markup:
    rows = [
        [
            # A child not started yet has a run id but no run to show.
            short_id(c.child_run_id)
            if c.status == "pending"
            else el(
                "a",
                short_id(c.child_run_id),
                href=url(f"/runs/{c.child_run_id}", {"tenant": run.tenant_id}),
            ),
            *shown_child(c.child_workflow, c.item_index, c.kind),
            str(c.item_index),
            status_badge(c.status),
            c.reason or "",
        ]
        for c in view.store.children.of_run(run.tenant_id, run.run_id, limit=CHILDREN_SHOWN)
    ]
    return table(
        ["Child run", "Workflow", "Step", "Item", "Status", "Reason"],
        rows,
        "No child runs.",
        class_="children",
    )


def _callbacks(view: View, run: RunSummary) -> Markup:
    """The callbacks the run handed out: where each stands and until when it takes an
    answer (never a token: only the start of its hash)."""
    rows = [
        [
            c.row.step_index,
            c.row.name or "–",
            status_badge(c.status),
            when(c.deadline, view.now),
            "heartbeat" if c.deadline < c.row.expires_at else "timeout",
            when(c.row.last_heartbeat_at, view.now),
            c.row.failed_error or when(c.row.completed_at, view.now),
            el("code", c.row.token_hash[:12] + "…"),
        ]
        for c in run_callbacks(view.store, run.tenant_id, run.run_id, view.now)
    ]
    headers = ["Step", "Name", "Status", "Until", "Set by", "Last heartbeat", "Answer", "Token"]
    return table(headers, rows, "No callbacks.", class_="callbacks")


# Children listed on a run's page (a map may have thousands).
CHILDREN_SHOWN = 200


def run_page(view: View, run: RunSummary, query: Mapping[str, str]) -> str:
    """Everything about one run: where it stands, its graph, results and timeline."""
    events = view.store.streams.load(run.tenant_id, run.run_id)
    state = fold_run(run.run_id, run.tenant_id, [e.recorded for e in events])
    status = str(state.status)
    where = ""
    if isinstance(state.suspension, TaskScheduled):
        task = state.suspension
        where = el(
            "p",
            f"Waiting at step {task.step_index} for its {task.step_kind} {task.task_key}",
            class_="where",
        )
    elif isinstance(state.suspension, TasksScheduled):
        where = el(
            "p",
            f"Waiting at step {state.suspension.step_index} for "
            f"{len(state.suspension.tasks)} tasks running at once",
            class_="where",
        )
    elif isinstance(state.suspension, ChildrenWaiting):
        waits = state.suspension
        where = el(
            "p",
            f"Waiting at step {waits.step_index} for {waits.children} child run(s) of "
            f"{family_base(waits.child_workflow) or waits.child_workflow}",
            class_="where",
        )
    elif isinstance(state.suspension, StepWaitingForCondition):
        condition = state.suspension
        where = el(
            "p",
            f"Waiting at step {condition.step_index} for condition {condition.key!r}: "
            f"not met on check {condition.attempts}"
            + (f" of {condition.max_attempts}" if condition.max_attempts else "")
            + ", next check ",
            when(condition.due_at, view.now),
            *(
                [", gives up ", when(condition.timeout_at, view.now)]
                if condition.timeout_at is not None
                else []
            ),
            class_="where",
        )
    elif isinstance(state.suspension, StepWaitingForCallback):
        answer = state.suspension
        what = f"callback {answer.name!r}" if answer.name else "a callback"
        beat = answer.timer == "heartbeat_timeout"
        where = el(
            "p",
            f"Waiting at step {answer.step_index} for {what} (result {answer.result_key!r}), "
            + ("until the next heartbeat, due " if beat else "until "),
            when(answer.due_at, view.now),
            class_="where",
        )
    elif isinstance(state.suspension, FlowHeld):
        held = state.suspension
        # A concurrency hold's wake time is when it queued, not when it will start.
        start = (
            ["starts when a slot frees"]
            if held.reason == "concurrency"
            else ["starts ", when(held.wake_at, view.now)]
        )
        where = el(
            "p",
            f"Held before its first step by flow control ({held.reason}); ",
            *start,
            class_="where",
        )
    elif state.suspension is not None:
        where = el(
            "p",
            f"Waiting at step {state.suspension.step_index} until ",
            when(state.suspension.due_at, view.now),
            class_="where",
        )
    body = join(
        [
            done_notice(query),
            el(
                "div",
                el("h1", run.workflow_name, " ", status_badge(status)),
                action_bar(view, run, status),
                class_="run-head",
            ),
            where,
            limit_waits_block(view, state),
            migrate_links(view, run.workflow_name, run.tenant_id, run.workflow_version)
            if status == "waiting"
            else "",
            _summary(view, run, state),
            el("section", el("h2", "Graph"), _graph(view, run, state), class_="card"),
            el(
                "section",
                el("h2", "Pending row"),
                _pending(view, run, state.settled),
                class_="card",
            ),
            el("section", el("h2", "Callbacks"), _callbacks(view, run), class_="card"),
            el("section", el("h2", "Step results"), _results(view, run, events), class_="card"),
            el("section", el("h2", "Timeline"), _timeline(view, run), class_="card"),
            el("section", el("h2", "Mail and webhooks"), _deliveries(view, run), class_="card"),
            el("section", el("h2", "Child runs"), _children(view, run), class_="card"),
        ]
    )
    crumbs = el("p", el("a", "← Runs", href="/"), class_="crumbs")
    return page(view, f"{run.workflow_name} {run.run_id[:8]}", body, active="/", crumbs=crumbs)
