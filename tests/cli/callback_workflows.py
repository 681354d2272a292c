"""A workflow for the `wfr callbacks` tests, loaded through WORKFLOW_MODULES: a mail
carries the callback link, the run waits for the answer and returns it."""

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
