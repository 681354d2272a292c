"""The console's actions on a run: a confirmation page, then the action itself.

Each action is the engine's (`engine.operator_actions`): it records who asked on the
run's stream, in the transaction of the operation that does the work.
"""

from __future__ import annotations

import contextlib
import getpass
import socket
from collections.abc import Mapping
from typing import Any

from ..engine.operator_actions import (
    ActionResult,
    Operator,
    cancel_as_operator,
    redrive_as_operator,
    resume_as_operator,
)
from ..engine.redrive import RedriveRefused
from ..local.kept import kept_code_of
from ..local.routes import RoutingError
from ..local.runtime import catch_up_local
from ..store import RunSummary
from ..stream import fold_run
from .html import Markup, el, join, url
from .layout import View, hidden_fields, notice, page, status_badge

ACTIONS = ("cancel", "resume", "redrive")
EXPLAIN = {
    "cancel": (
        "Cancel this run?",
        "The run ends as cancelled and never resumes; its pending row goes away. Mail and "
        "webhooks it already requested are still delivered.",
        "Cancel run",
    ),
    "resume": (
        "Resume this run now?",
        "The run's open suspension is resumed now, before its time if need be (a wait ends "
        "early; a wait for an event ends as if it had timed out), and the run goes on to "
        "its next suspension or its end.",
        "Resume now",
    ),
    "redrive": (
        "Redrive this failed run?",
        "The failed pass runs again from where it entered the step tree, on the current "
        "definition; mail and webhooks it already requested keep their ids and are not "
        "sent twice. A retry that ran out of attempts gets a fresh budget.",
        "Redrive",
    ),
}
DONE = {
    ("cancel", "cancelled"): ("ok", "The run was cancelled."),
    ("cancel", "already-cancelled"): ("warning", "The run was already cancelled."),
    ("cancel", "already-settled"): ("warning", "The run had already ended; nothing to cancel."),
    ("resume", "suspended"): ("ok", "The run was resumed and waits again."),
    ("resume", "completed"): ("ok", "The run was resumed and completed."),
    ("resume", "failed"): ("error", "The run was resumed and failed."),
    ("resume", "already-resumed"): ("warning", "Nothing to resume: the run was not waiting."),
    ("resume", "not-due"): ("warning", "The run was not due; nothing was resumed."),
    ("resume", "on-kept-version"): (
        "warning",
        "The run's definition runs on a kept function version; nothing was resumed here "
        "(the deployed ResumeRun hands the run to that version).",
    ),
    ("redrive", "suspended"): ("ok", "The run was redriven and waits again."),
    ("redrive", "completed"): ("ok", "The run was redriven and completed."),
    ("redrive", "failed"): ("error", "The run was redriven and failed again."),
}


def applicable(action: str, status: str) -> bool:
    """Whether an action makes sense for a run with this status."""
    if action == "cancel":
        return status in ("running", "waiting")
    if action == "resume":
        return status == "waiting"
    return action == "redrive" and status == "failed"


