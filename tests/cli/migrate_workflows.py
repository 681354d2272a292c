"""Workflows for the `wfr runs migrate` tests, loaded through WORKFLOW_MODULES: version 1
of `checkout` is gone from the code (the tests start runs on it by hand), version 2
inserted a step before its wait, version 3 replaced the wait by a timer. Nothing is
registered on import: the tests put versions 2 and 3 in the default registry (which the
command's WORKFLOW_MODULES loading returns) for their own duration only, so that other
tests of the process (doctor's template check) never see them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from workflow_runner import Event, Steps, define_workflow, on_event
from workflow_runner.definition import WorkflowDefinition


def checkout(version: int, steps: Callable[[Any], list[Any]]) -> WorkflowDefinition:
    return define_workflow(
        name="checkout",
        version=version,
        trigger=on_event("checkout.started"),
        idempotency_key=Event.payload["id"],
        awaits={"paid": "checkout.paid"},
        steps=steps,
        register=False,
    )


V1 = checkout(
    1,
    lambda s: [
        s.wait_for_event("paid", timeout="P7D", result_key="payment"),
        s.return_({"v": 1, "payment": Steps["payment"]}),
    ],
)
V2 = checkout(
    2,
    lambda s: [
        s.compute("plan", lambda ctx: "pro"),
        s.wait_for_event("paid", timeout="P7D", result_key="payment"),
        s.return_({"v": 2, "payment": Steps["payment"]}),
    ],
)
V3 = checkout(
    3,
    lambda s: [
        s.compute("plan", lambda ctx: "pro"),
        s.wait(for_="P1D"),
        s.return_({"v": 3}),
    ],
)
