-- Named queries of callback tokens (wait_for_callback), used by store/callbacks.py.

-- name: insert_callback
-- The token a suspending pass handed out (its hash only), in that pass's transaction.
INSERT INTO callbacks (token_hash, tenant_id, run_id, workflow_name, suspension_version,
                       step_index, path, expires_at, created_at)
VALUES (%(token_hash)s, %(tenant_id)s, %(run_id)s, %(workflow_name)s, %(suspension_version)s,
        %(step_index)s, %(path)s, %(expires_at)s, %(now)s);

-- name: lock_callback
-- A token's row, locked until the completing transaction ends, so that completions of
-- one token take turns. Looked up by hash alone, across tenants: the token is the
-- credential and names its tenant, which every later statement of a completion carries.
SELECT token_hash, tenant_id::text AS tenant_id, run_id::text AS run_id, workflow_name,
       suspension_version, step_index, path, expires_at, created_at, completed_at,
       completion_event_id
FROM callbacks
WHERE token_hash = %(token_hash)s
FOR UPDATE;

-- name: mark_callback_completed
-- Record a token's completion once; a second completion changes nothing.
UPDATE callbacks
SET completed_at = %(now)s, completion_event_id = %(event_id)s
WHERE tenant_id = %(tenant_id)s AND token_hash = %(token_hash)s AND completed_at IS NULL;

-- name: run_callbacks
-- The callback tokens a run handed out, newest first (hashes, never tokens).
SELECT token_hash, tenant_id::text AS tenant_id, run_id::text AS run_id, workflow_name,
       suspension_version, step_index, path, expires_at, created_at, completed_at,
       completion_event_id
FROM callbacks
WHERE tenant_id = %(tenant_id)s AND run_id = %(run_id)s
ORDER BY suspension_version DESC;

-- name: migrate_callbacks
-- An operator migrated the run: the tokens of its open suspension name the step it
-- moved to (a completion enqueues the run's resume for it). The migration takes these
-- rows before it appends to the run stream, in the order a completion takes them.
UPDATE callbacks
SET step_index = %(step_index)s, path = %(path)s
WHERE tenant_id = %(tenant_id)s AND run_id = %(run_id)s
  AND suspension_version = %(suspension_version)s;
