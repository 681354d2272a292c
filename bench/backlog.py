"""Workload 2: a backlog of due runs drained through the due scan and resume workers,
against the server's raw commit rate on the same number of connections."""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from workflow_runner import heap
from workflow_runner.engine import ResumeRequestItem, resume_runs
from workflow_runner.store import connect

from .common import TENANT, bench_registry, project_until
from .seed import seed_sleeping_runs

# --- process workers ---------------------------------------------------------------------
# Lambda runs each ResumeRun instance in its own process. Threads of one Python process
# share one interpreter lock, which on two cores caps the drain well below what the
# database can take; so both the drain and its commit-rate reference also run with one
# process per connection.


def _commit_loop(url: str, seconds: float, start: Any, out: Any) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT 1")
        start.wait()
        n, deadline = 0, time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            conn.execute("INSERT INTO bench_commit (v) VALUES (%s)", [n])
            n += 1
    out.put(n)


def raw_commit_rate_processes(url: str, connections: int, seconds: float) -> dict[str, Any]:
    """The raw commit rate with one process per connection."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS bench_commit (id bigserial PRIMARY KEY, v int)")
    ctx = multiprocessing.get_context("spawn")
    start, out = ctx.Barrier(connections + 1), ctx.Queue()
    procs = [
        ctx.Process(target=_commit_loop, args=(url, seconds, start, out))
        for _ in range(connections)
    ]
    for proc in procs:
        proc.start()
    start.wait()
    began = time.perf_counter()
    commits = sum(out.get(timeout=seconds + 60) for _ in procs)
    elapsed = time.perf_counter() - began
    for proc in procs:
        proc.join()
    return {
        "connections": connections,
        "processes": True,
        "seconds": round(elapsed, 2),
        "commits": commits,
        "commits_per_s": round(commits / elapsed, 1),
    }


def _drain_worker(
    url: str,
    batch: int,
    lease_batch: int,
    prepared: bool,
    start: Any,
    out: Any,
    limited: bool = False,
) -> None:
    """Lease due rows like the due scan (SKIP LOCKED + lease, `lease_batch` a statement;
    DueScan leases up to 500), resume them `batch` per transaction like ResumeRun does
    with an SQS batch; until nothing is due. `limited`: the workflow has a generous
    concurrency limit (flow control)."""
    registry = bench_registry(limited)
    store = connect(url, prepared_statements=prepared)
    heap.settle()  # as ResumeRun's warm container (workflow_runner.heap)
    done = 0
    start.wait()
    cpu = time.process_time()
    try:
        while True:
            now = datetime.now(UTC)
            with store.transaction():
                rows = store.pending.lease_due(
                    TENANT, now, now, now + timedelta(minutes=15), lease_batch
                )
            if not rows:
                break
            for first in range(0, len(rows), batch):
                items = [
                    ResumeRequestItem(TENANT, r.run_id, r.step_index)
                    for r in rows[first : first + batch]
                ]
                results = resume_runs(store, items, datetime.now(UTC), registry)
                done += sum(getattr(r, "outcome", None) == "completed" for r in results)
    finally:
        store.close()
    out.put((done, time.process_time() - cpu))


def _projector(url: str, prepared: bool, stop: Any, out: Any) -> None:
    store = connect(url, prepared_statements=prepared)
    heap.settle()  # as PendingProjection's warm container
    cpu = time.process_time()
    try:
        project_until(store, stop)
    finally:
        store.close()
    out.put(time.process_time() - cpu)


def _machine_busy_seconds() -> float | None:
    """CPU seconds every process of the machine has used since boot (Linux /proc/stat:
    all but idle and iowait), or None where there is no /proc."""
    try:
        with open("/proc/stat") as stat:
            fields = [int(x) for x in stat.readline().split()[1:9]]
    except OSError:
        return None
    busy = sum(fields) - fields[3] - fields[4]
    return busy / os.sysconf("SC_CLK_TCK")


def drain_processes(
    url: str,
    n: int,
    workers: int,
    batch: int = 10,
    lease_batch: int = 100,
    prepared_statements: bool = True,
    limited: bool = False,
    seeded: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Seed `n` due runs and time `workers` processes resuming all of them (`batch` per
    transaction, leased `lease_batch` at a time), with the pending projection catching
    up in another process meanwhile; `prepared_statements` as DB_PREPARED_STATEMENTS;
    `limited`: bench-sleep with a generous concurrency limit (flow control); `seeded`
    is called once the runs are seeded, before the drain (bench/statements.py)."""
    registry = bench_registry(limited)
    seed_started = time.perf_counter()
    seed_sleeping_runs(url, registry, n, datetime.now(UTC) - timedelta(hours=1))
    seed_s = time.perf_counter() - seed_started
    if seeded is not None:
        seeded()
    ctx = multiprocessing.get_context("spawn")
    start, out, stop, projected = ctx.Barrier(workers + 1), ctx.Queue(), ctx.Event(), ctx.Queue()
    projector = ctx.Process(target=_projector, args=(url, prepared_statements, stop, projected))
    procs = [
        ctx.Process(
            target=_drain_worker,
            args=(url, batch, lease_batch, prepared_statements, start, out, limited),
        )
        for _ in range(workers)
    ]
    projector.start()
    for proc in procs:
        proc.start()
    start.wait()
    busy_before = _machine_busy_seconds()
    began = time.perf_counter()
    reports = [out.get(timeout=900) for _ in procs]
    elapsed = time.perf_counter() - began
    busy_after = _machine_busy_seconds()
    completed = sum(done for done, _ in reports)
    stop.set()
    projection_cpu = projected.get(timeout=60)
    for proc in [*procs, projector]:
        proc.join()
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT count(*) FILTER (WHERE status = 'completed'), count(*) FROM workflow_runs"
        ).fetchone()
    if completed != n or row is None or row[0] != n:
        raise RuntimeError(f"backlog drain: {completed}/{n} completed by workers; runs: {row}")
    return {
        "n": n,
        "workers": workers,
        "processes": True,
        "batch": batch,
        "lease_batch": lease_batch,
        "prepared_statements": prepared_statements,
        "seed_s": round(seed_s, 2),
        "drain_s": round(elapsed, 2),
        "resumes_per_s": round(n / elapsed, 1),
        "cpu": _cpu_split(
            n, elapsed, [cpu for _, cpu in reports], projection_cpu, busy_before, busy_after
        ),
    }


def _cpu_split(
    n: int,
    elapsed: float,
    workers: list[float],
    projection: float,
    busy_before: float | None,
    busy_after: float | None,
) -> dict[str, Any]:
    """Where the drain's CPU went, in ms per resume: the workers' and the projection's
    own processes, and the whole machine (the database server is most of the rest; the
    machine figure also holds anything else that ran meanwhile)."""
    split: dict[str, Any] = {
        "workers_ms_per_resume": round(sum(workers) / n * 1000, 4),
        "projection_ms_per_resume": round(projection / n * 1000, 4),
        "machine_ms_per_resume": None,
        "rest_ms_per_resume": None,
        "machine_busy_fraction": None,
        "cores": os.cpu_count(),
    }
    if busy_before is not None and busy_after is not None:
        busy = busy_after - busy_before
        split["machine_ms_per_resume"] = round(busy / n * 1000, 4)
        split["rest_ms_per_resume"] = round((busy - sum(workers) - projection) / n * 1000, 4)
        split["machine_busy_fraction"] = round(busy / (elapsed * (os.cpu_count() or 1)), 3)
    return split
