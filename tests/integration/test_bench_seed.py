"""The benchmarks' bulk seeder: what it writes for its existing callers, and a second
tenant's runs added next to a first tenant's, resumable like runs the engine wrote."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from workflow_runner import run_id_for
from workflow_runner.engine import ResumeRequestItem, resume_runs
from workflow_runner.store import Store

from bench.common import TENANT, bench_registry
from bench.seed import seed_sleeping_runs

OTHER = "7c1d2a3e-0000-4000-8000-00000000b00b"
WAKE = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


def test_the_default_seed_is_one_tenants_runs_a_microsecond_apart(
    store: Store, db_url: str
) -> None:
    run_ids = seed_sleeping_runs(db_url, bench_registry(), 5, WAKE)
    assert run_ids == [run_id_for("bench-sleep", f"b{i}") for i in range(5)]
    pending = store.pending.for_tenant(TENANT)
    assert [(p.run_id, p.wake_at) for p in pending] == [
        (run_ids[i], WAKE + timedelta(microseconds=i)) for i in range(5)
    ]
    assert store.inbox.get(TENANT, "e4") is not None
    assert store.inbox.tenants() == [TENANT]


def test_a_second_tenants_runs_join_the_first_and_resume(store: Store, db_url: str) -> None:
    registry = bench_registry()
    first = seed_sleeping_runs(db_url, registry, 3, WAKE)
    second = seed_sleeping_runs(
        db_url,
        registry,
        4,
        WAKE + timedelta(seconds=5),
        OTHER,
        wake_step=timedelta(milliseconds=100),
        key_prefix="nb",
        replace=False,
        analyze=False,
    )
    assert [p.run_id for p in store.pending.for_tenant(TENANT)] == first  # untouched
    rows = store.pending.for_tenant(OTHER)
    assert [(p.run_id, p.wake_at) for p in rows] == [
        (second[i], WAKE + timedelta(seconds=5, milliseconds=100 * i)) for i in range(4)
    ]  # and no template run left behind
    assert len(store.runs.for_tenant(OTHER, "bench-sleep")) == 4
    results = resume_runs(
        store,
        [ResumeRequestItem(OTHER, r, rows[0].step_index) for r in second],
        WAKE + timedelta(seconds=10),
        registry,
    )
    assert [getattr(r, "outcome", r) for r in results] == ["completed"] * 4
