"""Workload 1: step -> wait 1 s -> step, N runs started at once, end to end.

Ours: N trigger events are handed to the in-process pipeline at once; each run is
ingested (TriggerProjection's engine call), projected into the pending set, found by
the due scan when its second has come, and resumed to completion by a worker.
Latency per run: from just before its ingest call to just after the resume that
completed it returned (committed). The peer's side is `bench.dbos_peer`.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from workflow_runner import DomainEvent

from .common import TENANT, bench_registry, summary
from .harness import Pipeline, wait_until


def run_ours(url: str, n: int, workers: int, timeout: float = 600.0) -> dict[str, Any]:
    """Run N sleep workflows through the pipeline; throughput and latency figures."""
    registry = bench_registry()
    lock = threading.Lock()
    started: dict[str, float] = {}
    completed: dict[str, float] = {}

    def on_ingested(event: DomainEvent, result: Any, began: float, _done: float) -> None:
        for outcome in result.started:
            with lock:
                started[outcome.run_id] = began

    def on_resumed(request: Any, result: Any, committed: float) -> None:
        if result.outcome == "completed":
            with lock:
                completed[request.run_id] = committed

    events = [
        DomainEvent(
            id=f"sleep-{i}",
            type="bench.sleep",
            payload={"id": f"s{i}", "n": i},
            tenant_id=TENANT,
            source="bench",
        )
        for i in range(n)
    ]
    with Pipeline(
        url,
        registry,
        workers=workers,
        scan_interval=0.05,
        on_resumed=on_resumed,
        on_ingested=on_ingested,
    ) as pipeline:
        t0 = time.time()
        for event in events:
            pipeline.ingest(event)
        finished = wait_until(lambda: len(completed) >= n, timeout, poll=0.02)
        stats = pipeline.stats
    if not finished or stats.errors:
        raise RuntimeError(
            f"sleep workflow (ours): {len(completed)}/{n} completed; errors: {stats.errors[:3]}"
        )
    latencies = [completed[r] - started[r] for r in completed]
    makespan = max(completed.values()) - t0
    return {
        "n": n,
        "workers": workers,
        "completed": len(completed),
        "makespan_s": round(makespan, 3),
        "runs_per_s": round(n / makespan, 1),
        "latency_s": summary(latencies),
        "resume_outcomes": dict(stats.outcomes),
        "scans": stats.scans,
    }
