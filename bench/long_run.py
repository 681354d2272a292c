"""Workload 8: a long run — `for_each` over 1,000 items with a one-second wait in each.

One run suspends 1,000 times. Each resume is timed (claim, load, pass, append, commit)
and the bytes each pass appends to the stream are measured, so growth with the run's
length shows as the ratio between the resumes around suspension 1,000 and those around
suspension 10. Release 0.1 copied every result and every consumed event id onto each
suspension and folded the whole stream on every resume (a ratio of 16 was measured for
the durable-tasks issue). The naive part of that — loading and folding the whole stream —
is timed here too at both points, beside the resume that no longer does it.
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
WINDOW = 20  # resumes whose median stands for each measuring point


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


def run(url: str, items: int = 1000) -> dict[str, Any]:
    """Drive one run through `items` suspensions; resume times and bytes per pass."""
    registry = _registry()
    store = connect(url)
    meter = psycopg.connect(url, autocommit=True)
    try:
        event = DomainEvent(
            id="long-1",
            type="bench.long",
            payload={"id": "long-1", "items": items},
            tenant_id=TENANT,
            source="bench",
        )
        started = ingest_domain_event(store, event, START, registry)
        (outcome,) = started.started
        run_id = outcome.run_id
        now = START
        resume_ms: list[float] = []
        first, version = _appended(meter, run_id, 0)
        pass_bytes = [first]
        naive: list[float] = []
        for step in range(items):
            if step in (WINDOW, items - 1):
                naive += [_full_load_ms(store, run_id) for _ in range(WINDOW)]
            now += timedelta(seconds=1)
            began = time.perf_counter()
            result = resume_run(store, TENANT, run_id, 0, now, registry=registry)
            resume_ms.append((time.perf_counter() - began) * 1000)
            appended, version = _appended(meter, run_id, version)
            pass_bytes.append(appended)
        if result.outcome != "completed":
            raise RuntimeError(f"long run ended {result.outcome}, not completed")
        total_events = version
        total_bytes = _appended(meter, run_id, 0)[0]
    finally:
        store.close()
        meter.close()
    # Resumes 10..29 (the first few also warm caches up) and the last 20 before the end.
    early = resume_ms[10 : 10 + WINDOW]
    late = resume_ms[items - WINDOW - 1 : items - 1]
    early_bytes = pass_bytes[10 : 10 + WINDOW]
    late_bytes = pass_bytes[items - WINDOW - 1 : items - 1]
    return {
        "items": items,
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
        "naive_full_load_ms_at_10": round(statistics.median(naive[:WINDOW]), 3),
        "naive_full_load_ms_at_1000": round(statistics.median(naive[WINDOW:]), 3),
        "naive_full_load_ratio_1000_vs_10": round(
            statistics.median(naive[WINDOW:]) / statistics.median(naive[:WINDOW]), 2
        ),
    }


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
