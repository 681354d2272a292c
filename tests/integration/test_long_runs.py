"""A long run stores each result once: what a suspension appends does not grow with the
run (bench/long_run.py measures the time; this pins the bytes, which are exact)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest
from workflow_runner.store import NewEvent, Store
from workflow_runner.store.queries import query
from workflow_runner.store.sql import runs_params

from bench import long_run
from tests.support import TENANT_A


def test_bytes_per_suspension_do_not_grow_with_the_run(db_url: str) -> None:
    measured = long_run.run(db_url, 200)
    assert measured["events"] == 2 * 200 + 2  # started, 200 x (waiting, resumed), completed
    # Suspension 190 appends what suspension 10 did (item numbers grow by a digit).
    assert measured["bytes_per_suspension_ratio_1000_vs_10"] <= 1.02


def test_a_stall_of_the_machine_lands_on_both_measuring_points_alike(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The two points are resumed in turn: 30 consecutive slow resumes (autovacuum, a
    checkpoint) just before the run's last leave the ratio alone. Measured one point
    after the other, such a stall made the late point's median 1.7 times the early one's.
    The measurement's clock is a fake one: every resume takes 1 ms, a stalled one 21 ms."""
    resume = long_run.resume_run
    calls = 0
    stall: range = range(0)
    now = 0.0

    def perf_counter() -> float:
        nonlocal now
        now += 1e-6  # every reading moves on a little (the full loads take 1 us)
        return now

    def stalled(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls, now
        calls += 1
        now += 0.021 if calls in stall else 0.001
        return resume(*args, **kwargs)

    monkeypatch.setattr(long_run, "resume_run", stalled)
    monkeypatch.setattr(long_run, "time", SimpleNamespace(perf_counter=perf_counter))
    long_run.run(db_url, 200)  # counts the resumes: the stall is the 30 before the last
    stall, calls = range(calls - 30, calls), 0
    measured = long_run.run(db_url, 200, label="stalled")
    assert measured["resume_ratio_1000_vs_10"] == 1.0, measured


def test_a_resume_batch_reads_each_runs_tail_by_index_however_long_its_stream(
    store: Store,
) -> None:
    """The batch read of stream tails (`load_run_tail`) must reach each run's first
    event and its last pass's events by two index range reads: read by filter, a run
    through 2,000 events made every resume read all of them (long_run ratio 2.1)."""
    now = datetime(2026, 1, 5, tzinfo=UTC)
    runs = [str(uuid.uuid4()) for _ in range(3)]
    for run_id in runs:
        events = [NewEvent("e", {"i": i}) for i in range(2000)]
        store.streams.append(TENANT_A, run_id, "workflow-run", 0, events, now)
        store.runs.upsert(TENANT_A, run_id, "w", "waiting", 1999, "fp", "t", now)
    store.conn.execute("ANALYZE wf_events")
    params = runs_params([(TENANT_A, r) for r in runs])

    rows = store.conn.execute(query("load_run_tail"), params).fetchall()
    plan = "\n".join(
        r["QUERY PLAN"]
        for r in store.conn.execute(
            "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + query("load_run_tail"), params
        ).fetchall()
    )

    assert [(r["n"], r["version"]) for r in rows] == [
        (n, v) for n in (1, 2, 3) for v in (1, 1999, 2000)
    ]
    assert "Seq Scan on wf_events" not in plan, plan
    assert "Rows Removed by Filter" not in plan.split("wf_events")[-1], plan
