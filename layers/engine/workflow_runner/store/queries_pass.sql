-- name: record_pass
-- What a pass wrote to its run, in one statement: the run-stream events after the
-- version the pass holds (its claim or its start, so none of them can conflict; they
-- are inserted in version order, so their positions follow their versions), the
-- result keys it set (one row per key; an older write never replaces a newer one) and
-- the run summary (as upsert_run).
WITH appended AS (
    INSERT INTO wf_events (tenant_id, stream_id, stream_type, version, type, payload, metadata,
                           recorded_at)
    SELECT %(tenant_id)s, %(run_id)s, %(stream_type)s, e.version, e.type, e.payload,
           e.metadata, %(now)s
    FROM jsonb_to_recordset(%(events)s) AS e(version integer, type text, payload jsonb,
                                              metadata jsonb)
    ORDER BY e.version
    ON CONFLICT (tenant_id, stream_id, version) DO NOTHING
    RETURNING 1
), results AS (
    INSERT INTO run_results (tenant_id, run_id, key, value, awaited, awaited_event_id, version)
    SELECT %(tenant_id)s, %(run_id)s, r.key, r.value, r.awaited, r.awaited_event_id,
           %(version)s
    FROM jsonb_to_recordset(%(results)s) AS r(key text, value jsonb, awaited boolean,
                                               awaited_event_id text)
    ON CONFLICT (tenant_id, run_id, key) DO UPDATE
    SET value = excluded.value, awaited = excluded.awaited,
        awaited_event_id = excluded.awaited_event_id, version = excluded.version
    WHERE run_results.version <= excluded.version
    RETURNING 1
)
INSERT INTO workflow_runs (tenant_id, run_id, workflow_name, status, version,
                           definition_fingerprint, trigger_event_type, started_at, updated_at,
                           workflow_version)
VALUES (%(tenant_id)s, %(run_id)s, %(workflow_name)s, %(status)s, %(version)s,
        %(definition_fingerprint)s, %(trigger_event_type)s, %(now)s, %(now)s,
        %(workflow_version)s)
ON CONFLICT (tenant_id, run_id) DO UPDATE
SET status = excluded.status, version = excluded.version, updated_at = excluded.updated_at,
    definition_fingerprint = excluded.definition_fingerprint,
    workflow_version = COALESCE(excluded.workflow_version, workflow_runs.workflow_version);
