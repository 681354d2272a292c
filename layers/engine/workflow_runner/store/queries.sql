-- Named queries of the engine. Each starts with `-- name: <name>` and a one-line
-- purpose; parameters are psycopg named placeholders. Loaded once (store/queries.py).

-- name: append_to_many
-- Append one event to each of many streams of a tenant, each at an explicit version
-- (%(appends)s: a JSON array of {stream_id, version, payload}, inserted in its order); the
-- streams that come back got theirs (the version of the others was taken).
INSERT INTO wf_events (tenant_id, stream_id, stream_type, version, type, payload, metadata,
                       recorded_at)
SELECT %(tenant_id)s, s.stream_id, %(stream_type)s, s.version, %(type)s, s.payload, '{}'::jsonb,
       %(recorded_at)s
FROM ROWS FROM (jsonb_to_recordset(%(appends)s)
                AS (stream_id uuid, version integer, payload jsonb))
     WITH ORDINALITY AS s(stream_id, version, payload, n)
ORDER BY s.n
ON CONFLICT (tenant_id, stream_id, version) DO NOTHING
RETURNING stream_id::text AS stream_id;

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
-- What a resume needs of each run asked for (%(tenant_ids)s and %(run_ids)s, pairwise;
-- `n` numbers them from 1): its first event (with the trigger's inbox row) and the
-- events from its last pass's outcome on (workflow_runs.version, written with that
-- outcome), so a resume reads a few events however long the run is: two index range
-- reads per run. Without a summary row it reads the whole stream. The first event's row
-- also carries the run's current results (`results`: the rows of run_results, as a
-- JSON array of objects with its columns), so a batch of resumes reads everything it
-- needs in one statement. A match of the open wait (an awaited event or a callback's
-- answer: store/streams.py's MATCH_TYPES) carries the inbox row it names in the same
-- columns as the trigger's (and `trigger_erased_at`), so the pass of an event wait
-- needs no read of its own either.
SELECT q.n, e.position, e.tenant_id::text AS tenant_id, e.stream_id::text AS stream_id,
       e.stream_type, e.version, e.type, e.payload, e.metadata, e.recorded_at,
       i.event_id AS trigger_event_id, i.source AS trigger_source, i.type AS trigger_type,
       i.detail AS trigger_detail, i.event_time AS trigger_event_time,
       i.received_at AS trigger_received_at, i.erased_at AS trigger_erased_at,
       CASE WHEN e.version = 1 THEN (
           SELECT coalesce(jsonb_agg(jsonb_build_object(
                      'key', r.key, 'value', r.value, 'awaited', r.awaited,
                      'awaited_event_id', r.awaited_event_id, 'awaited_detail', ri.detail,
                      'awaited_missing', r.awaited_event_id IS NOT NULL AND ri.detail IS NULL)),
                  '[]'::jsonb)
           FROM run_results r
           LEFT JOIN inbox ri
                  ON r.awaited AND ri.tenant_id = r.tenant_id AND ri.event_id = r.awaited_event_id
           WHERE r.tenant_id = q.tenant_id AND r.run_id = q.run_id)
       END AS results
FROM unnest(%(tenant_ids)s::uuid[], %(run_ids)s::uuid[]) WITH ORDINALITY AS q(tenant_id, run_id, n)
CROSS JOIN LATERAL (
    SELECT greatest(2, coalesce(max(r.version), 0)) AS tail_from
    FROM workflow_runs r WHERE r.tenant_id = q.tenant_id AND r.run_id = q.run_id
) t
CROSS JOIN LATERAL (
    SELECT * FROM wf_events w
    WHERE w.tenant_id = q.tenant_id AND w.stream_id = q.run_id AND w.version = 1
    UNION ALL
    SELECT * FROM wf_events w
    WHERE w.tenant_id = q.tenant_id AND w.stream_id = q.run_id AND w.version >= t.tail_from
) e
LEFT JOIN inbox i
       ON i.tenant_id = e.tenant_id
      AND i.event_id = CASE
              WHEN e.version = 1 THEN e.payload #>> '{triggerEventRef,eventId}'
              WHEN e.type IN ('workflow.step.event-matched', 'workflow.callback.completed',
                              'workflow.callback.failed') THEN e.payload ->> 'eventId'
          END
ORDER BY q.n, e.version;

-- name: projection_horizon
-- The transaction id below which the pending projection may read wf_events: the
-- snapshot's xmax, lowered to the oldest transaction still running in one of the
-- engine's own sessions (this database, its application name or its database user).
-- Transactions of other databases and other applications never write wf_events, so
-- unlike pg_snapshot_xmin() they no longer hold the projection back (an idle
-- transaction anywhere on the cluster used to stop every timer and wakeup).
-- Ordering argument: the snapshot is taken when this statement starts, the sessions
-- are read while it runs. An own transaction with an xid below the result was either
-- seen running (then the result is not above its xid) or had finished when the
-- sessions were read, i.e. before the next statement's snapshot reads the events; so
-- every own event below the horizon is committed (or rolled back) and visible to that
-- read. Running own xids are taken from the snapshot's xip list (xid8, so no epoch
-- arithmetic), matched to pg_stat_activity's 32-bit backend_xid. It must be the first
-- statement of its transaction: pg_stat_activity is cached for the rest of it.
SELECT least(
           pg_snapshot_xmax(s.snap),
           (SELECT min(x) FROM pg_snapshot_xip(s.snap) AS x
            WHERE x::text::bigint %% 4294967296 IN (
                SELECT a.backend_xid::text::bigint FROM pg_stat_activity a
                WHERE a.datname = current_database() AND a.backend_xid IS NOT NULL
                  AND (a.application_name LIKE 'workflow-runner%%'
                       OR a.usename = current_user)))
       )::text AS horizon
