"""The console's flow-control views: the Limits page (every limit key with its work in
flight and queued) and, on a run's page, what holds the run back."""

from __future__ import annotations

from collections.abc import Mapping

from ..flow.views import limit_waits, rate, turns_ahead
from ..stream import RunState
from .html import Markup, el, join
from .layout import View, notice, page, short_id, table, when


def limit_waits_block(view: View, state: RunState) -> Markup | str:
    """A notice per limit that holds the run (or one of its tasks) back; "" for none."""
    waits = limit_waits(view.store, state, view.now)
    if not waits:
        return ""
    return join(
        notice(
            "warning",
            f"Held by flow control: {wait.what} waits for {wait.limit} ",
            when(wait.until, view.now) if wait.until else "until a slot frees",
            f" ({wait.ahead} ahead)" if wait.ahead else "",
        )
        for wait in waits
    )


def limits_page(view: View, query: Mapping[str, str]) -> tuple[int, str]:
    """Every limit key (of a workflow, or all), with its work in flight and queued."""
    workflow = query.get("workflow") or None
    rows = view.store.flow.limits(view.now, workflow=workflow)
    cells = [
        [
            r.kind,
            rate(r),
            f"{r.workflow_name}/{r.step_key}" if r.step_key else r.workflow_name,
            r.key_value or "—",
            short_id(r.tenant_id) if r.tenant_id else "all tenants",
            str(r.in_flight) if r.kind == "concurrency" else "—",
            str(r.queued + turns_ahead(r, view.now)),
            when(r.oldest_queued_at, view.now) if r.oldest_queued_at else "—",
        ]
        for r in rows
    ]
    body = join(
        [
            el("h1", "Limits"),
            el(
                "p",
                "Flow control's keys: concurrency slots in flight (task attempts; a pass "
                "holds its slot only for its transaction), work queued for a slot or for a "
                "throttle's turn, and the oldest waiting. Rate limits and singletons skip "
                "triggers instead: `wfr runs list --skipped` lists them.",
                class_="lead",
            ),
            table(
                ["Kind", "Limit", "Workflow", "Key", "Tenant", "In flight", "Queued", "Oldest"],
                cells,
                "No limit keys yet.",
                class_="limits",
            ),
        ]
    )
    return 200, page(view, "Limits", body, active="/limits")
