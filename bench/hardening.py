"""Workload 11 (issue 11): a new wait's look-back over many stored events, and one
awaited event waking tens of thousands of waits.

    python -m bench.hardening [--lookback-events N] [--broadcast-runs N]

runs just these two on a fresh embedded PostgreSQL (default durability), merges their
figures into bench/results.json under "hardening" and re-renders docs/BENCHMARKS.md;
`make bench` runs them with the others.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from workflow_runner import DomainEvent, WorkflowRegistry, define_workflow, on_event
from workflow_runner import engine as ops
from workflow_runner.aws.inprocess import InMemoryResumeQueue
from workflow_runner.clock import ManualClock
from workflow_runner.embedded import start_embedded_postgres
from workflow_runner.engine.inbox_writes import store_inbox_event
from workflow_runner.store import Sql, connect

from .common import TENANT, fresh_database, summary

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
ROOT = Path(__file__).resolve().parent.parent


class _CountingSql(Sql):
    statements = 0

    def all(self, name: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        _CountingSql.statements += 1
        return super().all(name, params)

    def one(self, name: str, params: dict[str, Any]) -> dict[str, Any] | None:
        _CountingSql.statements += 1
        return super().one(name, params)

    def run(self, name: str, params: dict[str, Any]) -> int:
        _CountingSql.statements += 1
        return super().run(name, params)


def _match(path: str, value: Any) -> dict[str, Any]:
    return {
        "version": 1,
        "expr": {"kind": "atom", "path": [path], "op": {"kind": "eq", "value": value}},
    }


def _registry() -> WorkflowRegistry:
    registry = WorkflowRegistry()
    registry.register(
        define_workflow(
            name="bench-late-approval",
            trigger=on_event("bench.placed"),
            idempotency_key=lambda e: e.payload["orderId"],
            awaits={"approved": "bench.approved"},
            register=False,
            steps=lambda s: [
                s.wait(for_="P1D"),
                s.wait_for_event(
                    "bench.approved",
                    match=lambda ctx: _match("orderId", ctx.event.payload["orderId"]),
                    timeout="P3D",
                ),
                s.return_({"isSuccess": True}),
            ],
        )
    )
    registry.register(
        define_workflow(
            name="bench-sale-watch",
            trigger=on_event("bench.watch"),
            idempotency_key=lambda e: e.payload["k"],
            awaits={"sale": "bench.sale"},
            register=False,
            steps=lambda s: [
                s.wait_for_event("bench.sale", match=_match("region", "eu"), timeout="P7D"),
                s.return_({"isSuccess": True}),
            ],
        )
    )
    return registry


def lookback(url: str, events: int, waits: int = 20) -> dict[str, Any]:
    """`events` stored approvals of other orders; then `waits` runs reach their wait for
    an approval one at a time, half of which find theirs among them. The time of the
    projection call that creates the wait (its look-back) is the figure."""
    registry = _registry()
    store = connect(url)
    try:
        for start in range(0, events, 1000):
            with store.transaction(), store.pipeline():
                for i in range(start, min(events, start + 1000)):
                    at = T0 + timedelta(hours=1, milliseconds=i)
                    detail = {"orderId": f"o{i}", "approver": "ann", "amount": i}
                    store_inbox_event(
                        store, DomainEvent(f"a{i}", "bench.approved", detail, TENANT, at), at
                    )
        for i in range(waits):
            placed = DomainEvent(f"p{i}", "bench.placed", {"orderId": f"w{i}"}, TENANT, T0)
            ops.ingest_domain_event(store, placed, T0, registry)
            if i % 2 == 0:  # half of them find their approval in the look-back
                approval = DomainEvent(
                    f"own{i}", "bench.approved", {"orderId": f"w{i}"}, TENANT, T0
                )
                with store.transaction(), store.pipeline():
                    store_inbox_event(store, approval, T0)
        ops.project_pending(store, T0)
        store.conn.execute("ANALYZE inbox")
        reached = T0 + timedelta(days=1)
        times: list[float] = []
        found = 0
        for row in sorted(store.pending.due(TENANT, reached, waits), key=lambda r: r.run_id):
            ops.resume_run(store, TENANT, row.run_id, 0, reached, registry=registry)
            started = time.perf_counter()
            found += len(ops.project_pending(store, reached).woken)
            times.append(time.perf_counter() - started)
        return {
            "stored_events": events,
            "waits": len(times),
            "found": found,
            "look_back_ms": summary(times, scale=1000.0),
        }
    finally:
        store.close()


def broadcast(url: str, runs: int) -> dict[str, Any]:
    """`runs` runs wait for the same sale; one event wakes them all (EventWakeup's
    `wake_and_enqueue`, the resume queue in memory: SQS itself is not measured)."""
    registry = _registry()
    store = connect(url)
    try:
        started = time.perf_counter()
        # Set up as TriggerProjection ingests (one transaction per batch, few statements
        # per batch), in batches of 500 rather than its SQS batches of 10.
        for start in range(0, runs, 500):
            watches = [
                DomainEvent(f"w{i}", "bench.watch", {"k": f"k{i}"}, TENANT, T0)
                for i in range(start, min(runs, start + 500))
            ]
            ops.ingest_domain_events(store, watches, T0, registry)
        ops.project_pending(store, T0)
        setup_s = time.perf_counter() - started
    finally:
        store.close()
    counted = connect(url, sql_type=_CountingSql)
    try:
        sale_at = T0 + timedelta(hours=1)
        sale = DomainEvent("sale", "bench.sale", {"region": "eu"}, TENANT, sale_at)
        queue = InMemoryResumeQueue(ManualClock(sale_at))
        _CountingSql.statements = 0
        started = time.perf_counter()
        result = ops.wake_and_enqueue(counted, queue, sale, sale_at)
        elapsed = time.perf_counter() - started
        statements = _CountingSql.statements
        row = counted.conn.execute(
            "SELECT count(*) AS n, count(DISTINCT stream_id) AS runs FROM wf_events"
            " WHERE type = 'workflow.step.event-matched'"
        ).fetchone()
    finally:
        counted.close()
    assert row is not None
    return {
        "waiting_runs": runs,
        "woken": result.matched,
        "enqueued": result.enqueued,
        "matched_events": row["n"],
        "distinct_runs": row["runs"],
        "seconds": round(elapsed, 3),
        "woken_per_s": round(result.matched / elapsed, 1) if elapsed else None,
        "statements": statements,
        "setup_s": round(setup_s, 1),
    }


def run(admin_url: str, lookback_events: int, broadcast_runs: int) -> dict[str, Any]:
    """Both workloads, each on a fresh database (with the machine's load: it is shared)."""
    load = [round(x, 2) for x in os.getloadavg()]
    with fresh_database(admin_url, "bench_lookback") as url:
        looked = lookback(url, lookback_events)
    with fresh_database(admin_url, "bench_broadcast") as url:
        woke = broadcast(url, broadcast_runs)
    return {
        "lookback": looked,
        "broadcast": woke,
        "load_average": {"start": load, "end": [round(x, 2) for x in os.getloadavg()]},
    }


def main() -> None:
    from .report import write_report

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lookback-events", type=int, default=100_000)
    parser.add_argument("--broadcast-runs", type=int, default=50_000)
    args = parser.parse_args()
    server, admin_url = start_embedded_postgres(fast=False)
    try:
        figures = run(admin_url, args.lookback_events, args.broadcast_runs)
    finally:
        server.cleanup()
    figures["generated_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    print(json.dumps(figures, indent=2))
    path = ROOT / "bench" / "results.json"
    results = json.loads(path.read_text())
    results["hardening"] = figures
    path.write_text(json.dumps(results, indent=2, default=str) + "\n")
    write_report(results, ROOT / "docs" / "BENCHMARKS.md", ROOT / "bench" / "results.png")


if __name__ == "__main__":
    main()
