-- Named queries of the engine. Each starts with `-- name: <name>` and a one-line
-- purpose; parameters are psycopg named placeholders. Loaded once (store/queries.py).

-- name: append_event
-- Append one event at an explicit version; no row back means the version is taken.
INSERT INTO wf_events (tenant_id, stream_id, stream_type, version, type, payload, metadata, recorded_at)
VALUES (%(tenant_id)s, %(stream_id)s, %(stream_type)s, %(version)s, %(type)s, %(payload)s,
        %(metadata)s, %(recorded_at)s)
ON CONFLICT (tenant_id, stream_id, version) DO NOTHING
RETURNING position;

-- name: load_stream
-- Every event of one stream, oldest first.
SELECT position, tenant_id::text AS tenant_id, stream_id::text AS stream_id, stream_type, version,
       type, payload, metadata, recorded_at
FROM wf_events
WHERE tenant_id = %(tenant_id)s AND stream_id = %(stream_id)s
ORDER BY version;

-- name: load_run_stream
-- A run's events, oldest first; the first row also carries its trigger event's inbox
-- row, so a resume reads everything it needs in one round trip.
SELECT e.position, e.tenant_id::text AS tenant_id, e.stream_id::text AS stream_id,
       e.stream_type, e.version, e.type, e.payload, e.metadata, e.recorded_at,
       i.event_id AS trigger_event_id, i.source AS trigger_source, i.type AS trigger_type,
       i.detail AS trigger_detail, i.event_time AS trigger_event_time,
       i.received_at AS trigger_received_at
FROM wf_events e
LEFT JOIN inbox i
       ON e.version = 1 AND i.tenant_id = e.tenant_id
      AND i.event_id = e.payload #>> '{triggerEventRef,eventId}'
WHERE e.tenant_id = %(tenant_id)s AND e.stream_id = %(stream_id)s
ORDER BY e.version;

-- name: load_run_tail
-- What a resume needs of a run's stream: its first event (with the trigger's inbox row)
-- and the events from its last pass's outcome on (workflow_runs.version, written with
-- that outcome), so a resume reads a few events however long the run is. Without a
-- summary row it reads the whole stream.
SELECT e.position, e.tenant_id::text AS tenant_id, e.stream_id::text AS stream_id,
       e.stream_type, e.version, e.type, e.payload, e.metadata, e.recorded_at,
       i.event_id AS trigger_event_id, i.source AS trigger_source, i.type AS trigger_type,
       i.detail AS trigger_detail, i.event_time AS trigger_event_time,
       i.received_at AS trigger_received_at
FROM wf_events e
LEFT JOIN inbox i
       ON e.version = 1 AND i.tenant_id = e.tenant_id
      AND i.event_id = e.payload #>> '{triggerEventRef,eventId}'
WHERE e.tenant_id = %(tenant_id)s AND e.stream_id = %(stream_id)s
  AND (e.version = 1 OR e.version >= coalesce(
        (SELECT r.version FROM workflow_runs r
         WHERE r.tenant_id = %(tenant_id)s AND r.run_id = %(stream_id)s), 0))
ORDER BY e.version;

-- name: read_events_after
-- Catch-up read in commit order. Only events of transactions older than every
-- transaction still in flight are returned: an event whose transaction commits late
-- always has an xid >= the current snapshot's xmin, so it is read on a later call and
-- never skipped, even though its position is lower than events already read. Ordering
-- by (xid, position) is a total order that no future commit can insert into behind
-- the checkpoint. (ORDER BY names the table's columns: the text alias of xid would
-- sort "1000" before "995".)
SELECT position, xid::text AS xid, tenant_id::text AS tenant_id, stream_id::text AS stream_id,
       stream_type, version, type, payload, metadata, recorded_at
FROM wf_events
WHERE (xid, position) > (%(after_xid)s::xid8, %(after_position)s)
  AND xid < pg_snapshot_xmin(pg_current_snapshot())
ORDER BY wf_events.xid, wf_events.position
LIMIT %(limit)s;

-- name: lock_checkpoint
-- The projection's checkpoint, locked so concurrent catch-ups of one projection serialise.
SELECT last_xid::text AS last_xid, last_position
FROM projection_checkpoints
WHERE name = %(name)s
FOR UPDATE;

