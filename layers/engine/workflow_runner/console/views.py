"""Console pages for many runs: the runs list, pending and due runs, doctor findings."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime, timedelta

from ..durations import format_instant, parse_duration, parse_instant
from ..engine.doctor import run_doctor
from ..engine.run_lookup import (
    AmbiguousRunId,
    RunFilter,
    decode_cursor,
    list_runs,
    workflow_names,
    workflow_version_of,
)
from ..errors import InvalidInput
from ..local.kept import kept_code_of
from ..local.routes import template_routes
from ..store import PendingKey, PendingRow
from ..stream import NEVER, RUN_STATUSES
from ..timeline import duration, instant
from .html import Markup, el, join, url
from .layout import (
    View,
    notice,
    page,
    run_link,
    short_id,
    status_badge,
    table,
    tenant_param,
    when,
)
from .migrate import migrate_links

PAGE_SIZE = 50
_AGO = re.compile(r"^(\d+)([smhdw])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
_UUID_PAIR = re.compile(r"^([0-9a-f-]{36}) ([0-9a-f-]{36})(.*)$")


def parse_when(raw: str, field: str, now: datetime) -> datetime:
    """An instant, or a duration ago (30m, 2h, 1d, PT1H), as the CLI takes it.

    Raises:
        InvalidInput: neither; the message names the field.
    """
    text = raw.strip()
    short = _AGO.match(text)
    try:
        if short:
            return now - timedelta(**{_UNITS[short.group(2)]: int(short.group(1))})
        if text.startswith("P"):
            return now - parse_duration(text)
        return parse_instant(text)
    except InvalidInput:
        raise InvalidInput(
            f"{field}: expected an instant (2026-01-05T09:00:00Z) or a duration ago "
            f"(30m, 2h, 1d, PT1H), got {raw!r}"
        ) from None


def run_filter(query: Mapping[str, str], now: datetime) -> RunFilter:
    """The runs list's filters from its query string.

    Raises:
        InvalidInput: a filter has a bad value (named in the message).
    """
    status = query.get("status") or None
    if status is not None and status not in RUN_STATUSES:
        raise InvalidInput(f"status must be one of {', '.join(RUN_STATUSES)}, got {status!r}")
    version = query.get("version") or None
    if version is not None and not version.isdigit():
        raise InvalidInput(f"version must be a number, got {version!r}")
    return RunFilter(
        status=status,
        workflow=query.get("workflow") or None,
        workflow_version=int(version) if version else None,
        tenant_id=tenant_param(query.get("tenant")),
        key=query.get("key") or None,
        since=parse_when(query["since"], "since", now) if query.get("since") else None,
        until=parse_when(query["until"], "until", now) if query.get("until") else None,
    )


def _select(name: str, options: list[tuple[str, str]], current: str, label: str) -> Markup:
    return el(
        "label",
        el("span", label),
        el(
            "select",
            join(
                el("option", text, value=value, selected=value == current)
                for value, text in options
            ),
            name=name,
        ),
    )


def _input(name: str, current: str, label: str, placeholder: str, size: int = 14) -> Markup:
    return el(
        "label",
        el("span", label),
        el("input", type="text", name=name, value=current, placeholder=placeholder, size=size),
    )


def _filters(view: View, query: Mapping[str, str]) -> Markup:
    names = workflow_names(view.store, view.registry)
    status = query.get("status", "")
    chips = join(
        el(
            "a",
            label.capitalize(),
            href=url("/", {**query, "status": value, "after": None}),
            class_="chip active" if value == status else "chip",
        )
        for value, label in [("", "all"), *[(s, s) for s in RUN_STATUSES]]
    )
    form = el(
        "form",
        _select(
            "status",
            [("", "any status"), *[(s, s) for s in RUN_STATUSES]],
            status,
            "Status",
        ),
        _select(
            "workflow",
            [("", "any workflow"), *[(n, n) for n in names]],
            query.get("workflow", ""),
            "Workflow",
        ),
        _input("version", query.get("version", ""), "Version", "any", 4),
        _input("tenant", query.get("tenant", ""), "Tenant", "any tenant (UUID)", 20),
        _input("key", query.get("key", ""), "Idempotency key", "e.g. r-3", 12),
        _input("since", query.get("since", ""), "Changed since", "1h, 2d or ISO", 10),
        _input("until", query.get("until", ""), "until", "ISO instant", 10),
        el(
            "div",
            el("button", "Apply", type="submit", class_="btn primary"),
            el("a", "Clear", href="/", class_="btn"),
            class_="buttons",
        ),
        method="get",
        action="/",
        class_="filters",
        id="filters",
    )
    return join([el("div", chips, class_="chips"), form])


def runs_page(view: View, query: Mapping[str, str]) -> tuple[int, str]:
    """The runs list at `/`: every run across tenants, filtered, newest change first."""
    try:
        flt = run_filter(query, view.now)
        if query.get("after"):
            decode_cursor(query["after"])
        result = list_runs(view.store, view.registry, flt, query.get("after") or None, PAGE_SIZE)
    except InvalidInput as error:
        body = join([el("h1", "Runs"), _filters(view, query), notice("error", str(error))])
        return 400, page(view, "Runs", body, active="/")
    rows = []
    for run in result.runs:
        version = workflow_version_of(run, view.registry)
        rows.append(
            [
                run_link(run.run_id, run.tenant_id),
                short_id(run.tenant_id),
                join(
                    [
                        el("span", run.workflow_name, class_="workflow"),
                        el("span", f" v{version}", class_="version") if version else "",
                    ]
                ),
                status_badge(run.status),
                when(run.started_at, view.now),
                when(run.updated_at, view.now),
            ]
        )
    pager = []
    if query.get("after"):
        pager.append(el("a", "⇤ First page", href=url("/", {**query, "after": None}), class_="btn"))
    if result.next_cursor:
        pager.append(
            el(
                "a",
                "Next page →",
                href=url("/", {**query, "after": result.next_cursor}),
                class_="btn",
                rel="next",
            )
        )
    shown = f"{len(result.runs)} run(s)" + (" on this page" if result.next_cursor else "")
    body = join(
        [
            el("h1", "Runs", el("span", shown, class_="count")),
            _filters(view, query),
            migrate_links(view, flt.workflow, flt.tenant_id) if flt.workflow else "",
            table(
                ["Run", "Tenant", "Workflow", "Status", "Started", "Last change"],
                rows,
                "No runs match these filters.",
                class_="runs",
                id="runs",
            ),
            el("nav", join(pager), class_="pager"),
        ]
    )
    return 200, page(view, "Runs", body, active="/")


def ambiguous_page(view: View, error: AmbiguousRunId) -> str:
    rows = [
        [
            run_link(r.run_id, r.tenant_id, full=True),
            el("code", r.tenant_id),
            r.workflow_name,
            status_badge(r.status),
        ]
        for r in error.candidates
    ]
    body = join(
        [
            el("h1", "Which run?"),
            notice("warning", "This id prefix matches several runs; pick one."),
            table(["Run", "Tenant", "Workflow", "Status"], rows, ""),
        ]
    )
    return page(view, "Which run?", body, active="/")


def _pending_state(row: PendingRow, now: datetime) -> Markup:
    if row.leased_until is not None and row.leased_until > now:
        return el("span", f"in flight (lease until {instant(row.leased_until)})", class_="muted")
    if row.awaited_event_id is not None:
        return el("span", "event matched: due now", class_="badge status-running")
    if row.wake_at <= now:
        return el("span", f"due, {duration(now - row.wake_at)} late", class_="badge status-failed")
    if row.wake_at >= NEVER:
        return el("span", "its task runs", class_="muted")
    return el("span", f"in {duration(row.wake_at - now)}", class_="muted")


def _waiting_for(row: PendingRow) -> str:
    kind = row.suspension_event_type.removeprefix("workflow.")
    if row.wait_event_type:
        return f"event {row.wait_event_type}"
    if row.retry_attempt:
        return f"retry (attempt {row.retry_attempt} failed)"
    if kind == "task.scheduled":
        return "its task"
    return "timer" if kind == "step.waiting" else kind


def pending_page(view: View, query: Mapping[str, str]) -> tuple[int, str]:
    """Pending and due runs across tenants, soonest first."""
    due_only = query.get("due") == "1"
    try:
        tenant = tenant_param(query.get("tenant"))
        after = None
        if query.get("after"):
            key = decode_cursor(query["after"])
            after = PendingKey(key.updated_at, key.tenant_id, key.run_id)
    except InvalidInput as error:
        return 400, page(view, "Pending", notice("error", str(error)), active="/pending")
    workflow = query.get("workflow") or None
    rows = view.store.console.pending(
        tenant, workflow, view.now if due_only else None, after, PAGE_SIZE + 1
    )
    more = len(rows) > PAGE_SIZE
    rows = rows[:PAGE_SIZE]
    cells = [
        [
            run_link(r.run_id, r.tenant_id),
            short_id(r.tenant_id),
            r.workflow_name,
            str(r.step_index),
            _waiting_for(r),
            when(r.wake_at, view.now),
            _pending_state(r, view.now),
        ]
        for r in rows
    ]
    names = workflow_names(view.store, view.registry)
    form = el(
        "form",
        _select(
            "workflow", [("", "any workflow"), *[(n, n) for n in names]], workflow or "", "Workflow"
        ),
        _input("tenant", query.get("tenant", ""), "Tenant", "any tenant (UUID)", 20),
        el(
            "label",
            el("input", type="checkbox", name="due", value="1", checked=due_only),
            el("span", "due now only"),
            class_="check",
        ),
        el("div", el("button", "Apply", type="submit", class_="btn primary"), class_="buttons"),
        method="get",
        action="/pending",
        class_="filters",
    )
    pager = ""
    if more and rows:
        last = rows[-1]
        cursor = f"{format_instant(last.wake_at)}~{last.tenant_id}~{last.run_id}"
        pager = el(
            "a", "Next page →", href=url("/pending", {**query, "after": cursor}), class_="btn"
        )
    body = join(
        [
            el("h1", "Pending and due runs"),
            el(
                "p",
                "Every suspended run has one pending row: its timer, awaited event or retry. "
                "Due rows are sent to the resume queue by the due scan every minute.",
                class_="lead",
            ),
            form,
            table(
                ["Run", "Tenant", "Workflow", "Step", "Waiting for", "Wake at", "State"],
                cells,
                "Nothing is pending." if not due_only else "Nothing is due.",
                class_="pending",
            ),
            el("nav", pager, class_="pager"),
        ]
    )
    return 200, page(view, "Pending", body, active="/pending")


def with_code(text: str) -> Markup:
    """Text whose `backticked` parts are commands: shown as code, everything escaped."""
    parts = text.split("`")
    return join(el("code", part) if n % 2 else part for n, part in enumerate(parts))


_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
_RUN_MENTION = re.compile(rf"\brun ({_UUID})")
_DELIVERY = re.compile(r"^ (mail\.send|webhook\.send)\b")
_TENANT_FIRST = re.compile(rf"^({_UUID}) (.*)$")


def _doctor_item(item: str) -> Markup:
    """A finding's item with what it names linked: items start with the tenant, then the
    run (run checks), a delivery (linked to the deliveries page), or other words with
    the run named as `run <id>`."""
    found = _TENANT_FIRST.match(item)
    if not found:
        return el("li", item)
    tenant, rest = found.groups()
    if _RUN_MENTION.search(rest) is None:
        pair = _UUID_PAIR.match(item)
        if pair is None:
            return el("li", item)
        second, tail = pair.group(2), pair.group(3)
        if _DELIVERY.match(tail):
            link = el("a", el("code", second), href=url("/deliveries", {"tenant": tenant}))
        else:
            link = run_link(second, tenant, full=True)
        return el("li", link, " ", el("span", f"tenant {tenant[:8]}{tail}"))
    parts: list[object] = [el("span", f"tenant {tenant[:8]} ")]
    position = 0
    for mention in _RUN_MENTION.finditer(rest):
        parts.append(rest[position : mention.start(1)])
        parts.append(run_link(mention.group(1), tenant, full=True))
        position = mention.end(1)
    parts.append(rest[position:])
    return el("li", join(parts))


def doctor_page(view: View) -> tuple[int, str]:
    """`wfr doctor` as a page: every check with what is wrong and how to fix it."""
    routes = template_routes(view.template, view.registry)
    report = run_doctor(
        view.store, view.registry, None, routes, view.now, hosts=kept_code_of(view.store)
    )
    sections = []
    for check in report.checks:
        items = (
            el("ul", join(_doctor_item(i) for i in check.items[:50]), class_="items")
            if check.items
            else ""
        )
        more = (
            el("p", f"… and {len(check.items) - 50} more", class_="muted")
            if len(check.items) > 50
            else ""
        )
        fix = (
            el("p", el("strong", "Fix: "), with_code(check.fix), class_="fix")
            if check.fix and check.status != "ok"
            else ""
        )
        sections.append(
            el(
                "section",
                el(
                    "h2",
                    el("span", check.status, class_=f"badge check-{check.status}"),
                    " ",
                    check.name,
                ),
                el("p", with_code(check.summary)),
                items,
                more,
                fix,
                class_=f"finding finding-{check.status}",
            )
        )
    verdict = (
        notice("ok", "No problems found.")
        if report.ok
        else notice("error", f"{report.problems} problem(s) found.")
    )
    body = join([el("h1", "Doctor"), verdict, join(sections)])
    return 200, page(view, "Doctor", body, active="/doctor")
