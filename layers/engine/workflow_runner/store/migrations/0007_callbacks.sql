-- Callback tokens of wait_for_callback steps (issue 16). A new table only: code of the
-- previous release never reads or writes it, so old and new code run side by side.

-- One row per token a pass handed out: its SHA-256 (never the token), the suspension it
-- completes, until when, and its completion (set once, in the transaction that records
-- the completion on the run stream).
CREATE TABLE IF NOT EXISTS callbacks (
    token_hash           text        PRIMARY KEY,
    tenant_id            uuid        NOT NULL,
    run_id               uuid        NOT NULL,
    workflow_name        text        NOT NULL,
    suspension_version   integer     NOT NULL,
    step_index           integer     NOT NULL,
    path                 jsonb       NOT NULL,
    expires_at           timestamptz NOT NULL,
    created_at           timestamptz NOT NULL,
    completed_at         timestamptz,
    completion_event_id  text
);
CREATE INDEX IF NOT EXISTS callbacks_run_idx ON callbacks (tenant_id, run_id);
