-- Callbacks that fail, beat and wait later (issue 33, item 2). Nullable columns only:
-- code of the previous release reads and writes the table as before (a failed callback
-- counts as completed for it), and the rows it writes mean a wait_for_callback's token.

-- A created callback (create_callback): its name, and what its token is derived from
-- with the run's secret (so that later steps hand the same token out again; useless
-- without the secret, which only the run stream holds). NULL: a wait_for_callback's.
ALTER TABLE callbacks ADD COLUMN IF NOT EXISTS name text;
ALTER TABLE callbacks ADD COLUMN IF NOT EXISTS mint text;
-- The heartbeat interval (NULL: none) and the last heartbeat: the callback expires when
-- none came for heartbeat_seconds since the last one (or its creation).
ALTER TABLE callbacks ADD COLUMN IF NOT EXISTS heartbeat_seconds integer;
ALTER TABLE callbacks ADD COLUMN IF NOT EXISTS last_heartbeat_at timestamptz;
-- The error name of an answer that reported a failure (completed_at: when it answered).
ALTER TABLE callbacks ADD COLUMN IF NOT EXISTS failed_error text;
-- When and why the run stopped listening without an answer: 'timeout' or
-- 'heartbeat_timeout' (its await found it expired or timed out), 'moved_on' (an
-- operator resumed the await), 'superseded' (its name was created again).
ALTER TABLE callbacks ADD COLUMN IF NOT EXISTS closed_at timestamptz;
ALTER TABLE callbacks ADD COLUMN IF NOT EXISTS closed_reason text;
