-- Named queries of the operator console and `wfr runs list` across tenants. Every list
-- is one keyset page, newest change first, on (updated_at, tenant_id, run_id): no OFFSET,
-- so page 1000 costs what page 1 costs. Optional filters are NULL when absent; each
-- query has one fixed access path (its leading index columns are always equalities), so
-- a generic plan of a prepared statement keeps using the index.

-- name: console_runs_by_status
-- Runs across tenants, one ordered index range per status in %(statuses)s, merged
-- (workflow_runs_status_recent_idx).
SELECT r.* FROM unnest(%(statuses)s::text[]) AS s(status)
CROSS JOIN LATERAL (
    SELECT w.tenant_id::text AS tenant_id, w.run_id::text AS run_id, w.workflow_name,
           w.status, w.version, w.definition_fingerprint, w.trigger_event_type,
           w.started_at, w.updated_at, w.workflow_version
    FROM workflow_runs w
    WHERE w.status = s.status
      AND w.updated_at >= %(since)s AND w.updated_at <= %(until)s
      AND (w.updated_at, w.tenant_id, w.run_id)
          < (%(before_at)s, %(before_tenant)s::uuid, %(before_run)s::uuid)
    ORDER BY w.updated_at DESC, w.tenant_id DESC, w.run_id DESC
    LIMIT %(limit)s
) r
ORDER BY r.updated_at DESC, r.tenant_id DESC, r.run_id DESC
LIMIT %(limit)s;

-- name: console_runs_by_workflow
-- Runs of one workflow (optionally one version, one tenant), per status as above
-- (workflow_runs_workflow_recent_idx). Rows older releases wrote have no version: they
-- match by the fingerprints of that version.
SELECT r.* FROM unnest(%(statuses)s::text[]) AS s(status)
CROSS JOIN LATERAL (
    SELECT w.tenant_id::text AS tenant_id, w.run_id::text AS run_id, w.workflow_name,
           w.status, w.version, w.definition_fingerprint, w.trigger_event_type,
           w.started_at, w.updated_at, w.workflow_version
    FROM workflow_runs w
    WHERE w.workflow_name = %(workflow_name)s AND w.status = s.status
      AND w.updated_at >= %(since)s AND w.updated_at <= %(until)s
      AND (w.updated_at, w.tenant_id, w.run_id)
          < (%(before_at)s, %(before_tenant)s::uuid, %(before_run)s::uuid)
      AND (%(tenant_id)s::uuid IS NULL OR w.tenant_id = %(tenant_id)s::uuid)
      AND (%(workflow_version)s::integer IS NULL
           OR w.workflow_version = %(workflow_version)s::integer
           OR (w.workflow_version IS NULL
               AND w.definition_fingerprint = ANY(%(fingerprints)s::text[])))
    ORDER BY w.updated_at DESC, w.tenant_id DESC, w.run_id DESC
    LIMIT %(limit)s
) r
ORDER BY r.updated_at DESC, r.tenant_id DESC, r.run_id DESC
LIMIT %(limit)s;

-- name: console_runs_by_tenant
-- One tenant's runs, per status as above (workflow_runs_tenant_status_idx).
SELECT r.* FROM unnest(%(statuses)s::text[]) AS s(status)
CROSS JOIN LATERAL (
    SELECT w.tenant_id::text AS tenant_id, w.run_id::text AS run_id, w.workflow_name,
           w.status, w.version, w.definition_fingerprint, w.trigger_event_type,
           w.started_at, w.updated_at, w.workflow_version
    FROM workflow_runs w
    WHERE w.tenant_id = %(tenant_id)s::uuid AND w.status = s.status
      AND w.updated_at >= %(since)s AND w.updated_at <= %(until)s
      AND (w.updated_at, w.tenant_id, w.run_id)
          < (%(before_at)s, %(before_tenant)s::uuid, %(before_run)s::uuid)
    ORDER BY w.updated_at DESC, w.run_id DESC
    LIMIT %(limit)s
) r
ORDER BY r.updated_at DESC, r.tenant_id DESC, r.run_id DESC
LIMIT %(limit)s;

