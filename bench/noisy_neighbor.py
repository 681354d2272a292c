"""Workload 12: a noisy neighbour. Tenant A has a backlog of due runs; tenant B's runs
fall due one every 100 ms while A's backlog drains. How late is B?

The path is the deployed one, in processes: the due scan (its own process, waiting for
room while tenants are held back, as the DueScan function does) leases rows and sends
resume requests into one first-in-first-out queue, the stand-in for SQS; four worker
processes, the backlog drain's, take up to ten requests at a time and resume them in
one transaction as ResumeRun does with an SQS batch; the pending projection catches up
in another process. B's lateness is the commit of its resume minus its due time. A's
backlog is seeded in bulk (`bench.seed`) due an hour ago; B's runs are seeded due from
just after the drain starts, 100 ms apart, and the figures count the B runs due before
A's backlog was gone.
"""

from __future__ import annotations

import multiprocessing
import queue as queue_module
import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from workflow_runner import heap
from workflow_runner.engine import ResumeRequestItem, resume_runs
from workflow_runner.engine.due_scan import due_scan
from workflow_runner.engine.enqueue import delay_for
from workflow_runner.ports import ResumeRequest
from workflow_runner.store import connect

from .common import TENANT, bench_registry, project_until, summary
from .seed import seed_sleeping_runs

TENANT_A = TENANT
TENANT_B = "7c1d2a3e-0000-4000-8000-00000000b00b"
B_INTERVAL_S = 0.1
_SQS_BATCH = 10
_SCAN_INTERVAL_S = 0.05


class _ProcessQueue:
    """The resume queue between the scan process and the workers: first in, first out
    (as SQS standard queues roughly are); a delay is honoured by a timer."""

    def __init__(self, q: Any) -> None:
        self._q = q

    def send(self, requests: Sequence[ResumeRequest]) -> list[ResumeRequest]:
        for request in requests:
            if request.delay_seconds > 0:
                threading.Timer(request.delay_seconds, self._q.put, [request]).start()
            else:
                self._q.put(request)
        return []


class _Stopped(Exception):
    """The workload ended while the scan was waiting for room."""


def _scanner(
    url: str, q: Any, scan: dict[str, Any], start: Any, go: Any, stop: Any, out: Any
) -> None:
    """DueScan: calls of up to 45 s that wait for room while tenants are held back (as
    the function does, its consumers running meanwhile); a new call 50 ms after one
    ends."""
    store = connect(url)
    registry = bench_registry()
    resume_queue = _ProcessQueue(q)
    heap.settle()  # as a warm container (workflow_runner.heap)
    stats = {"scans": 0, "leased": 0, "held_rounds": 0}

    def pause(seconds: float) -> None:
        if stop.wait(seconds):
            raise _Stopped

    try:
        start.wait()
        go.wait()
        while not stop.is_set():
            began = time.monotonic()
            try:
                result = due_scan(
                    store,
                    resume_queue,
                    datetime.now(UTC),
                    horizon_seconds=0,
                    registry=registry,
                    wait_for_room=True,
                    sleep=pause,
                    **scan,
                )
            except _Stopped:
                break
            stats["scans"] += 1
            stats["leased"] += result.leased
            stats["held_rounds"] += result.held_rounds
            rest = _SCAN_INTERVAL_S - (time.monotonic() - began)
            if rest > 0:
                stop.wait(rest)
    finally:
        store.close()
        out.put(stats)


def _worker(url: str, q: Any, start: Any, go: Any, stop: Any, done: Any) -> None:
    """ResumeRun: up to ten requests per transaction; an early one goes back delayed."""
    store = connect(url)
    registry = bench_registry()
    requeue = _ProcessQueue(q)
    heap.settle()
    try:
        start.wait()
        go.wait()
        while not stop.is_set():
            try:
                batch = [q.get(timeout=0.05)]
            except queue_module.Empty:
                continue
            while len(batch) < _SQS_BATCH:
                try:
                    batch.append(q.get_nowait())
                except queue_module.Empty:
                    break
            now = datetime.now(UTC)
            items = [ResumeRequestItem(r.tenant_id, r.run_id, r.step_index) for r in batch]
            results = resume_runs(store, items, now, registry)
            committed = time.time()
            report = []
            for request, result in zip(batch, results, strict=True):
                outcome = getattr(result, "outcome", type(result).__name__)
                wake = getattr(result, "wake_at", None)
                if outcome == "not-due" and wake is not None:
                    wait = delay_for(wake, now)
                    requeue.send(
                        [ResumeRequest(request.tenant_id, request.run_id, request.step_index, wait)]
                    )
                report.append(
                    (
                        request.tenant_id,
                        request.run_id,
                        outcome,
                        wake.timestamp() if wake is not None else None,
                        committed,
                    )
                )
            done.put(report)
    finally:
        store.close()


