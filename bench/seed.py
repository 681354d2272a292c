"""Bulk seeding of suspended runs whose streams are exactly what the engine writes.

One template run is started through the engine itself; its stored events, inbox row,
run summary and pending row are then cloned with COPY, with the per-run fields
(run id, trigger event id, idempotency key, payload, wake-up time) replaced. The
pending projection's checkpoint is moved past the cloned events afterwards: the
rows it would derive from them are the ones written here.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

import psycopg
from workflow_runner import DomainEvent, WorkflowRegistry, run_id_for
from workflow_runner.durations import format_instant
from workflow_runner.engine import PENDING_PROJECTION, ingest_domain_event, project_pending
from workflow_runner.store import connect

from .common import TENANT


def seed_sleeping_runs(
    url: str,
    registry: WorkflowRegistry,
    n: int,
    wake_from: datetime,
    tenant: str = TENANT,
    wake_step: timedelta = timedelta(microseconds=1),
    key_prefix: str = "b",
    replace: bool = True,
    analyze: bool = True,
) -> list[str]:
    """Seed `n` bench-sleep runs of `tenant` suspended at their 1 s wait, due from
    `wake_from` on.

    Returns the run ids. Run i wakes at `wake_from + i * wake_step` (distinct, oldest
    first), its idempotency key is `key_prefix` + i and its trigger event id is
    `key_prefix` + "e" + i ("e" + i for the default prefix). `replace` empties the
    engine's tables first; otherwise the runs are added to what is there (another
    tenant's, or the same tenant's with a different `key_prefix`). `analyze`: VACUUM
    ANALYZE the database afterwards (seconds on a big one).
    """
    started_at = wake_from - timedelta(seconds=1)
    template_id = "tmpl" if key_prefix == "b" else f"tmpl-{key_prefix}"
    store = connect(url)
    try:
        template = DomainEvent(
            id=template_id,
            type="bench.sleep",
            payload={"id": template_id, "n": 0},
            tenant_id=tenant,
        )
        result = ingest_domain_event(store, template, started_at, registry)
        project_pending(store, started_at)
        run_id = result.started[0].run_id
        events = store.streams.load(tenant, run_id)
        inbox = store.inbox.get(tenant, template_id)
        pending = [p for p in store.pending.for_tenant(tenant, None, 5) if p.run_id == run_id]
    finally:
        store.close()
    if [e.type for e in events] != ["workflow.run-started", "workflow.step.waiting"]:
        raise RuntimeError(f"template run has an unexpected stream: {[e.type for e in events]}")
    assert inbox is not None and len(pending) == 1
    started_tmpl, waiting_tmpl = events[0].payload, events[1].payload
    definition = registry.latest("bench-sleep")
    run_ids: list[str] = []
    event_prefix = "e" if key_prefix == "b" else f"{key_prefix}e"
    with psycopg.connect(url, autocommit=False) as conn:
        if replace:
            conn.execute("DELETE FROM workflow_run_pending")
            conn.execute("DELETE FROM workflow_runs")
            conn.execute("DELETE FROM wf_events")
            conn.execute("DELETE FROM inbox")
            conn.execute("DELETE FROM run_results")
        else:
            # Only the template run goes: the clones below are the seeded runs.
            for table, column in (
                ("workflow_run_pending", "run_id"),
                ("workflow_runs", "run_id"),
                ("wf_events", "stream_id"),
                ("run_results", "run_id"),
            ):
                conn.execute(
                    f"DELETE FROM {table} WHERE tenant_id = %s AND {column} = %s", [tenant, run_id]
                )
            conn.execute(
                "DELETE FROM inbox WHERE tenant_id = %s AND event_id = %s", [tenant, template_id]
            )
        cur = conn.cursor()
        rows: list[dict[str, Any]] = []
        for i in range(n):
            key = f"{key_prefix}{i}"
            rid = run_id_for(definition.name, key)
            run_ids.append(rid)
            wake = wake_from + wake_step * i
            started = {
                **started_tmpl,
                "triggerEventRef": {"eventId": f"{event_prefix}{i}"},
                "idempotencyKey": key,
            }
            waiting = {
                **waiting_tmpl,
                "wakeAt": format_instant(wake),
                "resultsDelta": {"first": {"n": i}},
            }
            rows.append(
                {"i": i, "key": key, "run_id": rid, "wake": wake, "s": started, "w": waiting}
            )
        with cur.copy(
            "COPY inbox (tenant_id, event_id, source, type, detail, event_time, received_at,"
            " triggered_at) FROM STDIN"
        ) as copy:
            for r in rows:
                copy.write_row(
                    (
                        tenant,
                        f"{event_prefix}{r['i']}",
                        inbox.source,
                        inbox.type,
                        json.dumps({"id": r["key"], "n": r["i"]}),
                        None,
                        started_at,
                        started_at,
                    )
                )
        with cur.copy(
            "COPY wf_events (tenant_id, stream_id, stream_type, version, type, payload,"
            " metadata, recorded_at) FROM STDIN"
        ) as copy:
            for r in rows:
                copy.write_row(
                    (
                        tenant,
                        r["run_id"],
                        "workflow-run",
                        1,
                        events[0].type,
                        json.dumps(r["s"]),
                        "{}",
                        started_at,
                    )
                )
                copy.write_row(
                    (
                        tenant,
                        r["run_id"],
                        "workflow-run",
                        2,
                        events[1].type,
                        json.dumps(r["w"]),
                        "{}",
                        started_at,
                    )
                )
        with cur.copy(
            "COPY workflow_runs (tenant_id, run_id, workflow_name, status, version,"
            " definition_fingerprint, trigger_event_type, started_at, updated_at) FROM STDIN"
        ) as copy:
            for r in rows:
                copy.write_row(
                    (
                        tenant,
                        r["run_id"],
                        definition.name,
                        "waiting",
                        2,
                        definition.fingerprint,
                        "bench.sleep",
                        started_at,
                        started_at,
                    )
                )
        # The results a resume restores (0.2 keeps them in run_results, not on the stream).
        with cur.copy(
            "COPY run_results (tenant_id, run_id, key, value, awaited, version) FROM STDIN"
        ) as copy:
            for r in rows:
                copy.write_row((tenant, r["run_id"], "first", json.dumps({"n": r["i"]}), False, 2))
        p = pending[0]
        with cur.copy(
            "COPY workflow_run_pending (tenant_id, run_id, step_index, workflow_name,"
            " suspension_event_type, wake_at, definition_fingerprint, suspension_version)"
            " FROM STDIN"
        ) as copy:
            for r in rows:
                copy.write_row(
                    (
                        tenant,
                        r["run_id"],
                        p.step_index,
                        definition.name,
                        p.suspension_event_type,
                        r["wake"],
                        definition.fingerprint,
                        p.suspension_version,
                    )
                )
        conn.commit()
        # Every cloned event is already reflected in the pending rows above.
        conn.execute(
            "UPDATE projection_checkpoints SET last_xid = (SELECT max(xid) FROM wf_events),"
            " last_position = (SELECT max(position) FROM wf_events) WHERE name = %s",
            [PENDING_PROJECTION],
        )
        conn.commit()
    if analyze:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE")
    return run_ids