-- name: console_runs_by_ids
-- Runs with one of the given ids in any tenant (an idempotency key's candidate run ids),
-- with the other filters (workflow_runs_run_id_idx).
SELECT w.tenant_id::text AS tenant_id, w.run_id::text AS run_id, w.workflow_name, w.status,
       w.version, w.definition_fingerprint, w.trigger_event_type, w.started_at, w.updated_at,
       w.workflow_version
FROM workflow_runs w
WHERE w.run_id = ANY(%(run_ids)s::uuid[])
  AND w.status = ANY(%(statuses)s::text[])
  AND w.updated_at >= %(since)s AND w.updated_at <= %(until)s
  AND (w.updated_at, w.tenant_id, w.run_id)
      < (%(before_at)s, %(before_tenant)s::uuid, %(before_run)s::uuid)
  AND (%(tenant_id)s::uuid IS NULL OR w.tenant_id = %(tenant_id)s::uuid)
  AND (%(workflow_name)s::text IS NULL OR w.workflow_name = %(workflow_name)s)
  AND (%(workflow_version)s::integer IS NULL
       OR w.workflow_version = %(workflow_version)s::integer
       OR (w.workflow_version IS NULL
           AND w.definition_fingerprint = ANY(%(fingerprints)s::text[])))
ORDER BY w.updated_at DESC, w.tenant_id DESC, w.run_id DESC
LIMIT %(limit)s;

-- name: console_runs_in_id_range
-- Runs whose id lies in [low, high] (an id prefix), optionally of one tenant.
SELECT tenant_id::text AS tenant_id, run_id::text AS run_id, workflow_name, status, version,
       definition_fingerprint, trigger_event_type, started_at, updated_at, workflow_version
FROM workflow_runs
WHERE run_id BETWEEN %(low)s::uuid AND %(high)s::uuid
  AND (%(tenant_id)s::uuid IS NULL OR tenant_id = %(tenant_id)s::uuid)
ORDER BY run_id, tenant_id
LIMIT %(limit)s;

-- name: console_workflow_names
-- The workflow names that have runs: a skip scan over workflow_runs_workflow_recent_idx
-- (one index probe per name, not a scan of every run).
WITH RECURSIVE names AS (
    (SELECT workflow_name FROM workflow_runs ORDER BY workflow_name LIMIT 1)
    UNION ALL
    SELECT (SELECT w.workflow_name FROM workflow_runs w
            WHERE w.workflow_name > n.workflow_name
            ORDER BY w.workflow_name LIMIT 1)
    FROM names n
    WHERE n.workflow_name IS NOT NULL
)
SELECT workflow_name FROM names WHERE workflow_name IS NOT NULL;

-- name: console_pending
-- Pending rows across tenants (or of one), soonest first, one keyset page on
-- (wake_at, tenant_id, run_id): per tenant an ordered range of
-- workflow_run_pending_tenant_wake_at_idx, merged.
SELECT p.* FROM tenants t
CROSS JOIN LATERAL (
    SELECT q.tenant_id::text AS tenant_id, q.run_id::text AS run_id, q.step_index,
           q.workflow_name, q.suspension_event_type, q.wake_at, q.retry_attempt,
           q.wait_event_type, q.match_expr, q.awaited_event_id, q.suspension_version,
           q.leased_until
    FROM workflow_run_pending q
    WHERE q.tenant_id = t.tenant_id
      AND q.wake_at <= %(due_before)s
      AND (q.wake_at, q.tenant_id, q.run_id)
          > (%(after_at)s, %(after_tenant)s::uuid, %(after_run)s::uuid)
      AND (%(workflow_name)s::text IS NULL OR q.workflow_name = %(workflow_name)s)
    ORDER BY q.wake_at, q.run_id
    LIMIT %(limit)s
) p
WHERE (%(tenant_id)s::uuid IS NULL OR t.tenant_id = %(tenant_id)s::uuid)
ORDER BY p.wake_at, p.tenant_id, p.run_id
LIMIT %(limit)s;

-- name: console_pending_of_run
-- One run's pending row (at most one: D1).
SELECT tenant_id::text AS tenant_id, run_id::text AS run_id, step_index, workflow_name,
       suspension_event_type, wake_at, retry_attempt, wait_event_type, match_expr,
       awaited_event_id, suspension_version, leased_until
FROM workflow_run_pending
WHERE tenant_id = %(tenant_id)s AND run_id = %(run_id)s
ORDER BY step_index;
