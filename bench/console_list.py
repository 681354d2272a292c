"""Workload 7: the console's runs list at a million runs.

One million run summaries (`workflow_runs`) across 1,000 tenants, five workflows, two
versions, every status, changes spread over 30 days, like a busy deployment's. The
console's runs list page is rendered through its WSGI application (queries, HTML and
all), for the filters an operator uses: none, failed, one workflow, one workflow and
version, one tenant, an idempotency key, the last day, and the 50th page of the
unfiltered list (keyset pagination: it must cost what page 1 costs).

Also measured: what the indexes this list needs cost every pass, as the time of the
run-summary upsert a pass makes, with and without them, on the same table.
"""

from __future__ import annotations

import io
import time
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

import psycopg
import sample_workflows  # noqa: F401  (the console shows the samples' versions)
from workflow_runner.console import ConsoleApp, ConsoleConfig
from workflow_runner.definition import default_registry
from workflow_runner.engine.run_lookup import RunFilter, list_runs
from workflow_runner.store import connect

from .common import percentile

WORKFLOWS = ["user-onboarding", "order-approval", "inventory-sync", "webhook-delivery", "billing"]
NOW = datetime(2026, 2, 1, tzinfo=UTC)

# One row per g: tenant g % 1000, workflow g % 5, a status by g's hash, a change in
# the 30 days before NOW, version 2 for a third of the rows.
_SEED = """
INSERT INTO workflow_runs (tenant_id, run_id, workflow_name, status, version,
    definition_fingerprint, trigger_event_type, started_at, updated_at, workflow_version)
SELECT ('7c1d2a3e-0000-4000-8000-' || lpad(to_hex(g %% 1000), 12, '0'))::uuid,
       gen_random_uuid(),
       (%(workflows)s::text[])[1 + g %% 5],
       CASE WHEN h < 70 THEN 'completed' WHEN h < 90 THEN 'waiting' WHEN h < 95 THEN 'failed'
            WHEN h < 99 THEN 'cancelled' ELSE 'running' END,
       4, repeat('f', 64), 'bench.started',
       %(now)s - make_interval(secs => (g * 2.592)::float8) - interval '1 hour',
       %(now)s - make_interval(secs => (g * 2.592)::float8),
       CASE WHEN g %% 3 = 0 THEN 2 ELSE 1 END
FROM (SELECT g, abs(hashint4(g)) %% 100 AS h FROM generate_series(%(lo)s, %(hi)s - 1) g) s
"""

_INDEXES = [
    "workflow_runs_status_recent_idx",
    "workflow_runs_workflow_recent_idx",
    "workflow_runs_run_id_idx",
]


def _seed(url: str, n: int) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        step = 100_000
        for lo in range(0, n, step):
            conn.execute(
                _SEED, {"workflows": WORKFLOWS, "now": NOW, "lo": lo, "hi": min(n, lo + step)}
            )
        conn.execute("VACUUM ANALYZE workflow_runs")


_HOST = "127.0.0.1:8080"


def _render(app: ConsoleApp, query: dict[str, str]) -> float:
    """Milliseconds to answer GET / with `query` (the whole page)."""
    environ = {
        "REQUEST_METHOD": "GET",
        "PATH_INFO": "/",
        "QUERY_STRING": urlencode(query),
        "HTTP_HOST": _HOST,
        "wsgi.input": io.BytesIO(b""),
    }
    status: list[str] = []
    began = time.perf_counter()
    body = b"".join(app(environ, lambda s, h: status.append(s)))
    elapsed = (time.perf_counter() - began) * 1000
    if not status[0].startswith("200") or b"<h1>Runs" not in body:
        raise RuntimeError(f"the runs list answered {status[0]} for {query}")
    return elapsed


