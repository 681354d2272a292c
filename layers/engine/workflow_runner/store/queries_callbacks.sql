-- Named queries of callback tokens (wait_for_callback, create_callback), used by
-- store/callbacks.py.
--
-- Every change of a row's standing (an answer, a heartbeat, a closure) is written in a
-- transaction that also appends to the run's stream at its next version, after reading
-- the row: so two of them never both decide from the same row (the later append loses
-- and looks again). No query here locks a row ahead of that append: a pass, which holds
-- its stream version from its claim on, may close a row, and a lock taken before the
-- append would wait for that pass while the pass waits for the lock.

-- name: insert_callback
-- A token a pass handed out (its hash only), in that pass's transaction.
INSERT INTO callbacks (token_hash, tenant_id, run_id, workflow_name, suspension_version,
                       step_index, path, expires_at, created_at, name, mint,
                       heartbeat_seconds, closed_at, closed_reason)
VALUES (%(token_hash)s, %(tenant_id)s, %(run_id)s, %(workflow_name)s, %(suspension_version)s,
        %(step_index)s, %(path)s, %(expires_at)s, %(now)s, %(name)s, %(mint)s,
        %(heartbeat_seconds)s, %(closed_at)s, %(closed_reason)s);

-- name: callback_by_hash
-- A token's row as it stands. Looked up by hash alone, across tenants: the token is the
-- credential and names its tenant, which every later statement of an answer carries.
SELECT token_hash, tenant_id::text AS tenant_id, run_id::text AS run_id, workflow_name,
       suspension_version, step_index, path, expires_at, created_at, completed_at,
       completion_event_id, name, mint, heartbeat_seconds, last_heartbeat_at, failed_error,
       closed_at, closed_reason
FROM callbacks
WHERE token_hash = %(token_hash)s;

-- name: mark_callback_completed
-- Record a token's answer once (a completion, or a failure with its error name); a
-- second answer changes nothing.
UPDATE callbacks
SET completed_at = %(now)s, completion_event_id = %(event_id)s, failed_error = %(error)s
WHERE tenant_id = %(tenant_id)s AND token_hash = %(token_hash)s AND completed_at IS NULL;

-- name: record_callback_heartbeat
-- A heartbeat: the callback's next one is due heartbeat_seconds from now.
UPDATE callbacks
SET last_heartbeat_at = %(now)s
WHERE tenant_id = %(tenant_id)s AND token_hash = %(token_hash)s AND completed_at IS NULL;

-- name: close_callback
-- The run stopped listening to a callback that has no answer (why: closed_reason).
UPDATE callbacks
SET closed_at = %(now)s, closed_reason = %(reason)s
WHERE tenant_id = %(tenant_id)s AND token_hash = %(token_hash)s
  AND completed_at IS NULL AND closed_at IS NULL;

-- name: supersede_callbacks
-- A create_callback made name %(name)s again: the run's earlier callbacks of that name
-- without an answer close (their tokens answer not_waiting).
UPDATE callbacks
SET closed_at = %(now)s, closed_reason = 'superseded'
WHERE tenant_id = %(tenant_id)s AND run_id = %(run_id)s AND name = %(name)s
  AND token_hash <> %(token_hash)s AND completed_at IS NULL AND closed_at IS NULL;

-- name: created_callbacks
-- A run's created callbacks a later step may read or await: the newest of each name
-- (an older one of the same name was superseded), with the answer's payload (NULL and
-- erased_at set: the payload was erased).
SELECT DISTINCT ON (c.name)
       c.token_hash, c.tenant_id::text AS tenant_id, c.run_id::text AS run_id,
       c.workflow_name, c.suspension_version, c.step_index, c.path, c.expires_at,
       c.created_at, c.completed_at, c.completion_event_id, c.name, c.mint,
       c.heartbeat_seconds, c.last_heartbeat_at, c.failed_error, c.closed_at,
       c.closed_reason, i.detail AS answer, i.erased_at AS answer_erased_at
FROM callbacks c
LEFT JOIN inbox i ON i.tenant_id = c.tenant_id AND i.event_id = c.completion_event_id
WHERE c.tenant_id = %(tenant_id)s AND c.run_id = %(run_id)s AND c.name IS NOT NULL
  AND c.closed_reason IS DISTINCT FROM 'superseded'
ORDER BY c.name, c.suspension_version DESC;

-- name: callbacks_of_run
-- The callback tokens a run handed out, newest first (hashes, never tokens).
SELECT token_hash, tenant_id::text AS tenant_id, run_id::text AS run_id, workflow_name,
       suspension_version, step_index, path, expires_at, created_at, completed_at,
       completion_event_id, name, mint, heartbeat_seconds, last_heartbeat_at, failed_error,
       closed_at, closed_reason
FROM callbacks
WHERE tenant_id = %(tenant_id)s AND run_id = %(run_id)s
ORDER BY suspension_version DESC, name NULLS FIRST;

-- name: open_callbacks_of_tenant
-- A tenant's callbacks still waiting for an answer, soonest deadline first: no answer, not
-- closed, of a run that waits; a wait_for_callback's only while its run's pending row is
-- that wait's (as the pending projection sees it).
SELECT c.token_hash, c.tenant_id::text AS tenant_id, c.run_id::text AS run_id,
       c.workflow_name, c.suspension_version, c.step_index, c.path, c.expires_at,
       c.created_at, c.completed_at, c.completion_event_id, c.name, c.mint,
       c.heartbeat_seconds, c.last_heartbeat_at, c.failed_error, c.closed_at, c.closed_reason
FROM callbacks c
JOIN workflow_runs r ON r.tenant_id = c.tenant_id AND r.run_id = c.run_id
WHERE c.tenant_id = %(tenant_id)s AND c.completed_at IS NULL AND c.closed_at IS NULL
  AND r.status = 'waiting'
  AND (c.name IS NOT NULL OR EXISTS (
        SELECT 1 FROM workflow_run_pending p
        WHERE p.tenant_id = c.tenant_id AND p.run_id = c.run_id
          AND p.suspension_version = c.suspension_version))
ORDER BY CASE WHEN c.heartbeat_seconds IS NULL THEN c.expires_at
              ELSE least(c.expires_at, coalesce(c.last_heartbeat_at, c.created_at)
                                       + make_interval(secs => c.heartbeat_seconds)) END,
         c.run_id, c.token_hash
LIMIT %(limit)s;

-- name: extend_pending_wake
-- A heartbeat moved the deadline of the callback wait at %(suspension_version)s: its row
-- wakes then, never earlier than it would have (the projection may apply an older
-- heartbeat after the newer one marked the row) and not once an answer marked it due.
UPDATE workflow_run_pending
SET wake_at = greatest(wake_at, %(wake_at)s)
WHERE tenant_id = %(tenant_id)s AND run_id = %(run_id)s
  AND suspension_version = %(suspension_version)s AND awaited_event_id IS NULL;

-- name: migrate_callbacks
-- An operator migrated the run: the tokens of its open suspension name the step it
-- moved to (a completion enqueues the run's resume for it). The migration takes these
-- rows after it appends to the run stream, in the order an answer takes them.
UPDATE callbacks
SET step_index = %(step_index)s, path = %(path)s
WHERE tenant_id = %(tenant_id)s AND run_id = %(run_id)s
  AND suspension_version = %(suspension_version)s;
