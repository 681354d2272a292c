-- name: record_pass
-- What the passes of a batch (one or more runs, each at most once) wrote, in one
-- statement: the run-stream events after the version each pass holds (its claim or its
-- start, so none of them can conflict: a plain insert, which a conflict would fail
-- loudly instead of dropping events; inserted run by run in version order, so a run's
-- positions follow its versions), the result keys each set
-- (one row per key; an older write never replaces a newer one), each run's summary (as
-- upsert_run), and for each run the pass ended (%(ended)s) what run_ended does. Returns
-- the joins closed now, as run_ended.
WITH appended AS (
    INSERT INTO wf_events (tenant_id, stream_id, stream_type, version, type, payload, metadata,
                           recorded_at)
    SELECT e.tenant_id, e.run_id, %(stream_type)s, e.version, e.type, e.payload, e.metadata,
           %(now)s
    FROM jsonb_to_recordset(%(events)s) AS e(tenant_id uuid, run_id uuid, version integer,
                                              type text, payload jsonb, metadata jsonb)
    ORDER BY e.tenant_id, e.run_id, e.version
    RETURNING 1
), results AS (
    INSERT INTO run_results (tenant_id, run_id, key, value, awaited, awaited_event_id, version)
    SELECT r.tenant_id, r.run_id, r.key, r.value, r.awaited, r.awaited_event_id, r.version
    FROM jsonb_to_recordset(%(results)s) AS r(tenant_id uuid, run_id uuid, key text, value jsonb,
                                               awaited boolean, awaited_event_id text,
                                               version integer)
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
                                           trigger_event_type text, workflow_version integer)
    ON CONFLICT (tenant_id, run_id) DO UPDATE
    SET status = excluded.status, version = excluded.version, updated_at = excluded.updated_at,
        definition_fingerprint = excluded.definition_fingerprint,
        workflow_version = COALESCE(excluded.workflow_version, workflow_runs.workflow_version)
    RETURNING 1
), ended AS (
    -- `result` arrives wrapped ({"v": …}) so that a JSON null stays a jsonb null.
    SELECT x.tenant_id, x.run_id, x.status, x.result -> 'v' AS result, x.reason
    FROM jsonb_to_recordset(%(ended)s) AS x(tenant_id uuid, run_id uuid, status text,
                                            result jsonb, reason text)
), settled AS (
    UPDATE run_children c
    SET status = x.status, result = x.result, reason = x.reason, settled_at = %(now)s,
        counted = false
    FROM ended x
    WHERE c.tenant_id = x.tenant_id AND c.child_run_id = x.run_id AND c.status = 'running'
    RETURNING 1
)
UPDATE run_joins j SET closed_at = %(now)s, start_due_at = NULL
FROM ended x
WHERE j.tenant_id = x.tenant_id AND j.parent_run_id = x.run_id AND j.kind <> 'start'
  AND j.closed_at IS NULL
RETURNING j.tenant_id::text AS tenant_id, j.parent_run_id::text AS run_id,
          j.join_id::text AS join_id;
