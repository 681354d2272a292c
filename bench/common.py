"""Shared pieces of the benchmarks: databases, timing, percentiles and the bench workflows."""

from __future__ import annotations

import dataclasses
import itertools
import math
import statistics
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from workflow_runner import (
    Concurrency,
    DomainEvent,
    WorkflowRegistry,
    define_workflow,
    on_event,
)
from workflow_runner.definition.dsl import WorkflowDefinition
from workflow_runner.embedded import database_url
from workflow_runner.engine import CatchUpPacer, project_pending
from workflow_runner.flow.constructs import MAX_LIMIT, FlowControl
from workflow_runner.store import Store, apply_migrations

TENANT = "7c1d2a3e-0000-4000-8000-00000000b001"


TEMPLATE = Path(__file__).resolve().parent.parent / "template.yaml"


def deployed_runtime(template: Path = TEMPLATE) -> tuple[str, list[str]]:
    """The runtime and architectures the template deploys the functions on (its
    Globals; Lambda's default architecture, x86_64, when it names none), which the
    bench's own Python and CPU need not be."""
    from workflow_runner.aws.template import load_template

    function = load_template(template).get("Globals", {}).get("Function", {})
    return function.get("Runtime", "not set"), function.get("Architectures") or ["x86_64"]


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0–100) by linear interpolation; NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100.0
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def summary(values: Sequence[float], scale: float = 1.0, digits: int = 3) -> dict[str, float]:
    """p50/p90/p99/max/mean of `values` times `scale`, rounded."""
    if not values:
        return {"n": 0}
    return {
        "n": len(values),
        "p50": round(percentile(values, 50) * scale, digits),
        "p90": round(percentile(values, 90) * scale, digits),
        "p99": round(percentile(values, 99) * scale, digits),
        "max": round(max(values) * scale, digits),
        "mean": round(statistics.fmean(values) * scale, digits),
    }


def _psi_total(resource: str) -> int:
    """Microseconds some task stalled on `resource` ("cpu", "io") since boot (PSI)."""
    try:
        with open(f"/proc/pressure/{resource}") as psi:
            return int(psi.readline().rsplit("total=", 1)[1])
    except (OSError, IndexError, ValueError):
        return 0  # no PSI on this kernel: pressure reads 0