def confirm_page(view: View, run: RunSummary, action: str) -> tuple[int, str]:
    """The confirmation step of an action (a form that posts with the CSRF token)."""
    state = fold_run(
        run.run_id,
        run.tenant_id,
        [e.recorded for e in view.store.streams.load(run.tenant_id, run.run_id)],
    )
    title, explanation, button = EXPLAIN[action]
    back = url(f"/runs/{run.run_id}", {"tenant": run.tenant_id})
    if not applicable(action, str(state.status)):
        body = join(
            [
                el("h1", title),
                notice("warning", f"The run is {state.status}: {action} does not apply."),
                el("p", el("a", "← back to the run", href=back)),
            ]
        )
        return 409, page(view, title, body, active="/")
    step = state.suspension.step_index if state.suspension is not None else None
    where = f" It waits at step {step}." if step is not None else ""
    form = el(
        "form",
        hidden_fields({"csrf": view.csrf, "tenant": run.tenant_id, "step": step}),
        el(
            "label",
            el("span", "Reason (recorded on the run's stream with your name)"),
            el("textarea", "", name="reason", rows="2", maxlength="500"),
        ),
        el(
            "div",
            el(
                "button",
                button,
                type="submit",
                class_="btn danger" if action == "cancel" else "btn primary",
                id="confirm",
            ),
            el("a", "Back", href=back, class_="btn"),
            class_="buttons",
        ),
        method="post",
        action=f"/runs/{run.run_id}/{action}",
        class_="confirm",
    )
    body = join(
        [
            el("h1", title),
            el(
                "p",
                el("strong", run.workflow_name),
                " ",
                status_badge(str(state.status)),
                " ",
                el("code", run.run_id),
                " (tenant ",
                el("code", run.tenant_id),
                ")",
            ),
            el("p", explanation + where),
            form,
        ]
    )
    return 200, page(view, title, body, active="/")


def operator_name() -> str:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"console ({user}@{socket.gethostname()})"


def perform(
    view: View, run: RunSummary, action: str, form: Mapping[str, str]
) -> tuple[int, str, str]:
    """Carry out a confirmed action; (status, location to redirect to, page on refusal)."""
    operator = Operator(operator_name(), (form.get("reason") or "").strip()[:500] or None)
    step_raw = form.get("step") or ""
    step = int(step_raw) if step_raw.isdigit() else None
    result: ActionResult[Any]
    try:
        if action == "cancel":
            result = cancel_as_operator(view.store, run.tenant_id, run.run_id, view.now, operator)
        elif action == "resume":
            result = resume_as_operator(
                view.store,
                run.tenant_id,
                run.run_id,
                view.now,
                operator,
                view.registry,
                step_index=step,
                force=True,
                hosts=kept_code_of(view.store),
            )
        else:
            result = redrive_as_operator(
                view.store, run.tenant_id, run.run_id, view.now, operator, view.registry
            )
    except RedriveRefused as error:
        back = url(f"/runs/{run.run_id}", {"tenant": run.tenant_id})
        body = join(
            [
                el("h1", "Redrive refused"),
                notice("error", str(error)),
                el("p", "Nothing was written. ", el("a", "← back to the run", href=back)),
            ]
        )
        return 409, "", page(view, "Redrive refused", body, active="/")
    if result.happened:
        # Without a template the local functions cannot be loaded; on Aurora there is no
        # local clock and the functions are nudged in AWS.
        with contextlib.suppress(RoutingError):
            catch_up_local(view.store, view.registry, None, view.template, kept_code_of(view.store))
    outcome = result.result.outcome
    return (
        303,
        url(f"/runs/{run.run_id}", {"tenant": run.tenant_id, "action": action, "outcome": outcome}),
        "",
    )


def action_bar(view: View, run: RunSummary, status: str) -> Markup:
    """The buttons of the actions that apply (each leads to its confirmation)."""
    if not view.allow_actions:
        return el(
            "p",
            "Read-only: start the console with ",
            el("code", "wfr console --allow-actions"),
            " to cancel, resume or redrive.",
            class_="muted small",
        )
    buttons = [
        el(
            "a",
            EXPLAIN[action][2],
            href=url(f"/runs/{run.run_id}/{action}", {"tenant": run.tenant_id}),
            class_="btn danger" if action == "cancel" else "btn primary",
            data_action=action,
        )
        for action in ACTIONS
        if applicable(action, status)
    ]
    if not buttons:
        return el("p", "No action applies to a run that is " + status + ".", class_="muted small")
    return el("div", join(buttons), class_="actions")


def done_notice(query: Mapping[str, str]) -> Markup:
    """What the action a redirect came back from did (nothing for other visits)."""
    done = DONE.get((query.get("action", ""), query.get("outcome", "")))
    return notice(done[0], done[1]) if done else Markup("")
