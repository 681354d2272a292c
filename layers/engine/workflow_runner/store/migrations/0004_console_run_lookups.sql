-- migrate: no-transaction
-- The operator console and `wfr runs list` across tenants (issue 13). Built
-- CONCURRENTLY: workflow_runs is big and written by every pass, and a plain CREATE INDEX
-- would block those writes for the whole build.

-- The workflow version a run is on. Written by every pass from now on; rows written by
-- older releases stay NULL until their run's next pass (no backfill: an UPDATE of every
-- row would rewrite the table). Readers fall back to the definition fingerprint.
ALTER TABLE workflow_runs ADD COLUMN IF NOT EXISTS workflow_version integer;

-- Runs across tenants by status, newest change first (also every run: one ordered range
-- per status, merged), keyset-paginated on (updated_at, tenant_id, run_id).
CREATE INDEX CONCURRENTLY IF NOT EXISTS workflow_runs_status_recent_idx
    ON workflow_runs (status, updated_at, tenant_id, run_id);

-- Runs of one workflow, by status, newest change first (the same merge without status).
CREATE INDEX CONCURRENTLY IF NOT EXISTS workflow_runs_workflow_recent_idx
    ON workflow_runs (workflow_name, status, updated_at, tenant_id, run_id);

-- A run by id or id prefix without its tenant, and by idempotency key (the run id of a
-- key is derived from it).
CREATE INDEX CONCURRENTLY IF NOT EXISTS workflow_runs_run_id_idx ON workflow_runs (run_id);
