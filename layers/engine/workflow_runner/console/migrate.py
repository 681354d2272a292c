"""The console's "Migrate waiting runs to vN" (engine/run_migration.py): a confirmation
page that shows the dry run (what would move, what would be refused and why, what else
differs), then the migration itself, recorded on each run's stream with who asked.

`/workflows/W/migrate?to=N[&tenant=T][&map=2=3 4.true.1=5.true.1]` shows the dry run
(read-only consoles included: it writes nothing); the form on it posts to the same
address with the CSRF token, which only a console started with actions has.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from urllib.parse import quote

from ..engine.operator_actions import Operator
from ..engine.run_migration import MigrationReport, MigrationRequest, migrate_runs
from ..engine.step_mapping import parse_mapping
from ..errors import InvalidInput
from ..local.routes import RoutingError
from ..local.runtime import catch_up_local
from ..step_paths import describe_path
from .actions import operator_name
from .html import Markup, el, join, url
from .layout import View, hidden_fields, notice, page, run_link, short_id, table, tenant_param

SHOWN = 200  # runs listed on a page (the summary counts them all)
_OUTCOMES = {
    "would-move": ("would move", "status-running"),
    "moved": ("moved", "status-completed"),
    "refused": ("refused", "status-failed"),
    "lost": ("lost its race", "status-cancelled"),
}


def migrate_path(workflow: str) -> str:
    return f"/workflows/{quote(workflow, safe='')}/migrate"


def migrate_links(view: View, workflow: str, tenant: str | None, but: int | None = None) -> Markup:
    """A "Migrate waiting runs to vN" button for each registered version of the workflow
    (on the runs page filtered by it, and on a waiting run's page: `but` its own)."""
    versions = sorted(d.version for d in view.registry if d.name == workflow)
    versions = [v for v in versions if v != but]
    if not view.allow_actions or not versions:
        return Markup("")
    return el(
        "div",
        join(
            el(
                "a",
                f"Migrate waiting runs to v{version}",
                href=url(migrate_path(workflow), {"to": version, "tenant": tenant}),
                class_="btn",
                data_action="migrate",
            )
            for version in versions
        ),
        class_="actions",
    )


def _request(workflow: str, values: Mapping[str, str], dry_run: bool) -> MigrationRequest:
    """The migration a query string or form asks for.

    Raises:
        InvalidInput: a malformed version, tenant or mapping (named in the message).
    """
    to = (values.get("to") or "").strip()
    if not to.isdigit():
        raise InvalidInput(f"the version to migrate to must be a number, got {to!r}")
    return MigrationRequest(
        workflow=workflow,
        to_version=int(to),
        tenant_id=tenant_param(values.get("tenant")),
        mapping=parse_mapping((values.get("map") or "").replace(",", " ").split()),
        dry_run=dry_run,
    )


def _form(view: View, workflow: str, values: Mapping[str, str]) -> Markup:
    """Which version, tenant and mapping to look at (a GET: it shows the dry run)."""
    versions = sorted(d.version for d in view.registry if d.name == workflow)
    return el(
        "form",
        el(
            "label",
            el("span", "To version"),
            el(
                "select",
                join(
                    el("option", f"v{v}", value=v, selected=str(v) == values.get("to"))
                    for v in versions
                ),
                name="to",
            ),
        ),
        el(
            "label",
            el("span", "Tenant"),
            el("input", type="text", name="tenant", value=values.get("tenant", ""), size=20),
        ),
        el(
            "label",
            el("span", "Mapping (FROM=TO, space-separated)"),
            el("input", type="text", name="map", value=values.get("map", ""), placeholder="0=1"),
        ),
        el(
            "div",
            el("button", "Show what would move", type="submit", class_="btn"),
            class_="buttons",
        ),
        method="get",
        action=migrate_path(workflow),
        class_="filters",
    )


def _report(report: MigrationReport, headline: bool = True) -> Markup:
    rows = [
        [
            run_link(m.run_id, m.tenant_id),
            short_id(m.tenant_id),
            f"v{m.from_version} {m.waiting}" if m.from_version is not None else m.waiting,
            describe_path(m.to_path),
            el("span", _OUTCOMES[m.outcome][0], class_=f"badge {_OUTCOMES[m.outcome][1]}"),
            m.why or "",
        ]
        for m in report.moves[:SHOWN]
    ]
    more = len(report.moves) - SHOWN
    listed = report.differences()
    return join(
        [
            el("p", el("strong", report.summary())) if headline else "",
            table(
                ["Run", "Tenant", "Waits at", "Goes to", "Outcome", "Why"],
                rows,
                "No waiting run of this workflow is on another version.",
                id="migration",
            ),
            el("p", f"… and {more} more (wfr runs migrate --json lists all)") if more > 0 else "",
            el("h2", f"What else differs from v{report.to_version}") if listed else "",
            el(
                "ul",
                join(
                    el("li", f"{where} ({count} run(s)): {text}") for where, count, text in listed
                ),
            )
            if listed
            else "",
        ]
    )


def confirm_page(view: View, workflow: str, query: Mapping[str, str]) -> tuple[int, str]:
    """The dry run, and (actions enabled, something would move) the form that does it."""
    title = f"Migrate waiting runs of {workflow}"
    head = [el("h1", title), _form(view, workflow, query)]
    if not query.get("to"):
        return 200, page(view, title, join(head), active="/")
    try:
        request = _request(workflow, query, dry_run=True)
        report = migrate_runs(view.store, view.registry, request, view.now, Operator("console"))
    except InvalidInput as error:
        return 400, page(view, title, join([*head, notice("error", str(error))]), active="/")
    movable = len(report.with_outcome("would-move"))
    fields = {
        "csrf": view.csrf,
        "to": report.to_version,
        "tenant": request.tenant_id,
        "map": " ".join(request.mapping.entries()),
    }
    form = el(
        "form",
        hidden_fields(fields),
        el(
            "label",
            el("span", "Reason (recorded on each run's stream with your name)"),
            el("textarea", "", name="reason", rows="2", maxlength="500"),
        ),
        el(
            "div",
            el(
                "button",
                f"Migrate {movable} run(s) to v{report.to_version}",
                type="submit",
                class_="btn primary",
                id="confirm",
            ),
            class_="buttons",
        ),
        method="post",
        action=migrate_path(workflow),
        class_="confirm",
    )
    explanation = el(
        "p",
        "Each run that would move goes on at its place in the new version; what it already "
        "received (a matched event, a task's outcome, a callback's answer) stays. Runs "
        "refused are left as they are. A run that moves on meanwhile is not migrated.",
    )
    if not view.allow_actions:
        action: Markup = el("p", "Read-only: start the console with --allow-actions to migrate.")
    elif movable:
        action = form
    else:
        action = notice("warning", "No run would move.")
    body = join([*head, el("h2", "Dry run"), _report(report), explanation, action])
    return 200, page(view, title, body, active="/")


def perform(view: View, workflow: str, form: Mapping[str, str]) -> tuple[int, str]:
    """Migrate as confirmed; the page says what happened to each run."""
    title = f"Migrated waiting runs of {workflow}"
    try:
        request = _request(workflow, form, dry_run=False)
        operator = Operator(operator_name(), (form.get("reason") or "").strip()[:500] or None)
        report = migrate_runs(view.store, view.registry, request, view.now, operator)
    except InvalidInput as error:
        return 400, page(view, title, join([el("h1", title), notice("error", str(error))]))
    if report.with_outcome("moved"):
        with contextlib.suppress(RoutingError):
            catch_up_local(view.store, view.registry, None, view.template)
    kind = "ok" if report.complete else "warning"
    body = join([el("h1", title), notice(kind, report.summary()), _report(report, False)])
    return 200, page(view, title, body, active="/")