def _host_counters() -> tuple[float, int, int, int, int]:
    """(monotonic seconds, all CPU jiffies, stolen jiffies, CPU and I/O pressure "some"
    µs)."""
    with open("/proc/stat") as stat:
        fields = [int(x) for x in stat.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal (guest time is within user)
    return time.monotonic(), sum(fields[:8]), fields[7], _psi_total("cpu"), _psi_total("io")


class HostSampler:
    """What the host took from us during a workload: CPU stolen by the hypervisor, CPU
    pressure (time some task was runnable but waiting) and I/O pressure (time some task
    waited for the disk), sampled every `interval` s from /proc on a thread, so a
    latency tail can be set against the moments it happened in. Linux only; elsewhere
    every figure reads 0."""

    def __init__(self, interval: float = 0.1) -> None:
        self.interval = interval
        self.samples: list[tuple[float, int, int, int, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="host-sampler", daemon=True)

    def __enter__(self) -> HostSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while True:
            try:
                self.samples.append(_host_counters())
            except OSError:
                return
            if self._stop.wait(self.interval):
                self.samples.append(_host_counters())
                return

    def windows(self) -> list[tuple[float, float, float, float, float]]:
        """(start, end, steal %, CPU pressure %, I/O pressure %) of each interval, in
        monotonic time."""
        out = []
        for (t0, all0, st0, cpu0, io0), (t1, all1, st1, cpu1, io1) in itertools.pairwise(
            self.samples
        ):
            jiffies, seconds = max(1, all1 - all0), max(t1 - t0, 1e-6)
            out.append(
                (
                    t0,
                    t1,
                    100.0 * (st1 - st0) / jiffies,
                    (cpu1 - cpu0) / 1e4 / seconds,
                    (io1 - io0) / 1e4 / seconds,
                )
            )
        return out

    def report(self, slow: Sequence[tuple[float, float]] = ()) -> dict[str, float]:
        """Steal, CPU and I/O pressure over the whole workload, the worst interval, and
        over the intervals that overlap the `slow` (start, end) spans (monotonic s)."""
        windows = self.windows()
        if not windows:
            return {}

        def mean(rows: Sequence[tuple[float, float, float, float, float]], i: int) -> float:
            return round(statistics.fmean(r[i] for r in rows), 1) if rows else 0.0

        hit = [w for w in windows if any(s < w[1] and e > w[0] for s, e in slow)]
        return {
            "interval_s": self.interval,
            "steal_pct": mean(windows, 2),
            "steal_pct_max_interval": round(max(w[2] for w in windows), 1),
            "cpu_pressure_pct": mean(windows, 3),
            "cpu_pressure_pct_max_interval": round(max(w[3] for w in windows), 1),
            "io_pressure_pct": mean(windows, 4),
            "io_pressure_pct_max_interval": round(max(w[4] for w in windows), 1),
            "slow_intervals": len(hit),
            "steal_pct_in_slow": mean(hit, 2),
            "cpu_pressure_pct_in_slow": mean(hit, 3),
            "io_pressure_pct_in_slow": mean(hit, 4),
        }


def create_database(admin_url: str, prefix: str, migrate: bool = True) -> str:
    """Create a fresh database on the benchmark server (migrated unless told otherwise).

    A CHECKPOINT first: the previous workload's writes (100,000 seeded runs write a few
    hundred MB of WAL) would otherwise be flushed by a checkpoint the server starts in
    the middle of the next workload, which then measures the flush (a latency p99 ten
    times the usual one). Every system's workload starts from the same quiet server.
    """
    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute("CHECKPOINT")
        admin.execute(f'CREATE DATABASE "{name}"')
    url = database_url(admin_url, name)
    if migrate:
        with psycopg.connect(url, autocommit=True) as conn:
            apply_migrations(conn)  # type: ignore[arg-type]
    return url


def drop_database(admin_url: str, url: str) -> None:
    """Drop a benchmark database (frees disk between workloads)."""
    name = psycopg.conninfo.conninfo_to_dict(url)["dbname"]
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def fresh_database(admin_url: str, prefix: str, migrate: bool = True) -> Iterator[str]:
    url = create_database(admin_url, prefix, migrate)
    try:
        yield url
    finally:
        drop_database(admin_url, url)


@dataclass
class Stopwatch:
    started: float = 0.0
    elapsed: float = 0.0

    def __enter__(self) -> Stopwatch:
        self.started = time.perf_counter()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.elapsed = time.perf_counter() - self.started


def project_until(store: Store, stop: Any) -> None:
    """A projector process's loop: catch up, paced as PendingProjection's warm container
    (CatchUpPacer), a short nap when nothing was new, until `stop` is set."""
    pacer = CatchUpPacer()
    while not stop.is_set():
        pacer.wait()
        if project_pending(store, datetime.now(UTC)).applied == 0:
            time.sleep(0.02)


def sleep_event(event_id: str, key: str, n: int) -> DomainEvent:
    """A trigger event of the sleep workflow (bench-sleep): its run's key, its first
    step's number."""
    return DomainEvent(
        id=event_id,
        type="bench.sleep",
        payload={"id": key, "n": n},
        tenant_id=TENANT,
        source="bench",
    )


def bench_registry(limited: bool = False) -> WorkflowRegistry:
    """The workflows the benchmarks drive (kept out of the default registry).

    `limited`: bench-sleep with a generous concurrency limit (flow control: 10,000 runs
    of the tenant at once, never reached), to measure what counting slots costs."""
    registry = WorkflowRegistry()
    for definition in _bench_workflows():
        if limited and definition.name == "bench-sleep":
            generous = FlowControl(concurrency=(Concurrency(MAX_LIMIT),))
            definition = dataclasses.replace(definition, flow=generous)
        registry.register(definition)
    return registry


def _bench_workflows() -> list[WorkflowDefinition]:
    sleep = define_workflow(
        name="bench-sleep",
        trigger=on_event("bench.sleep"),
        idempotency_key=lambda event: event.payload["id"],
        steps=lambda s: [
            s.compute("first", lambda ctx: {"n": ctx.event.payload["n"]}),
            s.wait(for_="PT1S"),
            s.compute("second", lambda ctx: ctx.steps["first"]["n"] + 1),
            s.return_(lambda ctx: {"isSuccess": True, "n": ctx.steps["second"]}),
        ],
        register=False,
    )
    timer = define_workflow(
        name="bench-timer",
        trigger=on_event("bench.timer"),
        idempotency_key=lambda event: event.payload["id"],
        steps=lambda s: [
            s.wait(for_=lambda ctx: timedelta(milliseconds=ctx.event.payload["delayMs"])),
            s.return_({"isSuccess": True}),
        ],
        register=False,
    )
    awaiting = define_workflow(
        name="bench-await",
        trigger=on_event("bench.await-start"),
        idempotency_key=lambda event: event.payload["id"],
        awaits={"go": "bench.go"},
        steps=lambda s: [
            s.wait_for_event(
                event="bench.go",
                match=lambda ctx: {
                    "version": 1,
                    "expr": {
                        "kind": "atom",
                        "path": ["id"],
                        "op": {"kind": "eq", "value": ctx.event.payload["id"]},
                    },
                },
                timeout="P1D",
            ),
            s.return_(lambda ctx: {"isSuccess": True, "got": ctx.steps["bench.go"]["id"]}),
        ],
        register=False,
    )
    ingest = define_workflow(
        name="bench-ingest",
        trigger=on_event("bench.ingest"),
        idempotency_key=lambda event: event.payload["key"],
        steps=lambda s: [
            s.compute("seen", lambda ctx: ctx.event.payload["key"]),
            s.wait(for_="P1D"),
            s.return_({"isSuccess": True}),
        ],
        register=False,
    )
    return [sleep, timer, awaiting, ingest]
