from my_app import signing
from workflow_runner import Event, StepContext, Steps, define_workflow, on_event


def send_for_signature(ctx: StepContext) -> dict[str, str]:
    # A task hands the service one link per signer; each may sign at any time.
    links = {who: str(ctx.callbacks[who].url) for who in ("customer", "counsel")}
    return signing.send(ctx.event.payload["contractId"], links, ctx.workflow.task_key)


contract_signing = define_workflow(
    name="contract-signing",
    trigger=on_event("contract.drafted"),
    idempotency_key=Event.payload["contractId"],
    steps=lambda s: [
        s.create_callback("customer", timeout="P14D"),
        s.create_callback("counsel", timeout="P14D"),
        s.task("send", send_for_signature),
        s.await_callback("counsel", catch=True),
        s.branch(
            if_=lambda ctx: (ctx.steps["counsel"] or {"failed": True}).get("failed"),
            on_true=[s.return_({"isSuccess": False, "counsel": Steps["counsel"]})],
        ),
        s.await_callback("customer", result_key="signature"),
        s.return_({"isSuccess": True, "signature": Steps["signature"]}),
    ],
)
