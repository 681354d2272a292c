"""A workflow for the on-call tests, loaded through WORKFLOW_MODULES: its step fails
until the module's switch is flipped, outside any retry."""

from __future__ import annotations

from workflow_runner import StepContext, define_workflow, on_event

BROKEN = {"yes": True}


def call_partner(ctx: StepContext) -> dict[str, bool]:
    if BROKEN["yes"]:
        raise ConnectionError("partner down")
    return {"ok": True}


always_failing = define_workflow(
    name="oncall-partner-call",
    trigger=on_event("oncall.partner-requested"),
    steps=lambda s: [s.compute("partner", call_partner), s.return_({"isSuccess": True})],
)
