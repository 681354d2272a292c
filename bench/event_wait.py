"""Workload 14, ours: N runs each waiting for its own correlated event, then the N
events at once (or at a peer's pace: `pace_per_s`).

The runs are bench-await (common.py): `wait_for_event("bench.go")` with an `eq` match
on the event's `id`, the same workflow as the wakeup workload (4). Once every run is
suspended in the pending set, all N events are handed to the pipeline's EventWakeup
at once (the wakeup workload sends 100/s), which takes them ten per call as its SQS
batches; each is matched against the waiting runs' correlation values, and the resume
it sends completes its run (the workers take waiting resumes before further wakes,
see `run_ours`). Throughput: runs resumed per second from the first send to the last
resume's commit; latency: from an event's hand-over to the commit of the resume it
caused. The peers' sides are
`absurd_peer.event_wait` and `dbos_peer.event_wait`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from workflow_runner import DomainEvent, run_id_for

from .common import TENANT, bench_registry
from .harness import DEFAULT_BATCHES, Batches, Pipeline, wait_until
from .latency import _pending_count
from .peer_figures import wake_figures


def run_ours(
    url: str,
    n: int,
    workers: int,
    resumes_first: bool = True,
    waiting: Callable[[], None] | None = None,
    batches: Batches = DEFAULT_BATCHES,
    pace_per_s: float | None = None,
) -> dict[str, Any]:
    """N correlated waits woken by N events sent at once; throughput and latency.

    `resumes_first`: the workers take a waiting resume batch before the next wake
    (deployed, EventWakeup and ResumeRun are separate functions, so the resumes a wake
    sent do not queue behind the burst's other wakes); False: first in, first out.
    `waiting` is called once every run waits, before the events are sent
    (bench/statements.py); `batches`: the template's intake and resume batch sizes;
    `pace_per_s`: hand the events over at this rate instead (event i at i / pace after
    the first), as a peer whose every send is a commit of its own hands them over."""
    sent: dict[str, float] = {}
    done: dict[str, float] = {}
    lock = threading.Lock()

    def on_resumed(request: Any, result: Any, committed: float) -> None:
        if result.outcome == "completed":
            with lock:
                done[request.run_id] = committed

    def event(kind: str, i: int) -> DomainEvent:
        return DomainEvent(id=f"{kind}-{i}", type=kind, payload={"id": f"e{i}"}, tenant_id=TENANT)

    with Pipeline(
        url,
        bench_registry(),
        workers=workers,
        on_resumed=on_resumed,
        resumes_first=resumes_first,
        batches=batches,
    ) as pipeline:
        for i in range(n):
            pipeline.ingest(event("bench.await-start", i))
        if not wait_until(lambda: _pending_count(url) >= n, 300, poll=0.1):
            raise RuntimeError("event wait: the waiting runs were not all projected")
        time.sleep(0.5)  # let the pipeline go quiet before measuring
        if waiting is not None:
            waiting()
        start = time.monotonic()
        for i in range(n):
            if pace_per_s is not None:
                _sleep_until(start + i / pace_per_s)
            now = time.time()
            sent[run_id_for("bench-await", f"e{i}")] = now
            pipeline.wake(event("bench.go", i), now)
        finished = wait_until(lambda: len(done) >= n, 300)
        stats = pipeline.stats
    if not finished or stats.errors:
        raise RuntimeError(f"event wait: {len(done)}/{n} resumed; errors {stats.errors[:3]}")
    paced = {} if pace_per_s is None else {"pace_per_s": round(pace_per_s, 1)}
    return {**wake_figures(sent, done), "workers": workers, **batches.figures(), **paced}


def _sleep_until(deadline: float) -> None:
    """Sleep to a time.monotonic() instant (no sleep once it has passed)."""
    left = deadline - time.monotonic()
    if left > 0:
        time.sleep(left)