FROM (SELECT pg_current_snapshot() AS snap) s;

-- name: read_events_after
-- Catch-up read in commit order, below the horizon of projection_horizon (taken by an
-- earlier statement of the same transaction). Every engine transaction with an xid
-- below it has finished, so an event whose transaction commits late (xid >= horizon)
-- is read on a later call and never skipped, even though its position is lower than
-- events already read. Ordering by (xid, position) is a total order that no future
-- commit can insert into behind the checkpoint. (ORDER BY names the table's columns:
-- the text alias of xid would sort "1000" before "995".) Only events of
-- %(payload_types)s carry their payload; the others come without (NULL) and without
-- metadata: the reader acts on their type alone, and decoding what it never reads was
-- a fifth of a catch-up's Python in a backlog of resumes.
SELECT position, xid::text AS xid, tenant_id::text AS tenant_id, stream_id::text AS stream_id,
       stream_type, version, type,
       CASE WHEN type = ANY(%(payload_types)s::text[]) THEN payload END AS payload,
       recorded_at
FROM wf_events
WHERE (xid, position) > (%(after_xid)s::xid8, %(after_position)s)
  AND xid < %(horizon)s::xid8
ORDER BY wf_events.xid, wf_events.position
LIMIT %(limit)s;

-- name: projection_lag
-- The recorded_at of the first run-stream event the projection has not applied yet (in
-- commit order, from the index: one row) and how many there are. Counting is the costly
-- part, and a projection that runs in a loop reads its lag after every catch-up: while the
-- oldest unapplied event is younger than count_before (a few seconds: the projection is
-- keeping up) the count stops at quick_cap, otherwise at cap. The counts walk the
-- commit-order index from the checkpoint (ORDER BY): the planner cannot know how far
-- behind the checkpoint is and would otherwise scan the table.
SELECT o.recorded_at AS oldest,
       CASE
         WHEN o.recorded_at IS NULL THEN 0
         WHEN o.recorded_at < %(count_before)s::timestamptz THEN
           (SELECT count(*) FROM (
              SELECT 1 FROM wf_events e
              WHERE (e.xid, e.position) > (c.last_xid, c.last_position)
                AND e.stream_type = 'workflow-run'
              ORDER BY e.xid, e.position
              LIMIT %(cap)s::bigint) behind)
         ELSE
           (SELECT count(*) FROM (
              SELECT 1 FROM wf_events e
              WHERE (e.xid, e.position) > (c.last_xid, c.last_position)
                AND e.stream_type = 'workflow-run'
              ORDER BY e.xid, e.position
              LIMIT %(quick_cap)s::bigint) behind)
       END AS behind
