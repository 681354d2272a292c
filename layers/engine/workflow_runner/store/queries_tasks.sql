-- Named queries of durable tasks (task_queue), the run_results projection and the
-- awaited events a run has consumed.

-- name: insert_task
-- A task a pass scheduled (a repeated pass schedules the same id once).
INSERT INTO task_queue (tenant_id, task_id, run_id, workflow_name, definition_fingerprint,
                        task_key, step_kind, path, scope, request, max_attempts, timeout_ms,
                        next_attempt_at, created_at, flow)
VALUES (%(tenant_id)s, %(task_id)s, %(run_id)s, %(workflow_name)s, %(definition_fingerprint)s,
        %(task_key)s, %(step_kind)s, %(path)s, %(scope)s, %(request)s, %(max_attempts)s,
        %(timeout_ms)s, %(now)s, %(now)s, %(limits)s)
ON CONFLICT (tenant_id, task_id) DO NOTHING;

-- name: claim_task
-- Lease the oldest due task whose attempt fits in %(max_ms)s, counting the attempt. A
-- `running` row is due once its lease ended (its worker died): `was` tells the caller.
-- SKIP LOCKED lets concurrent workers take disjoint rows.
UPDATE task_queue t
SET status = 'running', attempts = t.attempts + 1,
    leased_until = %(now)s + make_interval(
        secs => coalesce(t.timeout_ms, %(default_ms)s) / 1000.0 + %(margin_s)s),
    next_attempt_at = %(now)s + make_interval(
        secs => coalesce(t.timeout_ms, %(default_ms)s) / 1000.0 + %(margin_s)s)
FROM (
    SELECT tenant_id, task_id, status AS was
    FROM task_queue
    WHERE status IN ('pending', 'running') AND next_attempt_at <= %(now)s
      AND coalesce(timeout_ms, %(default_ms)s) <= %(max_ms)s
    ORDER BY next_attempt_at, task_id
    LIMIT 1
    FOR UPDATE SKIP LOCKED
) due
WHERE t.tenant_id = due.tenant_id AND t.task_id = due.task_id
RETURNING t.tenant_id::text AS tenant_id, t.task_id::text AS task_id, t.run_id::text AS run_id,
          t.workflow_name, t.definition_fingerprint, t.task_key, t.step_kind, t.path, t.scope,
          t.request, t.attempts, t.max_attempts, t.timeout_ms, t.leased_until, due.was,
          t.flow, t.flow_ticket;

