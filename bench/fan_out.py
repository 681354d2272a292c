"""Workload 9: fan-out — one run maps N items onto N child runs of the sleep workflow
(step, wait 1 s, step), all allowed at once, and joins their results.

The same pipeline as workload 1 plus the worker's child starter: the parent's pass
records the join, the starter starts children (100 per transaction), each child
suspends, resumes after its second and settles, counting itself in the join; the
last one tells the parent, which resumes with the N results. Measured: the makespan
from the parent's trigger to its completion, children per second, and the join's
share (from the last child settling to the parent's completion). The naive approach
it is compared with is workload 1 run beside it: the same N sleep runs started by N
independent events, no parent.

`run(..., step_child=True)` maps onto children of one step each instead (the
side-by-side fan-out against Absurd's child tasks and DBOS's child workflows): there
the children never wait, so what is measured is starting, running and joining them.
"""

from __future__ import annotations

import time
from typing import Any

from workflow_runner import DomainEvent, WorkflowRegistry, define_workflow, on_call, on_event

from .common import TENANT
from .harness import Pipeline, wait_until


def registry(step_child: bool = False) -> WorkflowRegistry:
    """The fan-out parent over the sleep child, or (`step_child`) over a one-step child."""
    reg = WorkflowRegistry()
    reg.register(
        define_workflow(
            name="bench-step-child",
            trigger=on_call(),
            steps=lambda s: [
                s.compute("work", lambda ctx: ctx.event.payload["i"]),
                s.return_(lambda ctx: ctx.steps["work"]),
            ],
            register=False,
        )
    )
    reg.register(
        define_workflow(
            name="bench-sleep-child",
            trigger=on_call(),
            steps=lambda s: [
                s.compute("first", lambda ctx: {"n": ctx.event.payload["i"]}),
                s.wait(for_="PT1S"),
                s.compute("second", lambda ctx: ctx.steps["first"]["n"] + 1),
                s.return_(lambda ctx: ctx.steps["second"]),
            ],
            register=False,
        )
    )
    reg.register(
        define_workflow(
            name="bench-fan",
            trigger=on_event("bench.fan"),
            idempotency_key=lambda event: event.payload["id"],
            steps=lambda s: [
                s.map(
                    lambda ctx: [{"i": i} for i in range(ctx.event.payload["n"])],
                    workflow="bench-step-child" if step_child else "bench-sleep-child",
                    concurrency=10_000,
                    result_key="all",
                ),
                s.return_(lambda ctx: {"isSuccess": True, "sum": sum(ctx.steps["all"])}),
            ],
            register=False,
        )
    )
    return reg


def run(
    url: str, n: int, workers: int, timeout: float = 900.0, step_child: bool = False
) -> dict[str, Any]:
    """Fan out to N children and join them; makespan and rates."""
    reg = registry(step_child)
    done: dict[str, float] = {}
    last_child = {"at": 0.0, "count": 0}

    def on_resumed(request: Any, result: Any, committed: float) -> None:
        if result.outcome != "completed":
            return
        if request.run_id == parent_id["id"]:
            done["parent"] = committed
        else:
            last_child["count"] += 1
            last_child["at"] = max(last_child["at"], committed)

    parent_id = {"id": ""}

    def on_ingested(event: DomainEvent, result: Any, began: float, _done: float) -> None:
        parent_id["id"] = result.started[0].run_id

    with Pipeline(
        url,
        reg,
        workers=workers,
        scan_interval=0.05,
        on_resumed=on_resumed,
        on_ingested=on_ingested,
        run_starter=True,
    ) as pipeline:
        t0 = time.time()
        pipeline.ingest(
            DomainEvent(
                id="fan-1",
                type="bench.fan",
                payload={"id": "f1", "n": n},
                tenant_id=TENANT,
                source="bench",
            )
        )
        finished = wait_until(lambda: "parent" in done, timeout, poll=0.02)
        stats = pipeline.stats
    if not finished or stats.errors:
        raise RuntimeError(
            f"fan-out: {last_child['count']}/{n} children, parent done: {finished}; "
            f"errors: {stats.errors[:3]}"
        )
    makespan = done["parent"] - t0
    return {
        "n": n,
        "workers": workers,
        "makespan_s": round(makespan, 3),
        "children_per_s": round(n / makespan, 1),
        "child_resumes": last_child["count"],
        # One-step children complete as they start (no resume): no join time to cut.
        "join_s": round(done["parent"] - last_child["at"], 3) if last_child["count"] else None,
        "children_started": stats.children_started,
        "resume_outcomes": dict(stats.outcomes),
    }
