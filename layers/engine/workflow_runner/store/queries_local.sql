-- Named queries of the local runtime (`wfr local`, `wfr demo`, the test kit): its clock,
-- resume queue and captured mail (tables of migration 0002_local_runtime), and its log of
-- what went wrong in runs (0015_local_run_log).

-- name: local_clock_exists
-- Whether this database has the local runtime's tables (migrated to 0002 or later).
SELECT to_regclass('local_runtime_clock') IS NOT NULL AS present;

-- name: local_clock_get
-- The local runtime's business time, if it has one.
SELECT now FROM local_runtime_clock WHERE singleton;

-- name: local_clock_set
-- Move the local runtime's business time.
INSERT INTO local_runtime_clock (singleton, now) VALUES (true, %(now)s)
ON CONFLICT (singleton) DO UPDATE SET now = excluded.now;

-- name: local_queue_send
-- Enqueue one resume request, visible from %(visible_at)s on.
INSERT INTO local_resume_queue (tenant_id, run_id, step_index, wake_at, force, visible_at, sent_at)
VALUES (%(tenant_id)s, %(run_id)s, %(step_index)s, %(wake_at)s, %(force)s, %(visible_at)s,
        %(sent_at)s);

-- name: local_queue_receive
-- Take the visible messages (deleted on receipt: the local consumer runs them at once).
DELETE FROM local_resume_queue
WHERE message_id IN (
    SELECT message_id FROM local_resume_queue
    WHERE visible_at <= %(now)s
    ORDER BY visible_at, message_id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED)
RETURNING message_id, tenant_id::text AS tenant_id, run_id::text AS run_id, step_index, wake_at,
          force, visible_at;

-- name: local_queue_list
-- Every queued message, soonest first.
SELECT message_id, tenant_id::text AS tenant_id, run_id::text AS run_id, step_index, wake_at,
       force, visible_at, sent_at
FROM local_resume_queue
ORDER BY visible_at, message_id;

-- name: local_mail_capture
-- Keep one captured mail (a retried delivery of the same request is kept once).
INSERT INTO local_mailbox (request_id, sender, recipients, subject, body, sent_at)
VALUES (%(request_id)s, %(sender)s, %(recipients)s, %(subject)s, %(body)s, %(sent_at)s)
ON CONFLICT (request_id) DO NOTHING;

-- name: local_mail_list
-- Captured mail after a position, oldest first.
SELECT position, request_id, sender, recipients, subject, body, sent_at
FROM local_mailbox
WHERE position > %(after)s
ORDER BY position;

-- name: local_log_append
-- Keep one line of the local runtime's log about a run.
INSERT INTO local_run_log (tenant_id, run_id, logged_at, message, task_key, detail)
VALUES (%(tenant_id)s, %(run_id)s, %(logged_at)s, %(message)s, %(task_key)s, %(detail)s);

-- name: local_log_since
-- Lines of the local log after a position, oldest first.
SELECT position, tenant_id::text AS tenant_id, run_id::text AS run_id, logged_at, message,
       task_key, detail
FROM local_run_log
WHERE position > %(after)s
ORDER BY position;

-- name: local_log_of_run
-- A run's lines of the local log, oldest first (none on a database without the table).
SELECT position, tenant_id::text AS tenant_id, run_id::text AS run_id, logged_at, message,
       task_key, detail
FROM local_run_log
WHERE tenant_id = %(tenant_id)s AND run_id = %(run_id)s
ORDER BY position;

-- name: local_activity_mark
-- The newest stream event, captured mail and local log positions (what happened after
-- them is news).
SELECT (SELECT coalesce(max(position), 0) FROM wf_events) AS events,
       (SELECT coalesce(max(position), 0) FROM local_mailbox) AS mail,
       (SELECT coalesce(max(position), 0) FROM local_run_log) AS log;

-- name: local_activity_since
-- Stream events appended after a position, in order (the local runtime runs one writer).
SELECT position, tenant_id::text AS tenant_id, stream_id::text AS stream_id, stream_type,
       version, type, payload, recorded_at
FROM wf_events
WHERE position > %(after)s
ORDER BY position;

-- name: local_next_due
-- The earliest instant after %(now)s at which a pending row, a queued resume, a
-- dispatch retry or a task attempt (a retry, or a lease that ends) becomes due: time
-- travel stops there so timers fire on time.
SELECT least(
    (SELECT min(wake_at) FROM workflow_run_pending WHERE wake_at > %(now)s),
    (SELECT min(visible_at) FROM local_resume_queue WHERE visible_at > %(now)s),
    (SELECT min(next_attempt_at) FROM dispatch_outbox
     WHERE status = 'pending' AND next_attempt_at > %(now)s),
    (SELECT min(next_attempt_at) FROM task_queue
     WHERE status IN ('pending', 'running') AND next_attempt_at > %(now)s)
) AS next_due;

-- name: local_keep_module
-- Keep the source of a module that defined workflows (once per content).
INSERT INTO local_kept_modules (module, source_sha, source, definitions, kept_at)
VALUES (%(module)s, %(source_sha)s, %(source)s, %(definitions)s, %(now)s)
ON CONFLICT (module, source_sha) DO NOTHING;

-- name: local_kept_modules_with
-- The kept module sources that defined one definition, newest first.
SELECT module, source_sha, source, kept_at
FROM local_kept_modules
WHERE definitions @> jsonb_build_array(jsonb_build_object(
          'workflow_name', %(workflow_name)s::text, 'fingerprint', %(fingerprint)s::text))
ORDER BY kept_at DESC, module, source_sha;
