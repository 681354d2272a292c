-- Named queries of the `wfr` operator commands and `wfr doctor`. Tenant filters are
-- optional (NULL: every tenant) only where an operator checks the whole database.

-- name: run_dispatch_events
-- Every event of the dispatch streams of one run's fire-and-forget deliveries.
SELECT e.position, e.tenant_id::text AS tenant_id, e.stream_id::text AS stream_id,
       e.stream_type, e.version, e.type, e.payload, e.metadata, e.recorded_at
FROM wf_events e
WHERE e.tenant_id = %(tenant_id)s AND e.stream_type = 'step-dispatch'
  AND e.stream_id IN (SELECT o.request_id FROM dispatch_outbox o
                      WHERE o.tenant_id = %(tenant_id)s AND o.run_id = %(run_id)s)
ORDER BY e.recorded_at, e.position;

-- name: cli_outbox_for_run
-- One run's dispatch requests and their delivery state.
SELECT request_id::text AS request_id, step_kind, status, attempts, created_at
FROM dispatch_outbox
WHERE tenant_id = %(tenant_id)s AND run_id = %(run_id)s
ORDER BY created_at, request_id;

-- name: doctor_unsettled_without_pending
-- Runs neither settled nor holding a pending row; `unprojected`: the pending projection
-- has not applied all of the run's events yet (projection lag, not a stranded run).
SELECT r.tenant_id::text AS tenant_id, r.run_id::text AS run_id, r.workflow_name, r.status,
       r.updated_at,
       EXISTS (
           SELECT 1 FROM wf_events e
           LEFT JOIN projection_checkpoints c ON c.name = 'workflow_run_pending'
           WHERE e.tenant_id = r.tenant_id AND e.stream_id = r.run_id
             AND (c.name IS NULL OR (e.xid, e.position) > (c.last_xid, c.last_position))
       ) AS unprojected
FROM workflow_runs r
WHERE r.status IN ('running', 'waiting')
  AND (%(tenant_id)s::uuid IS NULL OR r.tenant_id = %(tenant_id)s::uuid)
  AND NOT EXISTS (
      SELECT 1 FROM workflow_run_pending p
      WHERE p.tenant_id = r.tenant_id AND p.run_id = r.run_id)
ORDER BY r.updated_at, r.run_id
LIMIT 1000;

-- name: doctor_settled_with_pending
-- Pending rows of settled runs; `unprojected` as above.
SELECT p.tenant_id::text AS tenant_id, p.run_id::text AS run_id, p.step_index, r.workflow_name,
       r.status,
       EXISTS (
           SELECT 1 FROM wf_events e
           LEFT JOIN projection_checkpoints c ON c.name = 'workflow_run_pending'
           WHERE e.tenant_id = r.tenant_id AND e.stream_id = r.run_id
             AND (c.name IS NULL OR (e.xid, e.position) > (c.last_xid, c.last_position))
       ) AS unprojected
FROM workflow_run_pending p
JOIN workflow_runs r ON r.tenant_id = p.tenant_id AND r.run_id = p.run_id
WHERE r.status IN ('completed', 'failed', 'cancelled')
  AND (%(tenant_id)s::uuid IS NULL OR p.tenant_id = %(tenant_id)s::uuid)
ORDER BY p.tenant_id, p.run_id
LIMIT 1000;

-- name: doctor_projection_state
-- The pending projection's lag in run-stream events (dispatch streams do not change
-- pending rows) and the age of its checkpoint.
SELECT
    (SELECT count(*) FROM wf_events e
     LEFT JOIN projection_checkpoints c ON c.name = 'workflow_run_pending'
     WHERE e.stream_type = 'workflow-run'
       AND (c.name IS NULL OR (e.xid, e.position) > (c.last_xid, c.last_position))) AS behind,
    (SELECT updated_at FROM projection_checkpoints WHERE name = 'workflow_run_pending')
        AS checkpoint_at;

-- name: doctor_pinned_definitions
-- Suspended runs per workflow, the definition fingerprint their suspension recorded and
-- the place they wait at (step and path, from the suspension event: one index read per
-- run; or from the last migration that moved it, which the pending row says happened),
-- with the tenants of the fingerprint and one example run.
WITH suspended AS (
    SELECT p.tenant_id, p.run_id, p.workflow_name, p.step_index, p.suspension_event_type,
           coalesce(p.definition_fingerprint, '') AS definition_fingerprint,
           coalesce(m.payload -> 'toPath', e.payload -> 'path', '[]'::jsonb) AS path
    FROM workflow_run_pending p
    LEFT JOIN wf_events e ON e.tenant_id = p.tenant_id AND e.stream_id = p.run_id
                         AND e.version = p.suspension_version
    LEFT JOIN LATERAL (
        SELECT w.payload FROM wf_events w
        WHERE p.match_after_version IS NOT NULL AND w.tenant_id = p.tenant_id
          AND w.stream_id = p.run_id AND w.version > p.suspension_version
          AND w.version <= p.match_after_version AND w.type = 'workflow.run-migrated'
        ORDER BY w.version DESC LIMIT 1
    ) m ON true
    WHERE (%(tenant_id)s::uuid IS NULL OR p.tenant_id = %(tenant_id)s::uuid)
), tenants AS (
    SELECT workflow_name, definition_fingerprint, count(DISTINCT tenant_id) AS tenants
    FROM suspended GROUP BY workflow_name, definition_fingerprint
)
SELECT s.workflow_name, s.definition_fingerprint, s.step_index, s.suspension_event_type,
       s.path, count(*) AS runs, t.tenants,
       min(s.tenant_id::text || ' ' || s.run_id::text) AS example
FROM suspended s JOIN tenants t USING (workflow_name, definition_fingerprint)
GROUP BY s.workflow_name, s.definition_fingerprint, s.step_index, s.suspension_event_type,
         s.path, t.tenants
ORDER BY s.workflow_name, s.definition_fingerprint, s.step_index, s.suspension_event_type;
