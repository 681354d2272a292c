-- Named queries of the due scan (workflow_runner.due_scan) and the connection cache.

-- name: ping_connection
-- Health check of a cached connection before a warm invocation uses it.
SELECT 1 AS ok;

-- name: tenants_with_due_rows
-- Tenants having a pending row due before the horizon whose lease is free. A loose
-- index scan (recursive CTE) hops over the (tenant_id, wake_at) index one tenant at a
-- time, so the cost grows with the number of tenants, not of pending rows; each hop's
-- probe reads the tenant's earliest free row only.
WITH RECURSIVE tenant_ids AS (
    (SELECT tenant_id FROM workflow_run_pending ORDER BY tenant_id LIMIT 1)
    UNION ALL
    SELECT (SELECT p.tenant_id FROM workflow_run_pending p
            WHERE p.tenant_id > t.tenant_id ORDER BY p.tenant_id LIMIT 1)
    FROM tenant_ids t
    WHERE t.tenant_id IS NOT NULL
)
SELECT t.tenant_id::text AS tenant_id, d.oldest
FROM tenant_ids t
CROSS JOIN LATERAL (
    SELECT p.wake_at AS oldest
    FROM workflow_run_pending p
    WHERE p.tenant_id = t.tenant_id AND p.wake_at < %(horizon)s
      AND (p.leased_until IS NULL OR p.leased_until <= %(now)s)
    ORDER BY p.wake_at
    LIMIT 1
) d
WHERE t.tenant_id IS NOT NULL
ORDER BY d.oldest, t.tenant_id;

-- name: lease_due_rows
-- Claim up to %(limit)s of a tenant's rows due before the horizon whose lease is free,
-- oldest first. SKIP LOCKED plus the lease in the same statement: two scanners never
-- hand out the same row, and a row in flight is not handed out again until its lease ends.
UPDATE workflow_run_pending p
SET leased_until = %(lease_until)s
FROM (
    SELECT tenant_id, run_id, step_index
    FROM workflow_run_pending
    WHERE tenant_id = %(tenant_id)s AND wake_at < %(horizon)s
      AND (leased_until IS NULL OR leased_until <= %(now)s)
    ORDER BY wake_at, run_id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
) due
WHERE p.tenant_id = due.tenant_id AND p.run_id = due.run_id AND p.step_index = due.step_index
RETURNING p.run_id::text AS run_id, p.step_index, p.wake_at;

-- name: lock_tenant_leases
-- Serialise the due scan's count-then-lease for one tenant, so two scans can never both
-- see room under the tenant's share or cap and together lease past it.
SELECT pg_advisory_xact_lock(hashtextextended(%(tenant_id)s || '|due-scan-leases', 11));

-- name: tenant_rows_in_flight
-- A tenant's rows in flight: leased, the lease not ended, and no resume or end of the
-- run on its stream after the suspension (a resume that committed is no longer in
-- flight, although the pending projection drops or replaces its row only later). Read
-- from the partial index of leased rows, each count stopping at its limit (LIMIT 0
-- counts nothing): those already due, whose requests the queue shows its consumers
-- now, and all of them.
SELECT
    (SELECT count(*) FROM (
        SELECT 1 FROM workflow_run_pending p
        WHERE p.tenant_id = %(tenant_id)s AND p.leased_until IS NOT NULL
          AND p.leased_until > %(now)s AND p.wake_at <= %(now)s
          AND NOT EXISTS (SELECT 1 FROM wf_events e
                          WHERE e.tenant_id = p.tenant_id AND e.stream_id = p.run_id
                            AND e.version > p.suspension_version
                            AND e.type = ANY(%(moved_types)s))
        LIMIT %(due_limit)s) d) AS due,
    (SELECT count(*) FROM (
        SELECT 1 FROM workflow_run_pending p
        WHERE p.tenant_id = %(tenant_id)s AND p.leased_until IS NOT NULL
          AND p.leased_until > %(now)s
          AND NOT EXISTS (SELECT 1 FROM wf_events e
                          WHERE e.tenant_id = p.tenant_id AND e.stream_id = p.run_id
                            AND e.version > p.suspension_version
                            AND e.type = ANY(%(moved_types)s))
        LIMIT %(all_limit)s) a) AS total;

-- name: lease_named_rows
-- Lease many named rows whose lease is free (the projection hands new suspensions due
-- soon, and the look-back's matches, to the queue itself).
UPDATE workflow_run_pending p
SET leased_until = %(lease_until)s
FROM unnest(%(tenant_ids)s::uuid[], %(run_ids)s::uuid[], %(step_indexes)s::int[])
     AS r(tenant_id, run_id, step_index)
WHERE p.tenant_id = r.tenant_id AND p.run_id = r.run_id AND p.step_index = r.step_index
  AND (p.leased_until IS NULL OR p.leased_until <= %(now)s)
RETURNING p.tenant_id::text AS tenant_id, p.run_id::text AS run_id, p.step_index, p.wake_at;

-- name: lease_matched_rows
-- Lease up to %(limit)s of a tenant's rows awaited events matched whose lease is free:
-- what the database says is woken and not on its way to the queue yet. SKIP LOCKED, so
-- concurrent invocations for the same event take disjoint rows.
UPDATE workflow_run_pending p
SET leased_until = %(lease_until)s
FROM (
    SELECT tenant_id, run_id, step_index
    FROM workflow_run_pending
    WHERE tenant_id = %(tenant_id)s AND awaited_event_id = ANY(%(event_ids)s::text[])
      AND (leased_until IS NULL OR leased_until <= %(now)s)
    ORDER BY run_id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
) m
WHERE p.tenant_id = m.tenant_id AND p.run_id = m.run_id AND p.step_index = m.step_index
RETURNING p.run_id::text AS run_id, p.step_index, p.wake_at;

-- name: release_lease
-- Give a row back when the queue refused its request (only the lease we set).
UPDATE workflow_run_pending
SET leased_until = NULL
WHERE tenant_id = %(tenant_id)s AND run_id = %(run_id)s AND step_index = %(step_index)s
  AND leased_until = %(lease_until)s;

-- name: lock_cron_state
-- A tenant's cron position for one workflow, locked so concurrent scans serialise.
SELECT last_fire_at FROM cron_state
WHERE tenant_id = %(tenant_id)s AND workflow_name = %(workflow_name)s
FOR UPDATE;

-- name: init_cron_state
-- First sight of a tenant and cron workflow: start counting from now (no backfill).
INSERT INTO cron_state (tenant_id, workflow_name, last_fire_at)
VALUES (%(tenant_id)s, %(workflow_name)s, %(now)s)
ON CONFLICT (tenant_id, workflow_name) DO NOTHING;

-- name: advance_cron_state
-- Record the last scheduled instant started.
UPDATE cron_state SET last_fire_at = %(last_fire_at)s
WHERE tenant_id = %(tenant_id)s AND workflow_name = %(workflow_name)s;

-- name: next_wake_at
-- The earliest wake_at among pending rows not in flight (the in-process driver's next stop).
SELECT min(wake_at) AS wake_at FROM workflow_run_pending
WHERE leased_until IS NULL OR leased_until <= %(now)s;
