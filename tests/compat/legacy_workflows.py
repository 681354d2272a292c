"""Workflows whose runs were recorded by release 0.1.0 (commit b76f570) into
`streams_0_1.json`. Their source is part of each definition's fingerprint: do not
edit a line here, or the recorded runs fail with `workflow_definition_changed`, which
is exactly what the compatibility test is meant to catch."""

from __future__ import annotations

from typing import Any

from workflow_runner import define_workflow, on_cron, on_event


def _flaky(ctx: Any) -> int:
    if ctx.workflow.retry_attempt == 1:
        raise RuntimeError("first attempt fails")
    return int(ctx.workflow.retry_attempt)


def legacy_workflows() -> list[Any]:
    """Every legacy definition (not registered anywhere)."""
    return [
        define_workflow(
            name="legacy-wait",
            trigger=on_event("legacy.wait"),
            idempotency_key=lambda e: e.payload["key"],
            steps=lambda s: [
                s.compute("first", lambda ctx: {"n": ctx.event.payload["n"]}),
                s.wait(for_="PT1H"),
                s.compute("second", lambda ctx: ctx.steps["first"]["n"] + 1),
                s.return_(lambda ctx: {"isSuccess": True, "total": ctx.steps["second"]}),
            ],
            register=False,
        ),
        define_workflow(
            name="legacy-event",
            trigger=on_event("legacy.order"),
            idempotency_key=lambda e: e.payload["orderId"],
            awaits={"approved": "legacy.approved"},
            steps=lambda s: [
                s.mail_send(to="buyer@example.com", subject="received", body="thanks"),
                s.wait_for_event(
                    event="approved",
                    match=lambda ctx: {
                        "version": 1,
                        "expr": {
                            "kind": "atom",
                            "path": ["orderId"],
                            "op": {"kind": "eq", "value": ctx.event.payload["orderId"]},
                        },
                    },
                    timeout="P3D",
                    result_key="approval",
                ),
                s.branch(
                    if_=lambda ctx: ctx.steps["approval"] is not None,
                    on_true=[
                        s.webhook_send(
                            url="https://hooks.example.com/ok",
                            body=lambda ctx: {"by": ctx.steps["approval"]["by"]},
                        ),
                        s.return_({"isSuccess": True}),
                    ],
                    on_false=[s.return_({"isSuccess": False})],
                ),
            ],
            register=False,
        ),
        define_workflow(
            name="legacy-retry",
            trigger=on_event("legacy.retry"),
            idempotency_key=lambda e: e.payload["key"],
            steps=lambda s: [
                s.retry(times=3, backoff="fixed", base="PT30S", do=[s.compute("gate", _flaky)]),
                s.return_(lambda ctx: {"isSuccess": True, "attempt": ctx.steps["gate"]}),
            ],
            register=False,
        ),
        define_workflow(
            name="legacy-loop",
            trigger=on_event("legacy.loop"),
            idempotency_key=lambda e: e.payload["key"],
            steps=lambda s: [
                s.for_each(
                    over=lambda ctx: ctx.event.payload["items"],
                    as_="item",
                    do=[
                        s.compute("seen", lambda ctx: ctx.scope["item"]),
                        s.wait(for_="PT10M"),
                    ],
                ),
                s.return_(lambda ctx: {"isSuccess": True, "last": ctx.steps["seen"]}),
            ],
            register=False,
        ),
        define_workflow(
            name="legacy-fail",
            trigger=on_event("legacy.fail"),
            idempotency_key=lambda e: e.payload["key"],
            steps=lambda s: [
                s.wait(for_="PT5M"),
                s.compute("boom", lambda ctx: ctx.event.payload["missing"]),
            ],
            register=False,
        ),
        define_workflow(
            name="legacy-cron",
            trigger=on_cron("0 6 * * *"),
            steps=lambda s: [
                s.wait(for_="PT1M"),
                s.return_(lambda ctx: {"at": ctx.event.payload["scheduledAt"]}),
            ],
            register=False,
        ),
    ]