def _sample(url: str, rows: int) -> list[tuple[str, str]]:
    with psycopg.connect(url) as conn:
        return [
            (str(t), str(r))
            for t, r in conn.execute(
                "SELECT tenant_id::text, run_id::text FROM workflow_runs TABLESAMPLE SYSTEM (1) "
                "LIMIT %s",
                (rows,),
            ).fetchall()
        ]


def _upsert_us(url: str, picked: list[tuple[str, str]], rounds: int = 5) -> float:
    """Microseconds per run-summary upsert (as a pass writes it) on existing rows: the
    median of `rounds` rounds over the same rows (the first warms their pages)."""
    store = connect(url)
    per_round = []
    try:
        for round_ in range(rounds + 1):
            # One transaction: the figure is the statement's own cost (index maintenance
            # included), not the commit's, which a pass pays once for all its writes.
            began = time.perf_counter()
            with store.transaction():
                for n, (tenant, run_id) in enumerate(picked):
                    store.runs.upsert(
                        tenant,
                        run_id,
                        "order-approval",
                        "waiting",
                        5 + n,
                        "f" * 64,
                        "bench.started",
                        NOW + timedelta(seconds=n + round_),
                        workflow_version=1,
                    )
            if round_:
                per_round.append((time.perf_counter() - began) / max(1, len(picked)) * 1e6)
    finally:
        store.close()
    return percentile(per_round, 50)


def run(url: str, n: int, repeats: int = 15) -> dict[str, Any]:
    """Seed `n` runs, render the runs list per scenario `repeats` times, report ms."""
    began = time.perf_counter()
    _seed(url, n)
    seeded_s = round(time.perf_counter() - began, 1)
    registry = default_registry()
    config = ConsoleConfig(
        database_url=url,
        registry=registry,
        database_label="bench",
        allowed_hosts=frozenset({_HOST}),  # the Host every request below names
    )
    app = ConsoleApp(config)
    store = connect(url)
    try:
        cursor = None
        for _ in range(49):  # the 50th page of the unfiltered list
            cursor = list_runs(store, registry, RunFilter(), cursor, 50).next_cursor
        with psycopg.connect(url) as conn:
            some = conn.execute(
                "SELECT run_id::text FROM workflow_runs WHERE status = 'failed' LIMIT 1"
            ).fetchone()
    finally:
        store.close()
    assert cursor is not None and some is not None
    tenant = "7c1d2a3e-0000-4000-8000-" + "0" * 9 + "1f4"
    scenarios: dict[str, dict[str, str]] = {
        "all": {},
        "failed": {"status": "failed"},
        "workflow": {"workflow": "order-approval"},
        "workflow_version": {"workflow": "order-approval", "version": "2"},
        "tenant": {"tenant": tenant},
        "tenant_failed": {"tenant": tenant, "status": "failed"},
        "key": {"key": "r-3"},
        "last_day": {"since": "2026-01-31T00:00:00Z"},
        "page_50": {"after": cursor},
    }
    timings: dict[str, list[float]] = {name: [] for name in scenarios}
    for query in scenarios.values():
        _render(app, query)  # warm the plan and the cache once
    for _ in range(repeats):
        for name, query in scenarios.items():
            timings[name].append(_render(app, query))
    app.pool.close()
    everything = [t for values in timings.values() for t in values]
    picked = _sample(url, 2000)
    with_indexes = _upsert_us(url, picked)
    with psycopg.connect(url, autocommit=True) as conn:
        for name in _INDEXES:
            conn.execute(f"DROP INDEX {name}".encode())
    without = _upsert_us(url, picked)
    return {
        "n": n,
        "seed_s": seeded_s,
        "repeats": repeats,
        "p50": round(percentile(everything, 50), 1),
        "p95": round(percentile(everything, 95), 1),
        "scenarios": {
            name: {
                "p50": round(percentile(values, 50), 1),
                "p95": round(percentile(values, 95), 1),
            }
            for name, values in timings.items()
        },
        "upsert_run_us": {
            "with_console_indexes": round(with_indexes, 1),
            "without": round(without, 1),
        },
    }
