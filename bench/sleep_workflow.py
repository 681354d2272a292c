"""Workload 1: step -> wait 1 s -> step, N runs started at once, end to end.

Ours: N trigger events are handed to the in-process pipeline at once; each run is
ingested (TriggerProjection's engine call), projected into the pending set and, as
deployed, sent by the projection at once delayed to its second (its wait is due within
the horizon; the due scan is the safety net), and resumed to completion by a worker
that holds an early request until due (as ResumeRun).
Latency per run: from just before its ingest call to just after the resume that
completed it returned (committed). The peer's side is `bench.dbos_peer`.

Memory per 10,000 waiting runs (`memory_per_10k_waiting`): the same pipeline, in a
process of its own, ingests N sleep-workflow runs (100 at a time, as an intake queue
delivers them) on a clock that stands still, so each stays suspended at its wait; the
growth of the process's resident memory (the worker threads') and of the engine's
tables (`pg_total_relation_size`: heap, indexes, TOAST) from before to after, scaled to
10,000 runs.
"""

from __future__ import annotations

import gc
import multiprocessing
import threading
import time
from datetime import UTC, datetime
from typing import Any

import psycopg
from workflow_runner import DomainEvent, ManualClock

from .common import bench_registry, sleep_event, summary
from .harness import DEFAULT_BATCHES, DEPLOYED_DUE_SOON_HORIZON, Batches, Pipeline, wait_until


def run_ours(
    url: str,
    n: int,
    workers: int,
    timeout: float = 600.0,
    limited: bool = False,
    batches: Batches = DEFAULT_BATCHES,
) -> dict[str, Any]:
    """Run N sleep workflows through the pipeline; throughput and latency figures
    (`limited`: with a generous concurrency limit on every run, flow control;
    `batches`: the template's intake and resume batch sizes)."""
    registry = bench_registry(limited)
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

    events = [sleep_event(f"sleep-{i}", f"s{i}", i) for i in range(n)]
    with Pipeline(
        url,
        registry,
        workers=workers,
        scan_interval=0.05,
        # As deployed: a 1 s wait is due before DueScan's next tick, so the projection
        # sends it at once, delayed to its second; the scan is the safety net.
        due_soon_horizon=DEPLOYED_DUE_SOON_HORIZON,
        on_resumed=on_resumed,
        on_ingested=on_ingested,
        batches=batches,
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
        **batches.figures(),
        "completed": len(completed),
        "makespan_s": round(makespan, 3),
        "runs_per_s": round(n / makespan, 1),
        "latency_s": summary(latencies),
        "resume_outcomes": dict(stats.outcomes),
        "scans": stats.scans,
    }


_WARM_UP = 200  # runs ingested before the baseline, so imports and caches are in it
_CHUNK = 100
_MB = 1024 * 1024


def _rss_bytes() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def _table_bytes(url: str) -> dict[str, int]:
    """pg_total_relation_size of every engine table (heap, indexes, TOAST)."""
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c"
            " JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = current_schema() AND c.relkind = 'r'"
            " AND c.relname <> 'schema_migrations'"
        ).fetchall()
    return {name: int(size) for name, size in rows}


def _waiting(url: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT count(*) FROM workflow_run_pending").fetchone()
    return int(row[0]) if row else 0


def _ingest_waiting(pipeline: Pipeline, url: str, first: int, n: int) -> None:
    # In chunks, as an intake queue delivers them: the events waiting for a worker are
    # the input's memory, not the waiting runs'.
    for start in range(first, first + n, _CHUNK):
        for i in range(start, min(start + _CHUNK, first + n)):
            pipeline.ingest(sleep_event(f"mem-{i}", f"m{i}", i))
        wait_until(pipeline.idle, 120)
    if not wait_until(lambda: _waiting(url) >= first + n, 600, poll=0.1):
        raise RuntimeError(f"memory: {_waiting(url)}/{first + n} runs waiting")


def _memory_child(url: str, n: int, workers: int, out: Any) -> None:
    registry = bench_registry()
    # Business time stands still: every run stays at its 1 s wait.
    clock = ManualClock(datetime.now(UTC))
    with Pipeline(url, registry, workers=workers, run_scanner=False, clock=clock) as pipeline:
        _ingest_waiting(pipeline, url, 0, _WARM_UP)
        wait_until(pipeline.idle, 60)
        gc.collect()
        rss_before, tables_before = _rss_bytes(), _table_bytes(url)
        _ingest_waiting(pipeline, url, _WARM_UP, n)
        wait_until(pipeline.idle, 60)
        gc.collect()
        rss_after, tables_after = _rss_bytes(), _table_bytes(url)
        errors = list(pipeline.stats.errors)
    out.put((rss_before, rss_after, tables_before, tables_after, errors))


def memory_per_10k_waiting(url: str, n: int, workers: int) -> dict[str, Any]:
    """Resident memory of the worker process and database bytes per 10,000 waiting runs."""
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    child = ctx.Process(target=_memory_child, args=(url, n, workers, out))
    child.start()
    rss_before, rss_after, before, after, errors = out.get(timeout=900)
    child.join()
    if errors:
        raise RuntimeError(f"memory: pipeline errors {errors[:3]}")
    scale = 10_000 / n
    by_table = {
        name: round((after[name] - before.get(name, 0)) * scale / _MB, 2)
        for name in sorted(after)
        if after[name] != before.get(name, 0)
    }
    database = sum(after.values()) - sum(before.values())
    return {
        "waiting_runs": n,
        "workers": workers,
        "worker_process_rss_mb": round(rss_after / _MB, 1),
        "worker_rss_mb": round((rss_after - rss_before) * scale / _MB, 2),
        "database_mb": round(database * scale / _MB, 2),
        "database_mb_by_table": by_table,
        "database_bytes_per_run": round(database / n),
    }
