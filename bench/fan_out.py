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
from dataclasses import dataclass
from typing import Any

from workflow_runner import DomainEvent, WorkflowRegistry, define_workflow, on_call, on_event

from .common import TENANT
from .harness import Pipeline, PipelineStats, task_ports, wait_until


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


@dataclass(frozen=True)
class Joined:
    """One parent's map, end to end: the parent's run id, when its trigger went in
    (`t0`) and when it ended (`ended_at`, how: `outcome`), the children that resumed
    after their first pass and when the last of them completed, and what the pipeline
    did."""

    run_id: str
    t0: float
    ended_at: float
    outcome: str
    child_resumes: int
    last_child_at: float
    stats: PipelineStats

    @property
    def makespan_s(self) -> float:
        return self.ended_at - self.t0


def join_parent(
    url: str,
    reg: WorkflowRegistry,
    event: DomainEvent,
    workers: int,
    timeout: float = 900.0,
    task_workers: int = 0,
) -> Joined:
    """Ingest the event that starts one mapping parent, run the pipeline with its child
    starter until the parent completes or fails, and time it. `task_workers`: task
    workers beside it (StepDispatcher invocations at once), for a parent whose steps
    run tasks."""
    ended: dict[str, Any] = {}
    last_child = {"at": 0.0, "count": 0}
    parent_id = {"id": ""}

    def on_resumed(request: Any, result: Any, committed: float) -> None:
        if result.outcome not in ("completed", "failed"):
            return
        if request.run_id == parent_id["id"]:
            ended.update(at=committed, outcome=result.outcome)
        elif result.outcome == "completed":
            last_child["count"] += 1
            last_child["at"] = max(last_child["at"], committed)

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
        task_ports=task_ports(reg) if task_workers else None,
        task_workers=task_workers,
    ) as pipeline:
        t0 = time.time()
        pipeline.ingest(event)
        finished = wait_until(lambda: "at" in ended, timeout, poll=0.02)
        stats = pipeline.stats
    if not finished or stats.errors:
        raise RuntimeError(
            f"{event.type}: {last_child['count']} children resumed, parent ended: {finished};"
            f" errors: {stats.errors[:3]}"
        )
    return Joined(
        parent_id["id"],
        t0,
        ended["at"],
        ended["outcome"],
        last_child["count"],
        last_child["at"],
        stats,
    )


def run(
    url: str, n: int, workers: int, timeout: float = 900.0, step_child: bool = False
) -> dict[str, Any]:
    """Fan out to N children and join them; makespan and rates."""
    event = DomainEvent(
        id="fan-1", type="bench.fan", payload={"id": "f1", "n": n}, tenant_id=TENANT, source="bench"
    )
    joined = join_parent(url, registry(step_child), event, workers, timeout)
    if joined.outcome != "completed":
        raise RuntimeError(f"fan-out: the parent {joined.outcome}")
    return {
        "n": n,
        "workers": workers,
        "makespan_s": round(joined.makespan_s, 3),
        "children_per_s": round(n / joined.makespan_s, 1),
        "child_resumes": joined.child_resumes,
        # One-step children complete as they start (no resume): no join time to cut.
        "join_s": (
            round(joined.ended_at - joined.last_child_at, 3) if joined.child_resumes else None
        ),
        "children_started": joined.stats.children_started,
        "resume_outcomes": dict(joined.stats.outcomes),
    }
