-- Named queries of the purge of settled runs past their retention (engine/purge.py).

-- name: purge_runs
-- One batch: lock at most `limit` settled runs past their workflow's retention (SKIP
-- LOCKED: two purgers take disjoint runs; a redrive holds the summary row while it
-- writes) and delete everything stored for them, in one statement.
-- Retention: `retention` maps a workflow name to seconds (JSON null: forever); other
-- workflows keep `default_seconds` (NULL: forever). Workflow names come from a loose
-- index scan of workflow_runs_workflow_recent_idx, and each (workflow, status) range is
-- read oldest first from the same index, so runs kept longer never stand in the way.
-- A run is left alone while anything may still touch it: an event of its streams the
-- pending projection has not applied (or no checkpoint yet), a mail or webhook not
-- settled, a task pending or running, a join that has not counted it as a child, or a
-- child of its own not settled and counted. The locked row must still be the version
-- the candidate read (a redrive that committed in between moved it). `candidates` counts
-- the runs the batch could have taken (at most `limit`): fewer runs than that were
-- locked by another purger or a redrive, so a short batch does not mean none is left.
WITH RECURSIVE names AS (
    (SELECT workflow_name FROM workflow_runs ORDER BY workflow_name LIMIT 1)
    UNION ALL
    SELECT (SELECT w.workflow_name FROM workflow_runs w
            WHERE w.workflow_name > n.workflow_name
            ORDER BY w.workflow_name LIMIT 1)
    FROM names n
    WHERE n.workflow_name IS NOT NULL
),
cutoffs AS (
    SELECT n.workflow_name,
           %(now)s::timestamptz - make_interval(secs => CASE
               WHEN %(retention)s::jsonb ? n.workflow_name
                   THEN (%(retention)s::jsonb ->> n.workflow_name)::double precision
               ELSE %(default_seconds)s::double precision
           END) AS cutoff
    FROM names n
    WHERE n.workflow_name IS NOT NULL
),
checkpoint AS (
    SELECT last_xid, last_position FROM projection_checkpoints WHERE name = %(checkpoint)s::text
),
candidates AS (
    SELECT c.tenant_id, c.run_id, c.version, c.updated_at
    FROM cutoffs w
    CROSS JOIN (VALUES ('completed'), ('failed'), ('cancelled')) AS s(status)
    CROSS JOIN checkpoint cp
    CROSS JOIN LATERAL (
        SELECT r.tenant_id, r.run_id, r.version, r.updated_at
        FROM workflow_runs r
        WHERE r.workflow_name = w.workflow_name AND r.status = s.status
          AND r.updated_at < w.cutoff
          AND NOT EXISTS (
              SELECT 1 FROM wf_events e
              WHERE e.tenant_id = r.tenant_id AND e.stream_id = r.run_id
                AND (e.xid, e.position) > (cp.last_xid, cp.last_position))
          AND NOT EXISTS (
              SELECT 1 FROM dispatch_outbox o
              WHERE o.tenant_id = r.tenant_id AND o.run_id = r.run_id
                AND (o.status = 'pending' OR EXISTS (
                    SELECT 1 FROM wf_events e
                    WHERE e.tenant_id = o.tenant_id AND e.stream_id = o.request_id
                      AND (e.xid, e.position) > (cp.last_xid, cp.last_position))))
          AND NOT EXISTS (
              SELECT 1 FROM task_queue t
              WHERE t.tenant_id = r.tenant_id AND t.run_id = r.run_id
                AND t.status IN ('pending', 'running'))
          AND NOT EXISTS (
              SELECT 1 FROM run_children c
              WHERE c.tenant_id = r.tenant_id AND c.child_run_id = r.run_id AND NOT c.counted)
          AND NOT EXISTS (
              SELECT 1 FROM run_joins j
              JOIN run_children c ON c.tenant_id = j.tenant_id AND c.join_id = j.join_id
              WHERE j.tenant_id = r.tenant_id AND j.parent_run_id = r.run_id
                AND (c.status IN ('pending', 'running') OR NOT c.counted))
        ORDER BY r.updated_at
        LIMIT %(limit)s
    ) c
),
picked AS (
    SELECT r.tenant_id, r.run_id
    FROM workflow_runs r
    JOIN (SELECT * FROM candidates ORDER BY updated_at LIMIT %(limit)s) c
      ON c.tenant_id = r.tenant_id AND c.run_id = r.run_id
    WHERE r.status IN ('completed', 'failed', 'cancelled')
      AND r.version = c.version AND r.updated_at = c.updated_at
    FOR UPDATE OF r SKIP LOCKED
),
runs_deleted AS (
    DELETE FROM workflow_runs r USING picked p
    WHERE r.tenant_id = p.tenant_id AND r.run_id = p.run_id
    RETURNING r.tenant_id
),
run_events_deleted AS (
    DELETE FROM wf_events e USING picked p
    WHERE e.tenant_id = p.tenant_id AND e.stream_id = p.run_id
      AND e.stream_type = %(run_stream)s::text
    RETURNING e.tenant_id
),
outbox_deleted AS (
    DELETE FROM dispatch_outbox o USING picked p
    WHERE o.tenant_id = p.tenant_id AND o.run_id = p.run_id AND o.status <> 'pending'
    RETURNING o.tenant_id, o.request_id
),
dispatch_events_deleted AS (
    DELETE FROM wf_events e USING outbox_deleted d
    WHERE e.tenant_id = d.tenant_id AND e.stream_id = d.request_id
      AND e.stream_type = %(dispatch_stream)s::text
    RETURNING e.tenant_id
),
mail_deleted AS (
    DELETE FROM local_mailbox m USING outbox_deleted d
    WHERE m.request_id = d.request_id::text
    RETURNING m.position
),
results_deleted AS (
    DELETE FROM run_results x USING picked p
    WHERE x.tenant_id = p.tenant_id AND x.run_id = p.run_id
    RETURNING x.tenant_id
),
consumed_deleted AS (
    DELETE FROM run_consumed_events x USING picked p
    WHERE x.tenant_id = p.tenant_id AND x.run_id = p.run_id
    RETURNING x.tenant_id
),
tasks_deleted AS (
    DELETE FROM task_queue x USING picked p
    WHERE x.tenant_id = p.tenant_id AND x.run_id = p.run_id
    RETURNING x.tenant_id
),
callbacks_deleted AS (
    DELETE FROM callbacks x USING picked p
    WHERE x.tenant_id = p.tenant_id AND x.run_id = p.run_id
    RETURNING x.tenant_id
),
pending_deleted AS (
    DELETE FROM workflow_run_pending x USING picked p
    WHERE x.tenant_id = p.tenant_id AND x.run_id = p.run_id
    RETURNING x.tenant_id
),
queued_deleted AS (
    DELETE FROM local_resume_queue x USING picked p
    WHERE x.tenant_id = p.tenant_id AND x.run_id = p.run_id
    RETURNING x.tenant_id
),
local_log_deleted AS (
    DELETE FROM local_run_log x USING picked p
    WHERE x.tenant_id = p.tenant_id AND x.run_id = p.run_id
    RETURNING x.tenant_id
),
joins_deleted AS (
    DELETE FROM run_joins j USING picked p
    WHERE j.tenant_id = p.tenant_id AND j.parent_run_id = p.run_id
    RETURNING j.tenant_id, j.join_id
),
children_deleted AS (
    DELETE FROM run_children c USING joins_deleted j
    WHERE c.tenant_id = j.tenant_id AND c.join_id = j.join_id
    RETURNING c.tenant_id
),
cancel_keys_deleted AS (
    DELETE FROM flow_cancel_keys x USING picked p
    WHERE x.tenant_id = p.tenant_id AND x.run_id = p.run_id
    RETURNING x.tenant_id
)
SELECT (SELECT count(*) FROM runs_deleted) AS runs,
       (SELECT count(*) FROM (SELECT 1 FROM candidates LIMIT %(limit)s) s) AS candidates,
       (SELECT count(*) FROM run_events_deleted) AS run_events,
       (SELECT count(*) FROM dispatch_events_deleted) AS dispatch_events,
       (SELECT count(*) FROM outbox_deleted) AS outbox_rows,
       (SELECT count(*) FROM results_deleted) + (SELECT count(*) FROM consumed_deleted)
         + (SELECT count(*) FROM tasks_deleted) + (SELECT count(*) FROM callbacks_deleted)
         + (SELECT count(*) FROM pending_deleted) + (SELECT count(*) FROM queued_deleted)
         + (SELECT count(*) FROM joins_deleted) + (SELECT count(*) FROM children_deleted)
         + (SELECT count(*) FROM mail_deleted) + (SELECT count(*) FROM local_log_deleted)
         + (SELECT count(*) FROM cancel_keys_deleted) AS other_rows;

