-- name: record_pass
-- What the passes of a batch (one or more runs, each at most once) wrote, in one
-- statement: the run-stream events after the version each pass holds (its claim or its
-- start; a queue batch's claims ride here, first among their runs' events, and one that
-- lost fails the statement loudly: a plain insert, never dropping events; inserted run
-- by run in version order, so a run's positions follow its versions), the result keys
-- each set
-- (one row per key; an older write never replaces a newer one), each run's summary (as
-- upsert_run), the awaited events each took (%(consumed)s: as consume_events, so no later
-- wait of the run takes them again), and for each run the pass ended (%(ended)s) what
-- run_ended does. Returns the joins closed now, as run_ended.
--
-- Lock order: the stream's versions first, everything else after (each other part joins
-- `gate`, one row, which waits for `appended`). A writer that took a version first (a
-- cancel, a pass that claimed the run) makes this statement wait at its insert holding
-- nothing else, so that writer can go on to the rows below. Left to PostgreSQL, the
-- unreferenced inserts ran last, after the ended runs' child rows and summaries were
-- locked: waiting there, the statement held what the other writer needed next (a
-- deadlock).
WITH appended AS (
    INSERT INTO wf_events (tenant_id, stream_id, stream_type, version, type, payload, metadata,
                           recorded_at)
    SELECT e.tenant_id, e.run_id, %(stream_type)s, e.version, e.type, e.payload, e.metadata,
           %(now)s
    FROM jsonb_to_recordset(%(events)s) AS e(tenant_id uuid, run_id uuid, version integer,
                                              type text, payload jsonb, metadata jsonb)
    ORDER BY e.tenant_id, e.run_id, e.version
    RETURNING 1
), gate AS (
    SELECT count(*) FROM appended
), results AS (
    INSERT INTO run_results (tenant_id, run_id, key, value, awaited, awaited_event_id, version)
    SELECT r.tenant_id, r.run_id, r.key, r.value, r.awaited, r.awaited_event_id, r.version
    FROM jsonb_to_recordset(%(results)s) AS r(tenant_id uuid, run_id uuid, key text, value jsonb,
                                               awaited boolean, awaited_event_id text,
                                               version integer), gate
    ON CONFLICT (tenant_id, run_id, key) DO UPDATE
    SET value = excluded.value, awaited = excluded.awaited,
        awaited_event_id = excluded.awaited_event_id, version = excluded.version
    WHERE run_results.version <= excluded.version
    RETURNING 1
), summaries AS (
    INSERT INTO workflow_runs (tenant_id, run_id, workflow_name, status, version,
                               definition_fingerprint, trigger_event_type, started_at,
                               updated_at, workflow_version)
    SELECT s.tenant_id, s.run_id, s.workflow_name, s.status, s.version,
           s.definition_fingerprint, s.trigger_event_type, %(now)s, %(now)s, s.workflow_version
    FROM jsonb_to_recordset(%(runs)s) AS s(tenant_id uuid, run_id uuid, workflow_name text,
                                           status text, version integer,
                                           definition_fingerprint text,
                                           trigger_event_type text, workflow_version integer), gate
    ON CONFLICT (tenant_id, run_id) DO UPDATE
    SET status = excluded.status, version = excluded.version, updated_at = excluded.updated_at,
        definition_fingerprint = excluded.definition_fingerprint,
        workflow_version = COALESCE(excluded.workflow_version, workflow_runs.workflow_version)
    RETURNING 1
), consumed AS (
    INSERT INTO run_consumed_events (tenant_id, run_id, event_id)
    SELECT c.tenant_id, c.run_id, c.event_id
    FROM jsonb_to_recordset(%(consumed)s) AS c(tenant_id uuid, run_id uuid, event_id text), gate
    ON CONFLICT DO NOTHING
    RETURNING 1
), ended AS (
    -- `result` arrives wrapped ({"v": …}) so that a JSON null stays a jsonb null.
    SELECT x.tenant_id, x.run_id, x.status, x.result -> 'v' AS result, x.reason
    FROM jsonb_to_recordset(%(ended)s) AS x(tenant_id uuid, run_id uuid, status text,
                                            result jsonb, reason text), gate
), child_rows AS (
    -- The ended runs' rows in every join that names them, started or not, locked in one
    -- order (join, item), as the worker locks a join's rows when it marks them running
    -- (mark_children_running). A worker that marked a row running and has not committed
    -- makes this wait and then returns the row as running; a worker that comes after
    -- waits for this transaction and then reads the run as settled (children.py). So
    -- whichever commits first, the other sees it: no row stays running behind a settled
    -- child, whatever the two statements' snapshots.
    SELECT c.tenant_id, c.join_id, c.item_index, c.status
    FROM run_children c
    JOIN ended x ON c.tenant_id = x.tenant_id AND c.child_run_id = x.run_id
    WHERE c.status IN ('pending', 'running')
    ORDER BY c.tenant_id, c.join_id, c.item_index
    FOR UPDATE OF c
), settled AS (
    UPDATE run_children c
    SET status = x.status, result = x.result, reason = x.reason, settled_at = %(now)s,
        counted = false
    FROM child_rows l, ended x
    WHERE c.tenant_id = l.tenant_id AND c.join_id = l.join_id AND c.item_index = l.item_index
      AND l.status = 'running' AND x.tenant_id = c.tenant_id AND x.run_id = c.child_run_id
    RETURNING 1
), closing AS (
    -- The joins the ended runs opened as parents, locked in one order: two statements
    -- ending the same parents in other orders wait for each other instead of deadlocking.
    SELECT j.tenant_id, j.join_id
    FROM run_joins j
    JOIN ended x ON j.tenant_id = x.tenant_id AND j.parent_run_id = x.run_id
    WHERE j.kind <> 'start' AND j.closed_at IS NULL
    ORDER BY j.tenant_id, j.join_id
    FOR UPDATE OF j
)
UPDATE run_joins j SET closed_at = %(now)s, start_due_at = NULL
FROM closing l
WHERE j.tenant_id = l.tenant_id AND j.join_id = l.join_id
RETURNING j.tenant_id::text AS tenant_id, j.parent_run_id::text AS run_id,
          j.join_id::text AS join_id;