FROM projection_checkpoints c
LEFT JOIN LATERAL (
    SELECT e.recorded_at FROM wf_events e
    WHERE (e.xid, e.position) > (c.last_xid, c.last_position)
      AND e.stream_type = 'workflow-run'
    ORDER BY e.xid, e.position
    LIMIT 1) o ON true
WHERE c.name = %(name)s;

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
-- Store domain events (%(events)s, one object each; `detail` wrapped as {"v": …} so that
-- a JSON null stays a jsonb null) with the keys they offer, in (tenant, id) order so two
-- batches lock alike, and with %(register)s remember their tenants. The events that
-- come back are stored now; the others were stored before (redeliveries). With
-- %(claim)s the events stored now are stored with their triggers claimed (as
-- claim_inbox_trigger marks them: the caller starts their runs in this transaction),
-- which spares each a second row version; claim_inbox_trigger then claims only
-- events stored before.
WITH input AS (
    SELECT e.tenant_id, e.event_id, e.source, e.type, e.detail -> 'v' AS detail,
           e.event_time,
           CASE WHEN e.match_keys IS NULL OR jsonb_typeof(e.match_keys) <> 'array' THEN NULL
                ELSE ARRAY(SELECT jsonb_array_elements_text(e.match_keys)) END AS match_keys
    FROM jsonb_to_recordset(%(events)s) AS e(tenant_id uuid, event_id text, source text,
                                             type text, detail jsonb,
                                             event_time timestamptz, match_keys jsonb)
), tenants AS (
    INSERT INTO tenants (tenant_id, first_seen)
    SELECT DISTINCT tenant_id, %(now)s::timestamptz FROM input WHERE %(register)s
    ON CONFLICT (tenant_id) DO NOTHING
)
INSERT INTO inbox (tenant_id, event_id, source, type, detail, event_time, received_at,
                   match_keys, triggered_at)
SELECT tenant_id, event_id, source, type, detail, event_time, %(now)s, match_keys,
       CASE WHEN %(claim)s THEN %(now)s::timestamptz END
FROM input
ORDER BY tenant_id, event_id
ON CONFLICT (tenant_id, event_id) DO NOTHING
RETURNING tenant_id::text AS tenant_id, event_id;

-- name: get_inbox_event
-- One stored domain event of a tenant.
SELECT tenant_id::text AS tenant_id, event_id, source, type, detail, event_time, received_at,
       erased_at, position
FROM inbox
WHERE tenant_id = %(tenant_id)s AND event_id = %(event_id)s;

-- name: claim_inbox_trigger
-- Mark the triggers of inbox events (%(tenant_ids)s and %(event_ids)s, pairwise) as
-- processed, locking them in (tenant, id) order; the events that come back are claimed
-- now, the others were before.
WITH target AS (
    SELECT i.tenant_id, i.event_id
    FROM inbox i
    JOIN unnest(%(tenant_ids)s::uuid[], %(event_ids)s::text[]) AS q(tenant_id, event_id)
      ON i.tenant_id = q.tenant_id AND i.event_id = q.event_id
    WHERE i.triggered_at IS NULL
    ORDER BY i.tenant_id, i.event_id
    FOR UPDATE OF i
)
UPDATE inbox SET triggered_at = %(now)s
FROM target
WHERE inbox.tenant_id = target.tenant_id AND inbox.event_id = target.event_id
  AND inbox.triggered_at IS NULL
RETURNING inbox.tenant_id::text AS tenant_id, inbox.event_id;

-- name: inbox_wakeup_states
-- Awaited events' instants (their EventBridge time, else when they were received) and
-- whether every waiting run has been matched against each already (woken_at set), for
-- %(tenant_ids)s and %(event_ids)s pairwise, by position (n from 1); an event not
-- stored has no row.
SELECT q.n, coalesce(i.event_time, i.received_at) AS instant, i.woken_at IS NOT NULL AS done
FROM unnest(%(tenant_ids)s::uuid[], %(event_ids)s::text[]) WITH ORDINALITY AS q(tenant_id, event_id, n)
JOIN inbox i ON i.tenant_id = q.tenant_id AND i.event_id = q.event_id;