-- name: purge_inbox_page
-- The next page of inbox rows in insertion order, after a position: what one inbox batch
-- examines (the unique position index; rows are roughly in receive-time order).
SELECT tenant_id::text AS tenant_id, type, position, received_at
FROM inbox
WHERE position > %(after)s::bigint
ORDER BY position
LIMIT %(limit)s;

-- name: purge_inbox_lock_types
-- Try the (tenant, type) locks of wakeups and look-backs (wakeup_lock_type) for the
-- pairs given; only the pairs locked are purged now, nothing waits on a busy one. Held
-- to the end of the transaction, so a look-back of a new wait is either committed
-- before the delete reads (and protects its events) or runs after it.
SELECT p.tenant_id, p.type
FROM unnest(%(tenant_ids)s::text[], %(types)s::text[]) AS p(tenant_id, type)
WHERE pg_try_advisory_xact_lock(hashtextextended(p.tenant_id || '|' || p.type, 7));

-- name: purge_inbox_delete
-- Delete the page's rows received before the cutoff, of the locked (tenant, type) pairs,
-- that nothing may still read: not named by any run stream (wf_events_event_ref_idx), not
-- at or after the look-back start of a wait of their type, not after the earliest start
-- (minus a margin) of an unsettled run of their tenant (its later waits look back to its
-- trigger by default).
WITH floors AS (
    SELECT t.tenant_id,
           (SELECT min(r.started_at) FROM workflow_runs r
            WHERE r.tenant_id = t.tenant_id AND r.status IN ('running', 'waiting'))
             - make_interval(secs => %(margin_seconds)s::double precision) AS floor
    FROM (SELECT DISTINCT tenant_id::uuid AS tenant_id FROM unnest(%(tenant_ids)s::text[])
          AS u(tenant_id)) t
),
doomed AS (
    SELECT i.tenant_id, i.event_id
    FROM inbox i
    JOIN unnest(%(tenant_ids)s::text[], %(types)s::text[]) AS l(tenant_id, type)
      ON i.tenant_id = l.tenant_id::uuid AND i.type = l.type
    JOIN floors f ON f.tenant_id = i.tenant_id
    WHERE i.position > %(after)s::bigint AND i.position <= %(through)s::bigint
      AND i.received_at < %(cutoff)s::timestamptz
      AND coalesce(i.event_time, i.received_at) < %(cutoff)s::timestamptz
      AND (f.floor IS NULL
           OR (i.received_at < f.floor AND coalesce(i.event_time, i.received_at) < f.floor))
      AND NOT EXISTS (
          SELECT 1 FROM wf_events e
          WHERE e.tenant_id = i.tenant_id
            AND coalesce(e.payload -> 'triggerEventRef' ->> 'eventId', e.payload ->> 'eventId')
                = i.event_id
            AND e.type IN ('workflow.run-started', 'workflow.step.event-matched',
                           'workflow.callback.completed'))
      AND NOT EXISTS (
          SELECT 1 FROM workflow_run_pending p
          WHERE p.tenant_id = i.tenant_id AND p.wait_event_type = i.type
            AND (p.awaited_event_id IS NULL OR p.awaited_event_id = i.event_id)
            AND (p.lookback_from IS NULL
                 OR p.lookback_from <= coalesce(i.event_time, i.received_at)))
),
deleted AS (
    DELETE FROM inbox i USING doomed d
    WHERE i.tenant_id = d.tenant_id AND i.event_id = d.event_id
    RETURNING i.tenant_id
)
SELECT count(*) AS deleted FROM deleted;

-- name: lock_run_summary
-- A run's summary row, locked: a redrive holds it while it writes a settled run, so the
-- purge (FOR UPDATE SKIP LOCKED) never deletes a run mid-write, and a redrive that
-- waited for a purge finds the run gone.
SELECT version FROM workflow_runs
WHERE tenant_id = %(tenant_id)s::uuid AND run_id = %(run_id)s::uuid
FOR UPDATE;
