from my_app import exports
from workflow_runner import Continue, Done, Event, define_workflow, on_event


def export_ready(ctx, state):
    """Ask the report service once: Done with the link, or Continue with one more check."""
    status = exports.status(ctx.event.payload["exportId"])
    if status["state"] == "failed":
        raise RuntimeError("the export failed")  # fails the step: condition_check_failed
    if status["state"] == "done":
        return Done({"url": status["url"], "checks": state["checks"] + 1})
    return Continue({"checks": state["checks"] + 1})


export_report = define_workflow(
    name="export-report",
    trigger=on_event("export.requested"),
    idempotency_key=Event.payload["exportId"],
    steps=lambda s: [
        s.wait_for_condition(
            "export",
            export_ready,
            initial={"checks": 0},
            every="PT1M",
            backoff="exponential",
            cap="PT10M",
            timeout="PT6H",
            catch=True,
        ),
        s.branch(
            if_=lambda ctx: not ctx.steps["export"].get("failed"),
            on_true=[
                s.mail_send(
                    to=Event.payload["email"],
                    subject="Your export is ready",
                    body=lambda ctx: ctx.steps["export"]["url"],
                )
            ],
            on_false=[s.return_({"isSuccess": False, "export": "failed or too slow"})],
        ),
    ],
)