-- name: create_checkpoint
-- First run of a projection starts before every event.
INSERT INTO projection_checkpoints (name, last_xid, last_position, updated_at)
VALUES (%(name)s, '0'::xid8, 0, %(now)s)
ON CONFLICT (name) DO NOTHING;

-- name: save_checkpoint
-- Advance a projection, in the same transaction as its writes.
UPDATE projection_checkpoints
SET last_xid = %(last_xid)s::xid8, last_position = %(last_position)s, updated_at = %(now)s
WHERE name = %(name)s;

-- name: insert_inbox
-- Store a domain event; no row back means it was stored before (a redelivery).
INSERT INTO inbox (tenant_id, event_id, source, type, detail, event_time, received_at)
VALUES (%(tenant_id)s, %(event_id)s, %(source)s, %(type)s, %(detail)s, %(event_time)s,
        %(received_at)s)
ON CONFLICT (tenant_id, event_id) DO NOTHING
RETURNING position;

-- name: get_inbox_event
-- One stored domain event of a tenant.
SELECT tenant_id::text AS tenant_id, event_id, source, type, detail, event_time, received_at,
       erased_at, position
FROM inbox
WHERE tenant_id = %(tenant_id)s AND event_id = %(event_id)s;

-- name: claim_inbox_trigger
-- Mark an inbox event's triggers as processed; no row back means they were before.
UPDATE inbox SET triggered_at = %(now)s
WHERE tenant_id = %(tenant_id)s AND event_id = %(event_id)s AND triggered_at IS NULL
RETURNING event_id;

-- name: claim_inbox_wakeup
-- Mark an inbox event as matched against waiting runs; no row back means it was before.
UPDATE inbox SET woken_at = %(now)s
WHERE tenant_id = %(tenant_id)s AND event_id = %(event_id)s AND woken_at IS NULL
RETURNING received_at;

-- name: awaited_event_candidates
-- Stored events of one type a waiting step of a run may still take, oldest first: not
-- erased, and not taken by an earlier wait of the run (run_consumed_events; a 0.1
-- suspension also lists them itself, %(exclude)s).
SELECT i.event_id, i.type, i.detail, i.received_at, i.position
FROM inbox i
WHERE i.tenant_id = %(tenant_id)s AND i.type = %(type)s AND i.received_at >= %(since)s
  AND i.position > %(after_position)s
  AND i.detail IS NOT NULL AND NOT (i.event_id = ANY(%(exclude)s))
  AND NOT EXISTS (
      SELECT 1 FROM run_consumed_events c
      WHERE c.tenant_id = i.tenant_id AND c.run_id = %(run_id)s AND c.event_id = i.event_id)
ORDER BY i.position
LIMIT %(limit)s;

-- name: register_tenant
-- Remember a tenant (the due scan starts its cron workflows).
INSERT INTO tenants (tenant_id, first_seen) VALUES (%(tenant_id)s, %(now)s)
ON CONFLICT (tenant_id) DO NOTHING;

-- name: list_tenants
-- Every known tenant.
SELECT tenant_id::text AS tenant_id FROM tenants ORDER BY tenant_id;

-- name: lock_event_type
-- Serialise wakeups and pending-row creation for one tenant and awaited type, so an
-- awaited event and a new waiting row can never miss each other (see operations).
SELECT pg_advisory_xact_lock(hashtextextended(%(tenant_id)s || '|' || %(type)s, 7));

-- name: upsert_run
-- Inline run summary, written with the events it summarises. A redrive may move the run
-- to another definition; a caller without the workflow version keeps the one recorded.
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

-- name: get_run
-- One run summary.
SELECT tenant_id::text AS tenant_id, run_id::text AS run_id, workflow_name, status, version,
       definition_fingerprint, trigger_event_type, started_at, updated_at, workflow_version
FROM workflow_runs
WHERE tenant_id = %(tenant_id)s AND run_id = %(run_id)s;

-- name: list_runs
-- Run summaries of a tenant, newest first, optionally by workflow and status.
SELECT tenant_id::text AS tenant_id, run_id::text AS run_id, workflow_name, status, version,
       definition_fingerprint, trigger_event_type, started_at, updated_at, workflow_version
FROM workflow_runs
WHERE tenant_id = %(tenant_id)s
  AND (%(workflow_name)s::text IS NULL OR workflow_name = %(workflow_name)s)
  AND (%(status)s::text IS NULL OR status = %(status)s)
