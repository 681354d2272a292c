"""Workloads 4-6: event wakeup latency, timer lateness and trigger ingestion."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Sequence
from typing import Any

import psycopg
from workflow_runner import DomainEvent, run_id_for

from .common import TENANT, HostSampler, bench_registry, percentile, summary
from .harness import Pipeline, wait_until

# kumiko resumes waits from a poll every minute (seeds: resume loop, cron tick): an
# event arriving at a uniformly random moment waits for the next tick. Modelled, not
# measured: uniform over [0, 60) s.
KUMIKO_TICK_S = 60.0


def kumiko_modelled() -> dict[str, float]:
    """Expected wakeup latency under kumiko's next-minute-tick design (a model)."""
    return {
        "tick_s": KUMIKO_TICK_S,
        "mean_s": KUMIKO_TICK_S / 2,
        "p50_s": KUMIKO_TICK_S * 0.5,
        "p99_s": KUMIKO_TICK_S * 0.99,
    }


def _events(kind: str, n: int, payload: Any) -> list[DomainEvent]:
    return [
        DomainEvent(id=f"{kind}-{i}", type=kind, payload=payload(i), tenant_id=TENANT)
        for i in range(n)
    ]


def _pending_count(url: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT count(*) FROM workflow_run_pending").fetchone()
    return int(row[0]) if row else 0


def wakeup(url: str, n: int, workers: int, rate: float = 100.0) -> dict[str, Any]:
    """N runs wait for their own event; the events arrive at `rate`/s through EventWakeup.

    Latency: from handing the event to the bus to the commit of the resume it caused.
    Each wait is also cut into its stages (queued for a worker; from the wakeup's start
    to a worker starting the resume it sent; the resume), and the host's stolen CPU and
    CPU pressure are sampled, to say where the slowest 1% spent their time.
    """
    registry = bench_registry()
    put: dict[str, float] = {}
    done: dict[str, float] = {}
    woke: dict[str, tuple[float, float]] = {}
    begun: dict[str, float] = {}
    lock = threading.Lock()

    def on_resumed(request: Any, result: Any, committed: float) -> None:
        if result.outcome == "completed":
            with lock:
                done[request.run_id] = committed

    def on_woken(event: DomainEvent, started: float, sent: float) -> None:
        with lock:
            woke[run_id_for("bench-await", event.payload["id"])] = (started, sent)

    def on_resume_started(batch: Any, started: float) -> None:
        with lock:
            for request in batch:
                begun[request.run_id] = started

    with Pipeline(
        url,
        registry,
        workers=workers,
        on_resumed=on_resumed,
        on_woken=on_woken,
        on_resume_started=on_resume_started,
    ) as pipeline:
        for event in _events("bench.await-start", n, lambda i: {"id": f"w{i}"}):
            pipeline.ingest(event)
        if not wait_until(lambda: _pending_count(url) >= n, 300, poll=0.1):
            raise RuntimeError("wakeup: the waiting runs were not all projected")
        time.sleep(0.5)  # let the pipeline go quiet before measuring
        with HostSampler() as host:
            for i, event in enumerate(_events("bench.go", n, lambda i: {"id": f"w{i}"})):
                now = time.time()
                put[run_id_for("bench-await", f"w{i}")] = now
                pipeline.wake(event, now)
                time.sleep(max(0.0, 1.0 / rate - (time.time() - now)))
            finished = wait_until(lambda: len(done) >= n, 120)
        stats = pipeline.stats
    if not finished or stats.errors:
        raise RuntimeError(f"wakeup: {len(done)}/{n} resumed; errors {stats.errors[:3]}")
    latencies = [done[r] - put[r] for r in done]
    result = summary(latencies, scale=1000.0, digits=2)
    slowest = sorted(done, key=lambda r: done[r] - put[r])[-max(1, len(done) // 100) :]
    to_monotonic = time.monotonic() - time.time()
    return {
        "n": n,
        "rate_per_s": rate,
        "workers": workers,
        "latency_ms": result,
        "p50_ms": result["p50"],
        "p99_ms": result["p99"],
        "stages_ms": {
            "all": _stages(list(done), put, woke, begun, done),
            "slowest_1pct": _stages(slowest, put, woke, begun, done),
        },
        "host": host.report([(put[r] + to_monotonic, done[r] + to_monotonic) for r in slowest]),
        "kumiko_modelled": kumiko_modelled(),
    }


def _stages(
    runs: Sequence[str],
    put: dict[str, float],
    woke: dict[str, tuple[float, float]],
    begun: dict[str, float],
    done: dict[str, float],
) -> dict[str, float]:
    """Median milliseconds of each stage of these waits."""
    traced = [r for r in runs if r in woke and r in begun]
    cuts = {
        "queued_for_worker": lambda r: woke[r][0] - put[r],
        "wakeup_to_resume_start": lambda r: begun[r] - woke[r][0],
        "resume": lambda r: done[r] - begun[r],
        # The wakeup's whole job: it ends after its send, which another worker may
        # already be resuming (the stage before overlaps it).
        "wakeup_job": lambda r: woke[r][1] - woke[r][0],
    }
    out: dict[str, float] = {"n": len(traced)}
    for name, cut in cuts.items():
        out[name] = round(percentile([cut(r) for r in traced], 50) * 1000, 2) if traced else 0.0
    return out


def timers(
    url: str, n: int, workers: int, max_wait_s: int = 30, tick_s: float = 1.0, horizon_s: int = 2
) -> dict[str, Any]:
    """N waits of 1..max_wait_s seconds in real time; lateness of each resume's commit.

    Also, for comparison with results before 2026-12-04, the lateness as it was taken
    then: at the end of the resume batch, which for a request held until due is the end
    of the batch's last hold (up to a second after its own pass committed)."""
    registry = bench_registry()
    rng = random.Random(6)
    late: list[float] = []
    batch_end: list[float] = []
    lock = threading.Lock()

    def on_resumed(request: Any, result: Any, committed: float) -> None:
        if result.outcome == "completed" and result.wake_at is not None:
            returned = time.time()  # the workers call this once the batch has returned
            with lock:
                late.append(committed - result.wake_at.timestamp())
                batch_end.append(returned - result.wake_at.timestamp())

    delays = [rng.randint(1000, max_wait_s * 1000) for _ in range(n)]
    with Pipeline(
        url,
        registry,
        workers=workers,
        scan_interval=tick_s,
        horizon=horizon_s,
        on_resumed=on_resumed,
    ) as pipeline:
        for event in _events("bench.timer", n, lambda i: {"id": f"t{i}", "delayMs": delays[i]}):
            pipeline.ingest(event)
        finished = wait_until(lambda: len(late) >= n, max_wait_s + 60, poll=0.05)
        stats = pipeline.stats
    if not finished or stats.errors:
        raise RuntimeError(f"timers: {len(late)}/{n} resumed; errors {stats.errors[:3]}")
    result = summary(late, digits=3)
    return {
        "n": n,
        "waits_s": [1, max_wait_s],
        "scan_interval_s": tick_s,
        "horizon_s": horizon_s,
        "workers": workers,
        "lateness_s": result,
        "lateness_p50_s": result["p50"],
        "lateness_p99_s": result["p99"],
        "lateness_max_s": result["max"],
        "lateness_at_batch_end_s": summary(batch_end, digits=3),
        "early": sum(1 for x in late if x < 0),
        "resume_outcomes": dict(stats.outcomes),
    }


def ingestion(url: str, n: int, workers: int, duplicate_share: float = 0.2) -> dict[str, Any]:
    """N trigger events, `duplicate_share` of them duplicates: half redeliveries of an
    event already sent (same id), half new events for a run that exists (same key)."""
    registry = bench_registry()
    rng = random.Random(7)
    unique = int(n * (1 - duplicate_share))
    events = _events("bench.ingest", unique, lambda i: {"key": f"k{i}"})
    extra = n - unique
    redeliveries = [rng.choice(events) for _ in range(extra // 2)]
    same_key = [
        DomainEvent(
            id=f"again-{i}", type="bench.ingest", payload={"key": f"k{k}"}, tenant_id=TENANT
        )
        for i, k in enumerate(rng.randrange(unique) for _ in range(extra - extra // 2))
    ]
    stream = events + redeliveries + same_key
    rng.shuffle(stream)
    counts = {"stored": 0, "redelivered": 0, "started": 0, "skipped": 0}
    lock = threading.Lock()

    def on_ingested(event: DomainEvent, result: Any, began: float, done: float) -> None:
        with lock:
            counts["stored" if result.stored else "redelivered"] += 1
            counts["started"] += len(result.started)
            counts["skipped"] += len(result.skipped)

    with Pipeline(
        url, registry, workers=workers, run_scanner=False, on_ingested=on_ingested
    ) as pipeline:
        began = time.perf_counter()
        for event in stream:
            pipeline.ingest(event)
        finished = wait_until(lambda: pipeline.stats.ingested >= len(stream), 600, poll=0.01)
        elapsed = time.perf_counter() - began
        stats = pipeline.stats
    if not finished or stats.errors:
        raise RuntimeError(f"ingestion: {stats.ingested}/{len(stream)}; errors {stats.errors[:3]}")
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT count(*), count(*) FILTER (WHERE status = 'waiting') FROM workflow_runs"
        ).fetchone()
    assert row is not None
    if row[0] != unique or row[1] != unique or counts["started"] != unique:
        raise RuntimeError(f"ingestion: {row[0]} runs ({row[1]} waiting), expected {unique}")
    return {
        "events": len(stream),
        "unique_runs": unique,
        "duplicates": extra,
        "workers": workers,
        "elapsed_s": round(elapsed, 2),
        "events_per_s": round(len(stream) / elapsed, 1),
        "outcomes": counts,
    }
