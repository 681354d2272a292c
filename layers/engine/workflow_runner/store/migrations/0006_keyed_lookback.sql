-- migrate: no-transaction
-- 0006: the look-back finds awaited events by the equality key a wait requires, and
-- resumes where it stopped when a projection batch runs out of budget; a wakeup finds
-- the rows its event matched, and which events a waiting 0.1 suspension already
-- consumed (since 0.2 they are in run_consumed_events).
--
-- Safe on a big inbox while the previous release keeps running (expand only): columns
-- are added without a default (no table rewrite; the runner bounds the wait for the
-- brief ACCESS EXCLUSIVE lock, so it gives up and retries instead of queueing every
-- writer behind it), and indexes are built CONCURRENTLY (no write lock), which is why
-- this migration runs outside a transaction, one statement at a time. An interrupted
-- run leaves an INVALID index behind: the migration runner drops it and builds it
-- again, so running the migration again is safe.
-- Rows written by release 0.1.0 keep match_keys NULL; the look-back reads them through
-- the unkeyed branch of inbox_lookback_idx (a later release may backfill them).

-- The keys of every scalar leaf an event offers (match.inbox_keys); '*' when it has
-- too many to list; '{}' once erased.
ALTER TABLE inbox ADD COLUMN IF NOT EXISTS match_keys text[];

-- Where an unfinished look-back of the suspension at lookback_version continues:
-- after (lookback_after_instant, lookback_after_position); NULL when it is done.
ALTER TABLE workflow_run_pending ADD COLUMN IF NOT EXISTS lookback_after_instant timestamptz;
ALTER TABLE workflow_run_pending ADD COLUMN IF NOT EXISTS lookback_after_position bigint;
ALTER TABLE workflow_run_pending ADD COLUMN IF NOT EXISTS lookback_version integer;
-- Events a 0.1 suspension says its run consumed with earlier waits (consumedEventIds).
ALTER TABLE workflow_run_pending ADD COLUMN IF NOT EXISTS consumed_event_ids text[];

CREATE INDEX CONCURRENTLY IF NOT EXISTS inbox_match_keys_idx ON inbox USING gin (match_keys)
    WHERE match_keys IS NOT NULL;

CREATE INDEX CONCURRENTLY IF NOT EXISTS inbox_lookback_idx ON inbox
    (tenant_id, type, (match_keys IS NULL), (coalesce(event_time, received_at)), position);

-- The rows an awaited event matched (EventWakeup enqueues what is matched and not in
-- flight, so a retried invocation finishes the job).
CREATE INDEX CONCURRENTLY IF NOT EXISTS workflow_run_pending_matched_idx
    ON workflow_run_pending (tenant_id, awaited_event_id) WHERE awaited_event_id IS NOT NULL;

CREATE INDEX CONCURRENTLY IF NOT EXISTS workflow_run_pending_lookback_idx
    ON workflow_run_pending (tenant_id, run_id) WHERE lookback_after_position IS NOT NULL;