ORDER BY updated_at DESC, run_id
LIMIT %(limit)s;

-- name: upsert_pending
-- A suspension's pending row (D1: one per run; a new suspension replaces the old).
INSERT INTO workflow_run_pending (tenant_id, run_id, step_index, workflow_name,
    suspension_event_type, wake_at, retry_attempt, definition_fingerprint, wait_event_type,
    match_expr, suspension_version, lookback_from, match_key)
VALUES (%(tenant_id)s, %(run_id)s, %(step_index)s, %(workflow_name)s, %(suspension_event_type)s,
        %(wake_at)s, %(retry_attempt)s, %(definition_fingerprint)s, %(wait_event_type)s,
        %(match_expr)s, %(suspension_version)s, %(lookback_from)s, %(match_key)s)
ON CONFLICT (tenant_id, run_id, step_index) DO UPDATE
SET workflow_name = excluded.workflow_name, suspension_event_type = excluded.suspension_event_type,
    wake_at = excluded.wake_at, retry_attempt = excluded.retry_attempt,
    definition_fingerprint = excluded.definition_fingerprint,
    wait_event_type = excluded.wait_event_type, match_expr = excluded.match_expr,
    suspension_version = excluded.suspension_version, lookback_from = excluded.lookback_from,
    match_key = excluded.match_key,
    trigger_event_type = NULL, trigger_payload = NULL, awaited_event_id = NULL, leased_until = NULL
WHERE workflow_run_pending.suspension_version <= excluded.suspension_version;

-- name: delete_runs_pending
-- Drop the rows of many runs at once (the projection's batched deletes).
DELETE FROM workflow_run_pending p
USING unnest(%(tenant_ids)s::uuid[], %(run_ids)s::uuid[]) AS d(tenant_id, run_id)
WHERE p.tenant_id = d.tenant_id AND p.run_id = d.run_id;

-- name: mark_pending_matched
-- Record the awaited event on a waiting row and make it due now.
UPDATE workflow_run_pending
SET trigger_event_type = %(event_type)s, awaited_event_id = %(event_id)s,
    wake_at = least(wake_at, %(now)s), leased_until = NULL
WHERE tenant_id = %(tenant_id)s AND run_id = %(run_id)s AND suspension_version = %(suspension_version)s;

-- name: waiting_rows_for_event
-- A tenant's unmatched waits for one event type that may take an event stored at
-- %(received_at)s: those without an equality key, and those whose key the event offers
-- (all of them when %(keys)s is NULL).
SELECT run_id::text AS run_id, step_index, match_expr, suspension_version
FROM workflow_run_pending
WHERE tenant_id = %(tenant_id)s AND wait_event_type = %(type)s AND awaited_event_id IS NULL
  AND (%(keys)s::text[] IS NULL OR match_key IS NULL OR match_key = ANY(%(keys)s::text[]))
  AND (lookback_from IS NULL OR lookback_from <= %(received_at)s)
ORDER BY suspension_version, run_id;

-- name: due_pending
-- A tenant's rows due at %(now)s, oldest first.
SELECT run_id::text AS run_id, step_index, wake_at, suspension_event_type, workflow_name,
       awaited_event_id
FROM workflow_run_pending
WHERE tenant_id = %(tenant_id)s AND wake_at <= %(now)s
ORDER BY wake_at, run_id
LIMIT %(limit)s;

-- name: list_pending
-- A tenant's pending rows due before a bound, soonest first.
SELECT run_id::text AS run_id, step_index, workflow_name, suspension_event_type, wake_at,
       retry_attempt, wait_event_type, match_expr, awaited_event_id, suspension_version,
       leased_until
FROM workflow_run_pending
WHERE tenant_id = %(tenant_id)s AND (%(before)s::timestamptz IS NULL OR wake_at <= %(before)s)
ORDER BY wake_at, run_id
LIMIT %(limit)s;

-- name: insert_outbox
-- A dispatch request, delivered after the pass commits.
INSERT INTO dispatch_outbox (tenant_id, request_id, run_id, step_kind, request, next_attempt_at,
                             created_at)
VALUES (%(tenant_id)s, %(request_id)s, %(run_id)s, %(step_kind)s, %(request)s, %(now)s, %(now)s)
ON CONFLICT (tenant_id, request_id) DO NOTHING;
