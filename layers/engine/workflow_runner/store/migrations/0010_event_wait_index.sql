-- migrate: no-transaction
-- Only event waits have a wait_event_type: timer waits (sleeps, retry backoffs, tasks'
-- waits) left NULL entries in two indexes that no query reads them by, so every timer
-- row cost two index entries at its insert and two more at each lease (a lease is not a
-- HOT update). One partial index holds the event waits alone: the wakeup's lookup
-- (tenant, type, key; it filters matched rows by awaited_event_id on the row) and the
-- purge's "does a wait still name this type" (tenant, type). The old indexes are dropped
-- after the new one is valid; code of the previous release runs the same queries.
CREATE INDEX CONCURRENTLY IF NOT EXISTS workflow_run_pending_event_waits_idx
    ON workflow_run_pending (tenant_id, wait_event_type, match_key)
    WHERE wait_event_type IS NOT NULL;
DROP INDEX CONCURRENTLY IF EXISTS workflow_run_pending_wakeup_idx;
DROP INDEX CONCURRENTLY IF EXISTS workflow_run_pending_wait_event_type_idx;