-- name: finish_inbox_wakeup
-- Every waiting run has been matched against these events (%(tenant_ids)s and
-- %(event_ids)s pairwise): a redelivery matches nothing.
UPDATE inbox i SET woken_at = coalesce(i.woken_at, %(now)s)
FROM unnest(%(tenant_ids)s::uuid[], %(event_ids)s::text[]) AS q(tenant_id, event_id)
WHERE i.tenant_id = q.tenant_id AND i.event_id = q.event_id;

-- name: lookback_keyed
-- Stored events of one type a new wait whose match requires the equality key %(key)s
-- may take, in (instant, position) order after the cursor (the instant is the
-- EventBridge time, else the receive time): the events offering the key, or too many
-- keys to list ('*'), through the GIN index on match_keys; and rows stored without
-- keys (release 0.1.0) through the unkeyed branch of inbox_lookback_idx. Never an event
-- the run took with an earlier wait (run_consumed_events; a 0.1 suspension also lists
-- them itself, %(exclude)s).
(SELECT event_id, detail, coalesce(event_time, received_at) AS instant, position
 FROM inbox
 WHERE tenant_id = %(tenant_id)s AND type = %(type)s
   AND match_keys && ARRAY[%(key)s, '*']::text[]
   AND (coalesce(event_time, received_at), position) > (%(after_instant)s, %(after_position)s)
   AND detail IS NOT NULL AND NOT (event_id = ANY(%(exclude)s))
   AND NOT EXISTS (SELECT 1 FROM run_consumed_events c
                   WHERE c.tenant_id = %(tenant_id)s AND c.run_id = %(run_id)s
                     AND c.event_id = inbox.event_id)
 ORDER BY 3, 4
 LIMIT %(limit)s)
UNION ALL
(SELECT event_id, detail, coalesce(event_time, received_at) AS instant, position
 FROM inbox
 WHERE tenant_id = %(tenant_id)s AND type = %(type)s AND (match_keys IS NULL) IS TRUE
   AND (coalesce(event_time, received_at), position) > (%(after_instant)s, %(after_position)s)
   AND detail IS NOT NULL AND NOT (event_id = ANY(%(exclude)s))
   AND NOT EXISTS (SELECT 1 FROM run_consumed_events c
                   WHERE c.tenant_id = %(tenant_id)s AND c.run_id = %(run_id)s
                     AND c.event_id = inbox.event_id)
 ORDER BY 3, 4
 LIMIT %(limit)s)
ORDER BY instant, position
LIMIT %(limit)s;

