"""The console's failed deliveries: fire-and-forget mail and webhooks that failed for
good (or are stuck, or pending) across tenants, and their redelivery.

The list and the redelivery are the engine's (`engine.deliveries`, as `wfr dispatches`
uses them); a redelivery from here is also recorded on the run's stream as an operator
action (`engine.operator_actions.redeliver_as_operator`).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Mapping
from datetime import timedelta
from typing import cast

from ..durations import format_instant, parse_duration, parse_instant
from ..engine.deliveries import DeliveryFilter, RedeliveryRefused, list_deliveries
from ..engine.operator_actions import Operator, redeliver_as_operator
from ..errors import InvalidInput
from ..local.routes import RoutingError
from ..local.runtime import catch_up_local
from ..store import OutboxRow
from .actions import operator_name
from .html import el, join, url
from .layout import (
    View,
    hidden_fields,
    notice,
    page,
    run_link,
    short_id,
    status_badge,
    table,
    when,
)

PAGE_SIZE = 50
STATUSES = ("failed", "stuck", "pending")
_DONE = {
    "redelivered": ("ok", "The delivery was requested again: the step dispatcher sends it now."),
}


def _cursor(row: OutboxRow) -> str:
    assert row.created_at is not None
    return f"{format_instant(row.created_at)}~{row.request_id}"


def _uuid(raw: str, what: str) -> str:
    try:
        return str(uuid.UUID(raw.strip()))
    except ValueError:
        raise InvalidInput(f"{what} must be a UUID, got {raw!r}") from None


def _filters(
    query: Mapping[str, str],
) -> tuple[DeliveryFilter, timedelta, str | None, tuple[str, str] | None]:
    status = query.get("status") or "failed"
    if status not in STATUSES:
        raise InvalidInput(f"status must be one of {', '.join(STATUSES)}, got {status!r}")
    since = parse_duration(query.get("since") or "P1D")
    tenant = _uuid(query["tenant"], "tenant") if query.get("tenant") else None
    before = None
    if query.get("after"):
        at, _, request_id = query["after"].partition("~")
        before = (at, _uuid(request_id, "page cursor"))
    return cast(DeliveryFilter, status), since, tenant, before


def deliveries_page(view: View, query: Mapping[str, str]) -> tuple[int, str]:
    """Failed (or stuck, or pending) deliveries across tenants, newest first."""
    try:
        status, since, tenant, before = _filters(query)
        after = (parse_instant(before[0]), before[1]) if before else None
    except InvalidInput as error:
        return 400, page(view, "Deliveries", notice("error", str(error)), active="/deliveries")
    rows = list_deliveries(
        view.store,
        status,
        view.now,
        since,
        tenant,
        PAGE_SIZE + 1,
        after,
    )
    more, rows = len(rows) > PAGE_SIZE, rows[:PAGE_SIZE]
    cells = []
    for r in rows:
        action: object = ""
        if view.allow_actions and r.status == "failed":
            action = el(
                "a",
                "Redeliver",
                href=url(f"/deliveries/{r.request_id}/redeliver", {"tenant": r.tenant_id}),
                class_="btn small",
                data_action="redeliver",
            )
        cells.append(
            [
                short_id(r.request_id),
                short_id(r.tenant_id),
                run_link(r.run_id, r.tenant_id),
                r.step_kind,
                join([status_badge(r.status), f" {r.failure_reason}" if r.failure_reason else ""]),
                str(r.attempts),
                r.last_error or "–",
                when(r.settled_at or r.next_attempt_at, view.now),
                action,
            ]
        )
    chips = join(
        el(
            "a",
            name.capitalize(),
            href=url("/deliveries", {**query, "status": name, "after": None}),
            class_="chip active" if name == status else "chip",
        )
        for name in STATUSES
    )
    form = el(
        "form",
        hidden_fields({"status": status}),
        el(
            "label",
            el("span", "Within"),
            el(
                "input",
                type="text",
                name="since",
                value=query.get("since", ""),
                placeholder="P1D",
                size=6,
            ),
        ),
        el(
            "label",
            el("span", "Tenant"),
            el(
                "input",
                type="text",
                name="tenant",
                value=query.get("tenant", ""),
                placeholder="any tenant (UUID)",
                size=20,
            ),
        ),
        el("div", el("button", "Apply", type="submit", class_="btn primary"), class_="buttons"),
        method="get",
        action="/deliveries",
        class_="filters",
    )
    done = _DONE.get(query.get("done", ""))
    pager = (
        el(
            "a",
            "Next page →",
            href=url("/deliveries", {**query, "after": _cursor(rows[-1])}),
            class_="btn",
        )
        if more and rows
        else ""
    )
    body = join(
        [
            notice(done[0], done[1]) if done else "",
            el("h1", "Deliveries"),
            el(
                "p",
                "Mail and webhooks that no run waits for are delivered by the step dispatcher, "
                "with retries. Failed ones (refused, rejected, out of attempts, or ambiguous: "
                "sent but not known to have arrived) can be sent again with a fresh attempt "
                "budget and the same Idempotency-Key. A delivery a run waits for is a task: "
                "redrive its run instead.",
                class_="lead",
            ),
            el("div", chips, class_="chips"),
            form,
            table(
                [
                    "Request",
                    "Tenant",
                    "Run",
                    "Kind",
                    "Status",
                    "Attempts",
                    "Last error",
                    "When",
                    "",
                ],
                cells,
                f"No {status} deliveries.",
                class_="deliveries",
            ),
            el("nav", pager, class_="pager"),
        ]
    )
    return 200, page(view, "Deliveries", body, active="/deliveries")


def _row(view: View, request_id: str, tenant: str | None) -> OutboxRow:
    if not tenant:
        raise InvalidInput("tenant is required")
    row = view.store.outbox.get(_uuid(tenant, "tenant"), _uuid(request_id, "request id"))
    if row is None:
        raise InvalidInput(f"no delivery {request_id} for tenant {tenant}")
    return row


def confirm_redelivery(view: View, request_id: str, tenant: str | None) -> tuple[int, str]:
    """The confirmation step of a redelivery."""
    try:
        row = _row(view, request_id, tenant)
    except InvalidInput as error:
        return 404, page(view, "Redeliver", notice("error", str(error)), active="/deliveries")
    title = "Deliver this again?"
    back = url("/deliveries")
    if row.status != "failed":
        body = join(
            [
                el("h1", title),
                notice(
                    "warning", f"The delivery is {row.status}: only failed ones are sent again."
                ),
                el("p", el("a", "← deliveries", href=back)),
            ]
        )
        return 409, page(view, title, body, active="/deliveries")
    form = el(
        "form",
        hidden_fields({"csrf": view.csrf, "tenant": row.tenant_id}),
        el(
            "label",
            el("span", "Reason (recorded on the run's stream with your name)"),
            el("textarea", "", name="reason", rows="2", maxlength="500"),
        ),
        el(
            "div",
            el("button", "Redeliver", type="submit", class_="btn primary", id="confirm"),
            el("a", "Back", href=back, class_="btn"),
            class_="buttons",
        ),
        method="post",
        action=f"/deliveries/{row.request_id}/redeliver",
        class_="confirm",
    )
    body = join(
        [
            el("h1", title),
            el(
                "p",
                el("strong", row.step_kind),
                " ",
                el("code", row.request_id),
                " of run ",
                run_link(row.run_id, row.tenant_id, full=True),
                " (tenant ",
                el("code", row.tenant_id),
                ")",
            ),
            el(
                "p",
                f"It failed after {row.attempts} attempt(s)"
                + (f" ({row.failure_reason})" if row.failure_reason else "")
                + (f": {row.last_error}." if row.last_error else "."),
            ),
            el(
                "p",
                "It is requested again with a fresh attempt budget and the same "
                "Idempotency-Key, so a webhook receiver that did get it can drop the repeat; "
                "a mail may arrive twice.",
            ),
            form,
        ]
    )
    return 200, page(view, title, body, active="/deliveries")


def redeliver_now(view: View, request_id: str, form: Mapping[str, str]) -> tuple[int, str, str]:
    """Carry out a confirmed redelivery; (status, location to redirect to, page on refusal)."""
    try:
        row = _row(view, request_id, form.get("tenant"))
        operator = Operator(operator_name(), (form.get("reason") or "").strip()[:500] or None)
        redeliver_as_operator(view.store, row.tenant_id, row.request_id, view.now, operator)
    except (InvalidInput, RedeliveryRefused) as error:
        body = join(
            [
                el("h1", "Redelivery refused"),
                notice("error", str(error)),
                el("p", "Nothing was written. ", el("a", "← deliveries", href="/deliveries")),
            ]
        )
        return 409, "", page(view, "Redelivery refused", body, active="/deliveries")
    with contextlib.suppress(RoutingError):
        catch_up_local(view.store, view.registry, None, view.template)
    return 303, url("/deliveries", {"done": "redelivered"}), ""