-- name: retry_task
-- Schedule the next attempt (only while this worker's lease holds the row).
UPDATE task_queue
SET status = 'pending', next_attempt_at = %(next_attempt_at)s, leased_until = NULL,
    last_error = %(error)s
WHERE tenant_id = %(tenant_id)s AND task_id = %(task_id)s AND status = 'running'
  AND attempts = %(attempt)s;

-- name: settle_task
-- Close a task for good (completed, failed or cancelled) and drop its request.
UPDATE task_queue
SET status = %(status)s, leased_until = NULL, request = NULL, scope = '{}'::jsonb,
    last_error = %(error)s, settled_at = %(now)s
WHERE tenant_id = %(tenant_id)s AND task_id = %(task_id)s
  AND status IN ('pending', 'running');

-- name: release_task
-- Give a claimed row back unstarted, its attempt not counted, due at %(next_attempt_at)s
-- (an at-most-once task whose claim found the previous attempt interrupted: the next
-- one runs after the backoff, if at all).
UPDATE task_queue
SET status = 'pending', attempts = attempts - 1, leased_until = NULL,
    next_attempt_at = %(next_attempt_at)s, last_error = coalesce(%(error)s, last_error)
WHERE tenant_id = %(tenant_id)s AND task_id = %(task_id)s AND status = 'running'
  AND attempts = %(attempt)s;

-- name: cancel_run_tasks
-- A cancelled run's tasks are not run any more.
UPDATE task_queue
SET status = 'cancelled', leased_until = NULL, request = NULL, scope = '{}'::jsonb,
    settled_at = %(now)s
WHERE tenant_id = %(tenant_id)s AND run_id = %(run_id)s AND status IN ('pending', 'running');

-- name: get_task
-- One task row (operators and tests).
SELECT tenant_id::text AS tenant_id, task_id::text AS task_id, run_id::text AS run_id,
       workflow_name, definition_fingerprint, task_key, step_kind, path, scope, request,
       status, attempts, max_attempts, timeout_ms, next_attempt_at, leased_until, last_error,
       created_at, settled_at
FROM task_queue
WHERE tenant_id = %(tenant_id)s AND task_id = %(task_id)s;

-- name: next_task_due
-- When the earliest open task is due (a retry, or a lease that ends).
SELECT min(next_attempt_at) AS due FROM task_queue WHERE status IN ('pending', 'running');

-- name: run_results
-- The current results of each run asked for (%(tenant_ids)s and %(run_ids)s, pairwise;
-- `n` numbers them from 1), awaited payloads joined from the inbox (NULL once erased).
SELECT q.n, r.key, r.value, r.awaited, r.awaited_event_id, i.detail AS awaited_detail,
       (r.awaited_event_id IS NOT NULL AND i.detail IS NULL) AS awaited_missing
FROM unnest(%(tenant_ids)s::uuid[], %(run_ids)s::uuid[]) WITH ORDINALITY AS q(tenant_id, run_id, n)
JOIN run_results r ON r.tenant_id = q.tenant_id AND r.run_id = q.run_id
LEFT JOIN inbox i ON r.awaited AND i.tenant_id = r.tenant_id AND i.event_id = r.awaited_event_id;

-- name: consume_events
-- Remember the awaited events a run took (a repeated pass changes nothing).
INSERT INTO run_consumed_events (tenant_id, run_id, event_id)
SELECT %(tenant_id)s, %(run_id)s, unnest(%(event_ids)s::text[])
ON CONFLICT DO NOTHING;

-- name: find_tasks
-- Tasks across tenants (or of one) by status: failed (settled since %(since)s) or stuck
-- (open and more than a while past due: no worker is running), newest first.
SELECT tenant_id::text AS tenant_id, task_id::text AS task_id, run_id::text AS run_id,
       workflow_name, definition_fingerprint, task_key, step_kind, path, scope, request,
       status, attempts, max_attempts, timeout_ms, next_attempt_at, leased_until, last_error,
       created_at, settled_at
FROM task_queue
WHERE (%(tenant_id)s::uuid IS NULL OR tenant_id = %(tenant_id)s::uuid)
  AND CASE %(status)s
        WHEN 'failed' THEN status = 'failed' AND settled_at >= %(since)s
        ELSE status IN ('pending', 'running') AND next_attempt_at < %(stuck_before)s
      END
ORDER BY created_at DESC, task_id DESC
LIMIT %(limit)s;

-- name: adopt_task
-- A claim another worker took and handed here (a kept version runs its attempt): the row
-- as claimed, while that claim still holds it (same attempt, lease not ended).
SELECT tenant_id::text AS tenant_id, task_id::text AS task_id, run_id::text AS run_id,
       workflow_name, definition_fingerprint, task_key, step_kind, path, scope, request,
       attempts, max_attempts, timeout_ms, leased_until, 'running' AS was, flow, flow_ticket
FROM task_queue
WHERE tenant_id = %(tenant_id)s AND task_id = %(task_id)s AND status = 'running'
  AND attempts = %(attempt)s AND leased_until > %(now)s;

-- name: migrate_tasks
-- An operator migrated the run: the tasks of its open suspension run their step where
-- it moved to (%(moves)s: a JSON array of {task_id, path}) on definition %(fingerprint)s.
-- Settled rows are moved too, so the row says where the task's step is.
UPDATE task_queue t
SET path = m.path, definition_fingerprint = %(fingerprint)s
FROM jsonb_to_recordset(%(moves)s) AS m(task_id uuid, path jsonb)
WHERE t.tenant_id = %(tenant_id)s AND t.run_id = %(run_id)s AND t.task_id = m.task_id;