-- name: lookback_any
-- Stored events of one type a new wait without an equality key may take, in (instant,
-- position) order after the cursor: both branches of inbox_lookback_idx, merged (the
-- run's consumed events excluded as in lookback_keyed).
(SELECT event_id, detail, coalesce(event_time, received_at) AS instant, position
 FROM inbox
 WHERE tenant_id = %(tenant_id)s AND type = %(type)s AND (match_keys IS NULL) IS FALSE
   AND (coalesce(event_time, received_at), position) > (%(after_instant)s, %(after_position)s)
   AND detail IS NOT NULL AND NOT (event_id = ANY(%(exclude)s))
   AND NOT EXISTS (SELECT 1 FROM run_consumed_events c
                   WHERE c.tenant_id = %(tenant_id)s AND c.run_id = %(run_id)s
                     AND c.event_id = inbox.event_id)
 ORDER BY 3, 4
 LIMIT %(limit)s)
UNION ALL
(SELECT event_id, detail, coalesce(event_time, received_at) AS instant, position
 FROM inbox
 WHERE tenant_id = %(tenant_id)s AND type = %(type)s AND (match_keys IS NULL) IS TRUE
   AND (coalesce(event_time, received_at), position) > (%(after_instant)s, %(after_position)s)
   AND detail IS NOT NULL AND NOT (event_id = ANY(%(exclude)s))
   AND NOT EXISTS (SELECT 1 FROM run_consumed_events c
                   WHERE c.tenant_id = %(tenant_id)s AND c.run_id = %(run_id)s
                     AND c.event_id = inbox.event_id)
 ORDER BY 3, 4
 LIMIT %(limit)s)
ORDER BY instant, position
LIMIT %(limit)s;

-- name: lookback_first_pages
-- The first rows of many new waits' look-backs in one statement: for each wait of
-- %(waits)s (n, tenant_id, run_id, type, key, after_instant, after_position, exclude),
-- its first %(limit)s rows of lookback_keyed (key set) or lookback_any (key NULL), the
-- same three index-driven branches, each wait's own: the events offering its key or
-- '*' (keyed), every keyed event (no key), the events stored without keys (both);
-- never one its run consumed. Rows in (n, instant, position) order, each with its n.
-- The caller holds each (tenant, type) lock (lock_event_type) already. In the keyed
-- branch the cursor is a filter (IS TRUE), not an index condition: the plan, which
-- cannot see the cursors, otherwise ANDed the key's GIN lookup with the range of every
-- event of the type after the cursor (50,000 entries read for one wait; 7.7 ms
-- against 3.3 ms for lookback_keyed alone).
SELECT w.n, l.event_id, l.detail, l.instant, l.position
FROM jsonb_to_recordset(%(waits)s) AS w(n integer, tenant_id uuid, run_id uuid, type text,
                                        key text, after_instant timestamptz,
                                        after_position bigint, exclude text[])
CROSS JOIN LATERAL (
    (SELECT event_id, detail, coalesce(event_time, received_at) AS instant, position
     FROM inbox
     WHERE w.key IS NOT NULL AND tenant_id = w.tenant_id AND type = w.type
       AND match_keys && ARRAY[w.key, '*']::text[]
       AND ((coalesce(event_time, received_at), position)
            > (w.after_instant, w.after_position)) IS TRUE
       AND detail IS NOT NULL AND NOT (event_id = ANY(w.exclude))
       AND NOT EXISTS (SELECT 1 FROM run_consumed_events c
                       WHERE c.tenant_id = w.tenant_id AND c.run_id = w.run_id
                         AND c.event_id = inbox.event_id)
     ORDER BY 3, 4
     LIMIT %(limit)s)
    UNION ALL
    (SELECT event_id, detail, coalesce(event_time, received_at) AS instant, position
     FROM inbox
     WHERE w.key IS NULL AND tenant_id = w.tenant_id AND type = w.type
       AND (match_keys IS NULL) IS FALSE
       AND (coalesce(event_time, received_at), position) > (w.after_instant, w.after_position)
       AND detail IS NOT NULL AND NOT (event_id = ANY(w.exclude))
       AND NOT EXISTS (SELECT 1 FROM run_consumed_events c
                       WHERE c.tenant_id = w.tenant_id AND c.run_id = w.run_id
                         AND c.event_id = inbox.event_id)
     ORDER BY 3, 4
     LIMIT %(limit)s)
    UNION ALL
    (SELECT event_id, detail, coalesce(event_time, received_at) AS instant, position
     FROM inbox
     WHERE tenant_id = w.tenant_id AND type = w.type AND (match_keys IS NULL) IS TRUE
       AND (coalesce(event_time, received_at), position) > (w.after_instant, w.after_position)
       AND detail IS NOT NULL AND NOT (event_id = ANY(w.exclude))
       AND NOT EXISTS (SELECT 1 FROM run_consumed_events c
                       WHERE c.tenant_id = w.tenant_id AND c.run_id = w.run_id
                         AND c.event_id = inbox.event_id)
     ORDER BY 3, 4
     LIMIT %(limit)s)
    ORDER BY instant, position
    LIMIT %(limit)s
) l
ORDER BY w.n, l.instant, l.position;

-- name: register_tenant
-- Remember a tenant (the due scan starts its cron workflows).
INSERT INTO tenants (tenant_id, first_seen) VALUES (%(tenant_id)s, %(now)s)
ON CONFLICT (tenant_id) DO NOTHING;

-- name: list_tenants
-- Every known tenant.
SELECT tenant_id::text AS tenant_id FROM tenants ORDER BY tenant_id;

-- name: generic_plans_in_transaction
-- The statements that follow in this transaction run on their generic plans once
-- prepared (plan_cache_mode, until the transaction ends); the mode they replace is kept
-- in workflow_runner.plan_cache_mode_before for chosen_plans_in_transaction. For
-- waiting_rows_for_events: its generic plan probes the index by key whatever the
-- statistics, while the server's own choice kept planning it anew on every run (0.5 ms
-- a run against 0.15).
SELECT set_config('workflow_runner.plan_cache_mode_before',
                  current_setting('plan_cache_mode'), true),
       set_config('plan_cache_mode', 'force_generic_plan', true);

