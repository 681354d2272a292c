"""The page shell of the console (navigation, header) and the small formatting helpers
every page shares: status badges, instants, short ids, JSON values."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from ..definition import WorkflowRegistry
from ..errors import InvalidInput
from ..store import Store
from ..stream import NEVER
from ..timeline import duration, instant
from .html import Markup, el, join, url

NAV = (
    ("/", "Runs"),
    ("/pending", "Pending"),
    ("/deliveries", "Deliveries"),
    ("/limits", "Limits"),
    ("/doctor", "Doctor"),
)


@dataclass
class View:
    """What a page is rendered with: the database, the workflows, business time, and
    whether actions are enabled (with the token their forms must carry)."""

    store: Store
    registry: WorkflowRegistry
    now: datetime
    local_clock: datetime | None
    allow_actions: bool
    csrf: str
    database: str
    template: Path | None = None


def status_badge(status: str) -> Markup:
    return el("span", status, class_=f"badge status-{status}")


def when(moment: datetime | None, now: datetime | None = None) -> Markup:
    """An instant (UTC, to the second) with how long ago or ahead it is as a tooltip."""
    if moment is None:
        return Markup("–")
    if moment >= NEVER:  # a task's suspension: due when its outcome is recorded
        return el("span", "when its task ends", class_="muted")
    title = None
    if now is not None:
        delta = now - moment
        title = f"{duration(delta)} ago" if delta.total_seconds() >= 0 else f"in {duration(-delta)}"
    return el("time", instant(moment).replace("T", " "), datetime=instant(moment), title=title)


def short_id(value: str) -> Markup:
    return el("code", value[:8], title=value, class_="id")


def run_link(run_id: str, tenant_id: str, full: bool = False) -> Markup:
    text = el("code", run_id if full else run_id[:8], class_="id")
    return el("a", text, href=url(f"/runs/{run_id}", {"tenant": tenant_id}), title=run_id)


def json_value(value: Any, limit: int = 600) -> Markup:
    """A JSON value, pretty-printed and cut at `limit` characters."""
    text = json.dumps(value, indent=2, ensure_ascii=False, default=str)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return el("pre", text, class_="json")


def notice(kind: str, *content: object) -> Markup:
    return el("div", *content, class_=f"notice notice-{kind}", role="status")


def table(
    headers: Sequence[str], rows: Sequence[Sequence[object]], empty: str, **attrs: object
) -> Markup:
    if not rows:
        return el("p", empty, class_="empty")
    head = el("thead", el("tr", join(el("th", h) for h in headers)))
    body = el("tbody", join(el("tr", join(el("td", c) for c in row)) for row in rows))
    return el("div", el("table", head, body, **attrs), class_="table-wrap")


def page(
    view: View | None, title: str, body: Markup, active: str = "", crumbs: Markup | None = None
) -> str:
    """A whole HTML document: navigation, where the console points, then `body`."""
    links = join(
        el("a", label, href=href, class_="active" if href == active else None)
        for href, label in NAV
    )
    facts: list[Markup] = []
    if view is not None:
        facts.append(el("span", "database ", el("code", view.database), class_="fact"))
        if view.local_clock is not None:
            facts.append(el("span", "local time ", when(view.local_clock), class_="fact"))
        mode = "actions enabled" if view.allow_actions else "read-only"
        facts.append(
            el("span", mode, class_="badge mode-actions" if view.allow_actions else "badge")
        )
    header = el(
        "header",
        el("a", el("span", "wfr", class_="logo-mark"), " console", href="/", class_="logo"),
        el("nav", links),
        el("div", join(facts), class_="facts"),
        class_="top",
    )
    document = join(
        [
            Markup("<!doctype html>"),
            el(
                "html",
                el(
                    "head",
                    Markup('<meta charset="utf-8">'),
                    Markup('<meta name="viewport" content="width=device-width, initial-scale=1">'),
                    el("title", f"{title} · wfr console"),
                    Markup('<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">'),
                    Markup('<link rel="stylesheet" href="/static/console.css">'),
                    Markup('<script src="/static/console.js" defer></script>'),
                ),
                el("body", header, el("main", crumbs or "", body)),
                lang="en",
            ),
        ]
    )
    return str(document)


def hidden_fields(values: Mapping[str, object]) -> Markup:
    return join(
        el("input", type="hidden", name=k, value=v) for k, v in values.items() if v is not None
    )


def error_page(view: View | None, status: str, message: str, detail: str = "") -> str:
    body = join(
        [
            el("h1", status),
            notice("error", el("pre", message, class_="message")),
            el("p", detail) if detail else "",
            el("p", el("a", "← all runs", href="/")),
        ]
    )
    return page(view, status, body)


def tenant_param(raw: str | None) -> str | None:
    """A tenant filter as given (None: any tenant).

    Raises:
        InvalidInput: not a UUID.
    """
    if not raw:
        return None
    try:
        return str(uuid.UUID(raw.strip()))
    except ValueError:
        raise InvalidInput(f"tenant must be a UUID, got {raw!r}") from None
