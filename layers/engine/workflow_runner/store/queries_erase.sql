-- Named queries of the erasure operation (workflow_runner/erase.py).

-- name: erase_lock_inbox_event
-- The inbox event to erase, locked so concurrent erasures of one event serialise.
SELECT event_id, erased_at FROM inbox
WHERE tenant_id = %(tenant_id)s AND event_id = %(event_id)s
FOR UPDATE;

-- name: erase_blank_inbox_event
-- Drop the payload (and the keys derived from it) and mark the event consumed, so a late
-- redelivery starts or wakes nothing.
UPDATE inbox
SET detail = NULL,
    match_keys = CASE WHEN match_keys IS NULL THEN NULL ELSE '{}'::text[] END,
    erased_at = coalesce(erased_at, %(now)s),
    triggered_at = coalesce(triggered_at, %(now)s),
    woken_at = coalesce(woken_at, %(now)s)
WHERE tenant_id = %(tenant_id)s AND event_id = %(event_id)s;

-- name: erase_runs_referencing_event
-- Runs of a tenant whose stream names the event as trigger, as matched awaited event or
-- as the payload of a completed callback (which counts as awaited).
SELECT DISTINCT stream_id::text AS run_id,
       CASE WHEN type = %(started_type)s THEN 'trigger' ELSE 'awaited' END AS relation
FROM wf_events
WHERE tenant_id = %(tenant_id)s AND stream_type = %(run_stream)s
  AND ((type = %(started_type)s AND payload -> 'triggerEventRef' ->> 'eventId' = %(event_id)s)
    OR (type IN (%(matched_type)s, %(callback_type)s) AND payload ->> 'eventId' = %(event_id)s));

-- name: erase_redact_run_events
-- Blank the payload-derived fields (step results, match values, return values, task
-- results, a wait_for_condition's state) of runs' events.
UPDATE wf_events
SET payload = (payload - 'results' - 'resultsDelta' - 'match' - 'result' - 'conditionState')
    || CASE
         WHEN jsonb_typeof(payload -> 'results') = 'object' THEN '{"results": {}}'::jsonb
         WHEN payload ? 'results' THEN jsonb_build_object('results', payload -> 'results')
         ELSE '{}'::jsonb
       END
    || CASE WHEN payload ? 'resultsDelta' THEN '{"resultsDelta": {}}'::jsonb ELSE '{}'::jsonb END
    || CASE WHEN payload ? 'match' THEN '{"match": null}'::jsonb ELSE '{}'::jsonb END
    || CASE WHEN payload ? 'result' THEN '{"result": null}'::jsonb ELSE '{}'::jsonb END
    || CASE WHEN payload ? 'conditionState' THEN '{"conditionState": null}'::jsonb
            ELSE '{}'::jsonb END
    || '{"redacted": true}'::jsonb
WHERE tenant_id = %(tenant_id)s AND stream_id = ANY(%(run_ids)s::uuid[])
  AND stream_type = %(run_stream)s
  AND (payload ?| array['results', 'resultsDelta', 'match', 'result', 'conditionState'])
  AND NOT (payload ? 'redacted');

-- name: erase_run_results
-- Drop the runs' current results (copies of the event's payload may be among them).
DELETE FROM run_results
WHERE tenant_id = %(tenant_id)s AND run_id = ANY(%(run_ids)s::uuid[]);

-- name: erase_run_tasks
-- Blank the runs' task requests and scopes; open tasks are not run any more.
UPDATE task_queue
SET request = NULL, scope = '{}'::jsonb,
    status = CASE WHEN status IN ('pending', 'running') THEN 'cancelled' ELSE status END,
    leased_until = NULL
WHERE tenant_id = %(tenant_id)s AND run_id = ANY(%(run_ids)s::uuid[]);

-- name: erase_open_dispatches
-- Dispatch requests of the runs still waiting for delivery (they are settled as failed).
SELECT request_id::text AS request_id, step_kind
FROM dispatch_outbox
WHERE tenant_id = %(tenant_id)s AND run_id = ANY(%(run_ids)s::uuid[]) AND status = 'pending';

-- name: erase_blank_dispatches
-- Blank every stored dispatch request (addresses, bodies) of the runs.
UPDATE dispatch_outbox
SET request = NULL,
    status = CASE WHEN status = 'pending' THEN 'failed' ELSE status END,
    leased_until = NULL
WHERE tenant_id = %(tenant_id)s AND run_id = ANY(%(run_ids)s::uuid[])
  AND (request IS NOT NULL OR status = 'pending');

-- name: erase_blank_local_log
-- Blank the exception text the local runtime logged for the runs (it may quote the event).
UPDATE local_run_log
SET detail = NULL
WHERE tenant_id = %(tenant_id)s AND run_id = ANY(%(run_ids)s::uuid[]) AND detail IS NOT NULL;

-- name: erase_blank_local_mail
-- Blank the mail the local runtime captured for the runs' dispatch requests.
UPDATE local_mailbox m
SET subject = '', body = '', recipients = '[]'::jsonb
FROM dispatch_outbox o
WHERE o.tenant_id = %(tenant_id)s AND o.run_id = ANY(%(run_ids)s::uuid[])
  AND m.request_id = o.request_id::text
  AND (m.subject <> '' OR m.body <> '' OR m.recipients <> '[]'::jsonb);
