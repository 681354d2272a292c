"""Workload 2: a backlog of due runs drained through the due scan and resume workers,
against the server's raw commit rate on the same number of connections."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from .common import bench_registry
from .harness import Pipeline, wait_until
from .seed import seed_sleeping_runs


def raw_commit_rate(url: str, connections: int, seconds: float) -> dict[str, Any]:
    """One-row INSERT + COMMIT in a loop on `connections` connections for `seconds`."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS bench_commit (id bigserial PRIMARY KEY, v int)")
    counts = [0] * connections
    start = threading.Barrier(connections + 1)
    stop = threading.Event()

    def loop(slot: int) -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("SELECT 1")
            start.wait()
            n = 0
            while not stop.is_set():
                conn.execute("INSERT INTO bench_commit (v) VALUES (%s)", [slot])
                n += 1
            counts[slot] = n

    threads = [threading.Thread(target=loop, args=(i,)) for i in range(connections)]
    for thread in threads:
        thread.start()
    start.wait()
    began = time.perf_counter()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - began
    return {
        "connections": connections,
        "seconds": round(elapsed, 2),
        "commits": sum(counts),
        "commits_per_s": round(sum(counts) / elapsed, 1),
    }


def drain(url: str, n: int, workers: int, timeout: float = 900.0) -> dict[str, Any]:
    """Seed `n` due runs, then time the pipeline resuming all of them to completion."""
    registry = bench_registry()
    seed_started = time.perf_counter()
    seed_sleeping_runs(url, registry, n, datetime.now(UTC) - timedelta(hours=1))
    seed_s = time.perf_counter() - seed_started
    done = 0
    lock = threading.Lock()

    def on_resumed(request: Any, result: Any, committed: float) -> None:
        nonlocal done
        if result.outcome == "completed":
            with lock:
                done += 1

    pipeline = Pipeline(url, registry, workers=workers, scan_interval=0.05, on_resumed=on_resumed)
    began = time.perf_counter()
    with pipeline:
        finished = wait_until(lambda: done >= n, timeout, poll=0.02)
        elapsed = time.perf_counter() - began
        stats = pipeline.stats
    if not finished or stats.errors:
        raise RuntimeError(f"backlog drain: {done}/{n} completed; errors: {stats.errors[:3]}")
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT count(*) FILTER (WHERE status = 'completed'), count(*) FROM workflow_runs"
        ).fetchone()
    assert row is not None and row[0] == n == row[1], f"runs completed/total: {row}"
    return {
        "n": n,
        "workers": workers,
        "seed_s": round(seed_s, 2),
        "drain_s": round(elapsed, 2),
        "resumes_per_s": round(n / elapsed, 1),
        "resume_outcomes": dict(stats.outcomes),
        "due_scans": stats.scans,
    }
