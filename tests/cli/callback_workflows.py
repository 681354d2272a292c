"""Workflows for the `wfr callbacks` tests, loaded through WORKFLOW_MODULES: a mail
carries the callback link, the run waits for the answer (with heartbeats, in the
second) and returns it."""

from __future__ import annotations

from workflow_runner import Event, define_workflow, on_event

expense_approval = define_workflow(
    name="expense-approval",
    trigger=on_event("expense.filed"),
    idempotency_key=Event.payload["expenseId"],
    steps=lambda s: [
        s.mail_send(
            to="boss@example.com",
            subject="Approve expense?",
            body=lambda ctx: f"Approve or reject: {ctx.callback.url}",
        ),
        s.wait_for_callback("decision", timeout="P3D"),
        s.return_(lambda ctx: ctx.steps["decision"]),
    ],
)

metered_review = define_workflow(
    name="metered-review",
    trigger=on_event("report.filed"),
    idempotency_key=Event.payload["expenseId"],
    steps=lambda s: [
        s.mail_send(
            to="boss@example.com",
            subject="Review the report",
            body=lambda ctx: f"Beat or answer: {ctx.callback.url}",
        ),
        s.wait_for_callback("review", timeout="P1D", heartbeat="PT1H"),
        s.return_(lambda ctx: ctx.steps["review"]),
    ],
)