-- name: chosen_plans_in_transaction
-- The statements that follow in this transaction run on the plans they ran on before
-- generic_plans_in_transaction (for a read that alone needs generic plans): the mode
-- it kept, which is the session's or role's setting, or one the transaction set.
SELECT set_config('plan_cache_mode',
                  current_setting('workflow_runner.plan_cache_mode_before'), true);

-- name: lock_run_answers
-- Serialize what reaches one run from outside its passes: task outcomes and callback
-- answers (a parallel's tasks ending at once, a callback answered meanwhile). Each
-- reads the run after the one before it committed, so none loses the run's next
-- version to another. Only those writers take it, first in their transaction, holding
-- nothing else (engine/task_outcomes.py, engine/callback_answers.py).
SELECT pg_advisory_xact_lock(
    hashtextextended(%(tenant_id)s || ':' || %(run_id)s || ':answers', 19));

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

-- name: migrate_run_summary
-- An operator migrated the waiting run onto another definition. Its version stays: it
-- is where a resume starts reading the stream (load_run_tail), which must include the
-- open suspension the migration moved.
UPDATE workflow_runs
SET definition_fingerprint = %(definition_fingerprint)s, workflow_version = %(workflow_version)s,
    updated_at = %(now)s
WHERE tenant_id = %(tenant_id)s AND run_id = %(run_id)s;

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
-- Suspensions' pending rows (D1: one per run; a new suspension replaces the old), any
-- number in one statement (%(rows)s: a JSON array of objects with the columns; at most
-- one per (tenant, run, step), which the projection ensures).
INSERT INTO workflow_run_pending (tenant_id, run_id, step_index, workflow_name,
    suspension_event_type, wake_at, retry_attempt, definition_fingerprint, wait_event_type,
    match_expr, suspension_version, lookback_from, match_key, consumed_event_ids,
    lookback_after_instant, lookback_after_position, lookback_version)
SELECT r.tenant_id, r.run_id, r.step_index, r.workflow_name, r.suspension_event_type,
       r.wake_at, r.retry_attempt, r.definition_fingerprint, r.wait_event_type, r.match_expr,
       r.suspension_version, r.lookback_from, r.match_key, r.consumed_event_ids,
       r.lookback_after_instant, r.lookback_after_position, r.lookback_version
FROM jsonb_to_recordset(%(rows)s) AS r(tenant_id uuid, run_id uuid, step_index integer,
    workflow_name text, suspension_event_type text, wake_at timestamptz,
    retry_attempt integer, definition_fingerprint text, wait_event_type text,
    match_expr jsonb, suspension_version integer, lookback_from timestamptz,
    match_key text, consumed_event_ids text[], lookback_after_instant timestamptz,
    lookback_after_position bigint, lookback_version integer)
ON CONFLICT (tenant_id, run_id, step_index) DO UPDATE
SET workflow_name = excluded.workflow_name, suspension_event_type = excluded.suspension_event_type,
    wake_at = excluded.wake_at, retry_attempt = excluded.retry_attempt,
    definition_fingerprint = excluded.definition_fingerprint,
    wait_event_type = excluded.wait_event_type, match_expr = excluded.match_expr,
    suspension_version = excluded.suspension_version, lookback_from = excluded.lookback_from,
    match_key = excluded.match_key, consumed_event_ids = excluded.consumed_event_ids,
    lookback_after_instant = excluded.lookback_after_instant,
    lookback_after_position = excluded.lookback_after_position,
    lookback_version = excluded.lookback_version,
    trigger_event_type = NULL, trigger_payload = NULL, awaited_event_id = NULL, leased_until = NULL,
    match_after_version = NULL
WHERE workflow_run_pending.suspension_version <= excluded.suspension_version;

-- name: migrate_pending
-- An operator migrated the run (`workflow.run-migrated`): its row moves with its
-- suspension (step, definition), and a matching event is appended only after the
-- migration's events (%(match_after)s). The rest stays: a match, a lease, a look-back.
-- Returns what a new look-back of an unmatched wait needs.
UPDATE workflow_run_pending
SET step_index = %(step_index)s, definition_fingerprint = %(fingerprint)s,
    match_after_version = %(match_after)s
WHERE tenant_id = %(tenant_id)s AND run_id = %(run_id)s
  AND suspension_version = %(suspension_version)s
RETURNING step_index, suspension_version, wait_event_type, match_expr, match_key,
          consumed_event_ids, lookback_from, awaited_event_id;

-- name: set_pending_lookback
-- Move (or, with NULLs, end) the look-back of one suspension's row.
UPDATE workflow_run_pending
SET lookback_after_instant = %(after_instant)s, lookback_after_position = %(after_position)s,
    lookback_version = CASE WHEN %(after_position)s::bigint IS NULL THEN NULL
                            ELSE suspension_version END
WHERE tenant_id = %(tenant_id)s AND run_id = %(run_id)s
  AND suspension_version = %(suspension_version)s;

-- name: unfinished_lookbacks
-- Waiting rows whose look-back a projection batch left unfinished (of their current
-- suspension: a row an older release rewrote has a stale lookback_version).
SELECT tenant_id::text AS tenant_id, run_id::text AS run_id, step_index, suspension_version,
       wait_event_type, match_expr, match_key, consumed_event_ids, lookback_after_instant,
       lookback_after_position, coalesce(match_after_version, suspension_version) AS match_after
FROM workflow_run_pending
WHERE lookback_after_position IS NOT NULL AND lookback_version = suspension_version
  AND awaited_event_id IS NULL AND wait_event_type IS NOT NULL
ORDER BY tenant_id, run_id
LIMIT %(limit)s;

-- name: delete_runs_pending
-- Drop the rows of many runs at once (the projection's batched deletes).
DELETE FROM workflow_run_pending p
USING unnest(%(tenant_ids)s::uuid[], %(run_ids)s::uuid[]) AS d(tenant_id, run_id)
WHERE p.tenant_id = d.tenant_id AND p.run_id = d.run_id;

-- name: mark_pending_matched
-- Record the awaited event on a waiting row and make it due now (its look-back is over).
-- The lease is freed for the wakeup to send the row at once, unless the row already
-- carries this very match: the projection applying the match after the wakeup leased
-- and sent it must not free it for the due scan to send it a second time.
UPDATE workflow_run_pending
SET trigger_event_type = %(event_type)s, awaited_event_id = %(event_id)s,
    wake_at = least(wake_at, %(now)s),
    leased_until = CASE WHEN awaited_event_id IS NOT DISTINCT FROM %(event_id)s
                        THEN leased_until END,
    lookback_after_instant = NULL, lookback_after_position = NULL, lookback_version = NULL
WHERE tenant_id = %(tenant_id)s AND run_id = %(run_id)s AND suspension_version = %(suspension_version)s;

-- name: mark_pending_matched_rows
-- mark_pending_matched for many rows in one statement (%(rows)s: tenant_id, run_id,
-- suspension_version, event_type, event_id, at; at most one per run). A row that
-- already says all of it (the wakeup that appended the match marked it in the same
-- transaction: the usual case) is not written again: an update that changes nothing
-- still writes a new row version, its index entries and WAL.
UPDATE workflow_run_pending p
SET trigger_event_type = m.event_type, awaited_event_id = m.event_id,
    wake_at = least(p.wake_at, m.at),
    leased_until = CASE WHEN p.awaited_event_id IS NOT DISTINCT FROM m.event_id
                        THEN p.leased_until END,
    lookback_after_instant = NULL, lookback_after_position = NULL, lookback_version = NULL
FROM jsonb_to_recordset(%(rows)s) AS m(tenant_id uuid, run_id uuid, suspension_version integer,
                                        event_type text, event_id text, at timestamptz)
WHERE p.tenant_id = m.tenant_id AND p.run_id = m.run_id
  AND p.suspension_version = m.suspension_version
  AND (p.awaited_event_id IS DISTINCT FROM m.event_id
       OR p.trigger_event_type IS DISTINCT FROM m.event_type
       OR p.wake_at > m.at
       OR p.lookback_after_instant IS NOT NULL OR p.lookback_after_position IS NOT NULL
       OR p.lookback_version IS NOT NULL);

-- name: waiting_rows_for_events
-- A tenant's unmatched waits for one event type that may take each event of
-- %(events)s (its `n`, the place in the batch; event_id; instant; keys, NULL when the
-- event offers none): those without an equality key, and those whose key the event
-- offers (all of them when its keys are NULL); not those whose run consumed the event
-- with an earlier wait (a retried wakeup must not hand it to such a run again):
-- run_consumed_events, or the list a 0.1 suspension carried (consumed_event_ids).
-- `match_after`: the stream version its match is appended after. Each row names the
-- event (`n`) whose wait it may be, ordered by event, then run.
-- Three branches per event, each an index range of workflow_run_pending_event_waits_idx
-- (tenant, type, key): the keys the event offers, the waits without a key, and (only
-- when the event offers no keys) every keyed wait. One OR over the key would make every
-- event read every wait of its type (the key a filter, not an index condition). The
-- first branch probes the index once per offered key (a lateral subquery the OFFSET 0
-- keeps apart, so the key is an equality of each probe): with `match_key = ANY(keys)`,
-- the generic plan of a table not analyzed yet read every wait of the tenant per event
-- (its estimate of an array of unknown length made the tenant-only index look cheaper).
SELECT e.n, p.run_id::text AS run_id, p.step_index, p.match_expr, p.suspension_version,
       coalesce(p.match_after_version, p.suspension_version) AS match_after
FROM jsonb_to_recordset(%(events)s) AS e(n integer, event_id text, instant timestamptz,
                                          keys text[])
CROSS JOIN LATERAL (
    SELECT w.* FROM (SELECT DISTINCT key FROM unnest(e.keys) AS key) k
    CROSS JOIN LATERAL (
        SELECT * FROM workflow_run_pending x
        WHERE x.tenant_id = %(tenant_id)s AND x.wait_event_type = %(type)s
          AND x.match_key = k.key
        OFFSET 0) w
    UNION ALL
    SELECT x.* FROM workflow_run_pending x
    WHERE x.tenant_id = %(tenant_id)s AND x.wait_event_type = %(type)s
      AND x.match_key IS NULL
    UNION ALL
    SELECT x.* FROM workflow_run_pending x
    WHERE x.tenant_id = %(tenant_id)s AND x.wait_event_type = %(type)s
      AND e.keys IS NULL AND x.match_key IS NOT NULL
) p
WHERE p.awaited_event_id IS NULL
  AND (p.lookback_from IS NULL OR p.lookback_from <= e.instant)
  AND NOT (coalesce(p.consumed_event_ids, '{}') @> ARRAY[e.event_id]::text[])
  AND NOT EXISTS (SELECT 1 FROM run_consumed_events c
                  WHERE c.tenant_id = p.tenant_id AND c.run_id = p.run_id
                    AND c.event_id = e.event_id)
ORDER BY e.n, p.run_id;

-- name: mark_pending_matched_many
-- Record awaited events on many waiting rows of a tenant and make them due now: row by
-- row, %(run_ids)s, %(suspension_versions)s, %(event_types)s and %(event_ids)s pairwise.
-- Each named run is probed by the primary key (a lateral subquery the OFFSET 0 keeps
-- apart, so the run id is an equality of each probe), and the row updated by its key:
-- joined on the runs alone, a table whose statistics undercount the tenant's rows (one
-- not analyzed since it grew) got a hash join over every waiting row of the tenant,
-- read once per call (1.0 ms for 10 marks among 5,000 waits, 0.18-0.30 ms probed).
UPDATE workflow_run_pending p
SET trigger_event_type = k.event_type, awaited_event_id = k.event_id,
    wake_at = least(p.wake_at, %(now)s), leased_until = NULL,
    lookback_after_instant = NULL, lookback_after_position = NULL, lookback_version = NULL
FROM (
    SELECT x.run_id, x.step_index, x.suspension_version, m.event_type, m.event_id
    FROM unnest(%(run_ids)s::uuid[], %(suspension_versions)s::int[], %(event_types)s::text[],
                %(event_ids)s::text[]) AS m(run_id, version, event_type, event_id)
    CROSS JOIN LATERAL (
        SELECT x.run_id, x.step_index, x.suspension_version FROM workflow_run_pending x
        WHERE x.tenant_id = %(tenant_id)s AND x.run_id = m.run_id
          AND x.suspension_version = m.version
        OFFSET 0) x
) k
WHERE p.tenant_id = %(tenant_id)s AND p.run_id = k.run_id AND p.step_index = k.step_index
  AND p.suspension_version = k.suspension_version;

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