def _projector(url: str, start: Any, go: Any, stop: Any) -> None:
    store = connect(url)
    heap.settle()
    try:
        start.wait()
        go.wait()
        project_until(store, stop)
    finally:
        store.close()


def run(
    url: str,
    n_a: int,
    workers: int,
    scan: dict[str, Any] | None = None,
    lead_s: float = 1.0,
    timeout: float = 900.0,
) -> dict[str, Any]:
    """Seed A's `n_a` due runs and B's runs, drain, and measure B's lateness.

    Args:
        url: a fresh, migrated database.
        n_a: tenant A's backlog.
        workers: resume worker processes.
        scan: extra keyword arguments of `due_scan` (e.g. its tenant share).
        lead_s: B's first run falls due this long after the workers were ready (its
            runs are seeded meanwhile, before the drain starts; the figures count those
            due after the start).
    """
    registry = bench_registry()
    seed_began = time.perf_counter()
    seed_sleeping_runs(url, registry, n_a, datetime.now(UTC) - timedelta(hours=1), TENANT_A)
    seed_s = time.perf_counter() - seed_began
    # Enough B runs to outlast A's backlog at 200 resumes/s; the later ones are not counted.
    n_b = max(50, int(n_a / 200 / B_INTERVAL_S))
    ctx = multiprocessing.get_context("spawn")
    q, done, scan_out = ctx.Queue(), ctx.Queue(), ctx.Queue()
    start, go, stop = ctx.Barrier(workers + 3), ctx.Event(), ctx.Event()
    procs = [
        ctx.Process(target=_worker, args=(url, q, start, go, stop, done)) for _ in range(workers)
    ]
    procs.append(ctx.Process(target=_projector, args=(url, start, go, stop)))
    procs.append(ctx.Process(target=_scanner, args=(url, q, scan or {}, start, go, stop, scan_out)))
    for proc in procs:
        proc.start()
    # Every process is connected and waiting: seed B now, due from just after the start.
    start.wait(timeout=300)
    b_wake_from = datetime.now(UTC) + timedelta(seconds=lead_s)
    b_runs = set(
        seed_sleeping_runs(
            url,
            registry,
            n_b,
            b_wake_from,
            TENANT_B,
            wake_step=timedelta(seconds=B_INTERVAL_S),
            key_prefix="nb",
            replace=False,
            analyze=False,
        )
    )
    go.set()
    began = time.time()
    a_done: dict[str, float] = {}
    b_late: dict[str, float] = {}
    b_due: dict[str, float] = {}
    outcomes: dict[str, int] = {}
    deadline = time.monotonic() + timeout
    a_end: float | None = None
    twice = 0
    try:
        while time.monotonic() < deadline:
            if a_end is not None:
                counted = [r for r, due in b_due.items() if due <= a_end]
                due_by_end = int((a_end - b_wake_from.timestamp()) / B_INTERVAL_S) + 1
                if len(counted) >= min(n_b, max(0, due_by_end)):
                    break
            try:
                report = done.get(timeout=0.5)
            except queue_module.Empty:
                continue
            for tenant, run_id, outcome, wake, committed in report:
                outcomes[outcome] = outcomes.get(outcome, 0) + 1
                if outcome != "completed":
                    continue
                if run_id in a_done or run_id in b_due:
                    twice += 1
                if tenant == TENANT_A:
                    a_done[run_id] = committed
                    if len(a_done) == n_a:
                        a_end = committed
                elif run_id in b_runs and wake is not None:
                    b_due[run_id] = wake
                    b_late[run_id] = committed - wake
    finally:
        stop.set()
        for proc in procs:
            proc.join(timeout=30)
    scanned = scan_out.get(timeout=10)
    if a_end is None:
        raise RuntimeError(f"noisy neighbour: {len(a_done)}/{n_a} of A completed; {outcomes}")
    if twice:
        raise RuntimeError(f"noisy neighbour: {twice} runs completed twice")
    # B's runs that fell due while A's backlog drained (any due before the start, while
    # B's runs were being seeded, are left out: their lateness is the seeding's).
    during = sorted((due, b_late[r]) for r, due in b_due.items() if began <= due <= a_end)
    late = [lateness for _, lateness in during]
    lateness = summary(late)
    drain_s = a_end - began
    return {
        "a_due": n_a,
        "b_interval_s": B_INTERVAL_S,
        "b_first_due_after_start_s": round(during[0][0] - began, 2) if during else None,
        "b_runs_during_drain": len(late),
        "workers": workers,
        "processes": True,
        "scan": scan or {},
        "scan_interval_s": _SCAN_INTERVAL_S,
        "seed_s": round(seed_s, 2),
        "a_drain_s": round(drain_s, 2),
        "a_resumes_per_s": round(n_a / drain_s, 1),
        "b_lateness_s": lateness,
        "p50_s": lateness.get("p50"),
        "p99_s": lateness.get("p99"),
        "max_s": lateness.get("max"),
        "scans": scanned,
        "resume_outcomes": outcomes,
    }
