"""Workload 8: a long run — `for_each` over 1,000 items with a one-second wait in each.

One run suspends 1,000 times. Each resume is timed (claim, load, pass, append, commit)
and the bytes each pass appends to the stream are measured, so growth with the run's
length shows as the ratio between the resumes around suspension 1,000 and those around
suspension 10. Release 0.1 copied every result and every consumed event id onto each
suspension and folded the whole stream on every resume (a ratio of 16 was measured for
the durable-tasks issue). The naive part of that — loading and folding the whole stream —
is timed here too at both points, beside the resume that no longer does it.

The two points are measured side by side, one resume of each in turn: a second run of
the same workflow is driven to suspension 10 and the long run to suspension 1,000 - WINDOW,
then WINDOW resumes of each alternate (and WINDOW full loads of each). A stall of the
machine (autovacuum, a checkpoint, another process) then lands on both points alike;
measured one after the other, a stall inside one point's ~100 ms window flipped the ratio
(1.71 in one run of three, with the run's total resume time unchanged).
"""

from __future__ import annotations

import statistics
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from workflow_runner import DomainEvent, WorkflowRegistry, define_workflow, on_event
from workflow_runner.engine.ingest import ingest_domain_event
from workflow_runner.engine.resume import resume_run
from workflow_runner.store import Store, connect
from workflow_runner.stream import fold_run

from .common import TENANT

START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
WINDOW = 50  # resumes whose median stands for each measuring point
EARLY = 10  # the early point: suspension 10 (the first few also warm caches up)


def _registry() -> WorkflowRegistry:
    registry = WorkflowRegistry()
    registry.register(
        define_workflow(
            name="bench-long",
            trigger=on_event("bench.long"),
            idempotency_key=lambda event: event.payload["id"],
            steps=lambda s: [
                s.for_each(
                    over=lambda ctx: list(range(ctx.event.payload["items"])),
                    as_="item",
                    do=[
                        s.compute(
                            "last", lambda ctx: {"item": ctx.scope["item"], "note": "x" * 100}
                        ),
                        s.wait(for_="PT1S"),
                    ],
                ),
                s.return_(lambda ctx: {"isSuccess": True, "last": ctx.steps["last"]["item"]}),
            ],
            register=False,
        )
    )
    return registry


def run(url: str, items: int = 1000, label: str = "long") -> dict[str, Any]:
    """Drive one run through `items` suspensions and a second one to suspension 10;
    resume times at both points (interleaved) and bytes per pass. `label` names the
    two runs (`<label>-1`, `<label>-2`)."""
    registry = _registry()
    store = connect(url)
    meter = psycopg.connect(url, autocommit=True)
    try:
        long_id = _start(store, registry, f"{label}-1", items)
        short_id = _start(store, registry, f"{label}-2", items)
        long_now = short_now = START
        first, version = _appended(meter, long_id, 0)
        pass_bytes = [first]
        resume_ms: list[float] = []

        def resume_long() -> Any:
            nonlocal long_now, version
            long_now += timedelta(seconds=1)
            result, took = _timed_resume(store, long_id, long_now, registry)
            resume_ms.append(took)
            appended, version = _appended(meter, long_id, version)
            pass_bytes.append(appended)
            return result

        def resume_short() -> float:
            nonlocal short_now
            short_now += timedelta(seconds=1)
            return _timed_resume(store, short_id, short_now, registry)[1]

        for _ in range(EARLY):
            resume_short()
        while len(resume_ms) < items - WINDOW - 1:
            resume_long()
        early: list[float] = []
        early_naive: list[float] = []
        late_naive: list[float] = []
        for i in range(WINDOW):  # the two points in turn, each first every other time
            if i % 2:
                resume_long()
            early.append(resume_short())
            if not i % 2:
                resume_long()
        for _ in range(WINDOW):  # apart: the full loads' garbage would tax the resumes
            early_naive.append(_full_load_ms(store, short_id))
            late_naive.append(_full_load_ms(store, long_id))
        result = resume_long()  # the last suspension: the run completes
        if result.outcome != "completed":
            raise RuntimeError(f"long run ended {result.outcome}, not completed")
        total_events = version
        total_bytes = _appended(meter, long_id, 0)[0]
    finally:
        store.close()
        meter.close()
    late = resume_ms[items - WINDOW - 1 : items - 1]
    # Bytes: the long run's own passes around suspension 10 and before its end.
    early_bytes = pass_bytes[EARLY : EARLY + WINDOW]
    late_bytes = pass_bytes[items - WINDOW - 1 : items - 1]
    return {
        "items": items,
        "window": WINDOW,
        "resume_ms_at_10": round(statistics.median(early), 3),
        "resume_ms_at_1000": round(statistics.median(late), 3),
        "resume_ratio_1000_vs_10": round(statistics.median(late) / statistics.median(early), 2),
        "bytes_per_suspension_at_10": round(statistics.fmean(early_bytes), 1),
        "bytes_per_suspension_at_1000": round(statistics.fmean(late_bytes), 1),
        "bytes_per_suspension_ratio_1000_vs_10": round(
            statistics.fmean(late_bytes) / statistics.fmean(early_bytes), 3
        ),
        "events": total_events,
        "stream_bytes": total_bytes,
        "resumes_total_s": round(sum(resume_ms) / 1000, 2),
        "naive_full_load_ms_at_10": round(statistics.median(early_naive), 3),
        "naive_full_load_ms_at_1000": round(statistics.median(late_naive), 3),
        "naive_full_load_ratio_1000_vs_10": round(
            statistics.median(late_naive) / statistics.median(early_naive), 2
        ),
    }


def _start(store: Store, registry: WorkflowRegistry, id: str, items: int) -> str:
    """Start a run of `items` items at START; its run id."""
    event = DomainEvent(
        id=id,
        type="bench.long",
        payload={"id": id, "items": items},
        tenant_id=TENANT,
        source="bench",
    )
    (outcome,) = ingest_domain_event(store, event, START, registry).started
    return outcome.run_id


def _timed_resume(
    store: Store, run_id: str, now: datetime, registry: WorkflowRegistry
) -> tuple[Any, float]:
    """Resume the run at `now`: its result and the milliseconds it took."""
    began = time.perf_counter()
    result = resume_run(store, TENANT, run_id, 0, now, registry=registry)
    return result, (time.perf_counter() - began) * 1000


def _full_load_ms(store: Store, run_id: str) -> float:
    """Load and fold the whole stream, as a resume did before results were stored once."""
    began = time.perf_counter()
    events, _ = store.streams.load_run(TENANT, run_id)
    fold_run(run_id, TENANT, [e.recorded for e in events])
    return (time.perf_counter() - began) * 1000


def _appended(conn: psycopg.Connection[Any], run_id: str, after: int) -> tuple[int, int]:
    """(JSON bytes of the run's events after version `after`, the stream's version)."""
    row = conn.execute(
        "SELECT coalesce(sum(octet_length(payload::text)), 0), coalesce(max(version), %s)"
        " FROM wf_events WHERE tenant_id = %s AND stream_id = %s AND version > %s",
        (after, TENANT, run_id, after),
    ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])
