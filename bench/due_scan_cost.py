"""Workload 3: one tenant's due query as the pending set grows, against the seeds'
events-table scan on the same data.

The data is synthetic but shaped like the engine's: per suspended run one pending
row and, in wf_events, its run-started and step.waiting events (payloads of the
engine's size and keys). `due` rows are due; every other row wakes within 30 days.
"""

from __future__ import annotations

import statistics
import time
from datetime import UTC, datetime
from typing import Any

import psycopg
from workflow_runner.store import connect
from workflow_runner.store.queries import query

from .common import TENANT

# The seeds' suspended-runs query (seeds/002, src/db/queries/suspended-runs.ts) on our
# events table: every suspension event whose JSON wakeAt/timeoutAt has passed. The
# seeds compare with now(); business time is passed in so both queries see one instant.
EVENTS_SCAN = """
SELECT * FROM wf_events
WHERE type = ANY(%(types)s)
  AND ((payload->>'wakeAt')::timestamptz < %(now)s
       OR (payload->>'timeoutAt')::timestamptz < %(now)s)
"""
SUSPENSION_TYPES = [
    "workflow.step.waiting",
    "workflow.step.waiting-for-event",
    "workflow.retry.scheduled",
]

# Rows [lo, hi) of the synthetic pending set; row g < due is due at %(now)s.
_SEED_PENDING = """
INSERT INTO workflow_run_pending (tenant_id, run_id, step_index, workflow_name,
    suspension_event_type, wake_at, definition_fingerprint, suspension_version)
SELECT %(tenant)s, md5('run' || g)::uuid, 1, 'bench-sleep', 'workflow.step.waiting',
       CASE WHEN g < %(due)s THEN %(now)s - interval '1 minute' + g * interval '1 ms'
            ELSE %(now)s + interval '1 minute' + (g %% 2592000) * interval '1 second' END,
       'fp', 2
FROM generate_series(%(lo)s, %(hi)s - 1) g
"""
_SEED_EVENTS = """
INSERT INTO wf_events (tenant_id, stream_id, stream_type, version, type, payload, recorded_at)
SELECT %(tenant)s, md5('run' || g)::uuid, 'workflow-run', v.version, v.type,
       CASE WHEN v.version = 1 THEN jsonb_build_object(
                'workflowName', 'bench-sleep', 'workflowVersion', 1,
                'triggerEventType', 'bench.sleep',
                'triggerEventRef', jsonb_build_object('eventId', 'e' || g),
                'definitionFingerprint', md5('fp'), 'idempotencyKey', 'k' || g)
            ELSE jsonb_build_object(
                'workflowName', 'bench-sleep', 'triggerEventType', 'bench.sleep',
                'stepIndex', 1, 'path', jsonb_build_array(jsonb_build_object('i', 1)),
                'definitionFingerprint', md5('fp'),
                'results', jsonb_build_object('first', jsonb_build_object('n', g)),
                'awaitedRefs', '{}'::jsonb,
                'wakeAt', to_char(p.wake_at AT TIME ZONE 'UTC',
                                  'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')) END,
       %(now)s - interval '1 hour'
FROM generate_series(%(lo)s, %(hi)s - 1) g
JOIN workflow_run_pending p ON p.tenant_id = %(tenant)s AND p.run_id = md5('run' || g)::uuid
CROSS JOIN (VALUES (1, 'workflow.run-started'), (2, 'workflow.step.waiting')) v(version, type)
"""


def _grow(url: str, lo: int, hi: int, due: int, now: datetime) -> float:
    params = {"tenant": TENANT, "lo": lo, "hi": hi, "due": due, "now": now}
    began = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as conn:
        for start in range(lo, hi, 200_000):
            chunk = {**params, "lo": start, "hi": min(hi, start + 200_000)}
            conn.execute(_SEED_PENDING, chunk)
            conn.execute(_SEED_EVENTS, chunk)
        conn.execute("VACUUM ANALYZE workflow_run_pending")
        conn.execute("VACUUM ANALYZE wf_events")
    return time.perf_counter() - began


def _time_due_query(url: str, now: datetime, repeats: int) -> tuple[list[float], int]:
    store = connect(url)
    try:
        timings = []
        rows = 0
        for _ in range(repeats):
            began = time.perf_counter()
            rows = len(store.pending.due(TENANT, now, 100))
            timings.append(time.perf_counter() - began)
        return timings, rows
    finally:
        store.close()


def _time_events_scan(url: str, now: datetime, repeats: int) -> tuple[list[float], int]:
    timings = []
    rows = 0
    with psycopg.connect(url, autocommit=True) as conn:
        for _ in range(repeats):
            began = time.perf_counter()
            rows = len(
                conn.execute(EVENTS_SCAN, {"types": SUSPENSION_TYPES, "now": now}).fetchall()
            )
            timings.append(time.perf_counter() - began)
    return timings, rows


def _explain(url: str, now: datetime) -> str:
    with psycopg.connect(url, autocommit=True) as conn:
        plan = conn.execute(
            "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + query("due_pending"),
            {"tenant_id": TENANT, "now": now, "limit": 100},
        ).fetchall()
    return "\n".join(line for (line,) in plan)


def _measure(url: str, now: datetime, due: int, repeats: int, scans: int) -> dict[str, Any]:
    due_times, due_rows = _time_due_query(url, now, repeats)
    scan_times, scan_rows = _time_events_scan(url, now, scans)
    if due_rows != due or scan_rows != due:
        raise RuntimeError(f"expected {due} due rows; due query {due_rows}, scan {scan_rows}")
    due_ms = statistics.median(due_times) * 1000
    scan_ms = statistics.median(scan_times) * 1000
    return {
        "due_query_ms": round(due_ms, 3),
        "due_query_p99_ms": round(sorted(due_times)[int(len(due_times) * 0.99) - 1] * 1000, 3),
        "events_scan_ms": round(scan_ms, 1),
        "ratio_vs_events_scan": round(scan_ms / due_ms, 1),
        "due_rows": due_rows,
    }


def run(url: str, small: int, large: int, due: int = 100, repeats: int = 300) -> dict[str, Any]:
    """Measure at `small` pending rows, grow the same tenant to `large`, measure again."""
    now = datetime.now(UTC).replace(microsecond=0)
    seed_small = _grow(url, 0, small, due, now)
    at_small = _measure(url, now, due, repeats, scans=5)
    seed_large = _grow(url, small, large, due, now)
    at_large = _measure(url, now, due, repeats, scans=3)
    plan = _explain(url, now)
    range_scan = "Index Scan using workflow_run_pending_tenant_wake_at_idx" in plan and (
        "wake_at <=" in plan
    )
    return {
        "small_rows": small,
        "large_rows": large,
        "due": due,
        "seed_s": round(seed_small + seed_large, 1),
        "small": at_small,
        "large": at_large,
        "growth_factor": round(at_large["due_query_ms"] / at_small["due_query_ms"], 2),
        "ratio_vs_events_scan": at_large["ratio_vs_events_scan"],
        "explain": plan,
        "index_range_scan": range_scan,
    }
