-- The local runtime's log of what went wrong in a run: the engine's warnings about a
-- failed step, task attempt, trigger or delivery, with the exception's text, which
-- stored events never carry (invariant 8) and AWS logs show only as a class and a hash.
-- `wfr local`, `wfr runs show` on a local database and the test kit read it. Unused in
-- AWS, like the mailbox; purged and erased with its run.
CREATE TABLE IF NOT EXISTS local_run_log (
    position   bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id  uuid        NOT NULL,
    run_id     uuid        NOT NULL,
    logged_at  timestamptz NOT NULL,
    message    text        NOT NULL,
    task_key   text,
    detail     text
);
CREATE INDEX IF NOT EXISTS local_run_log_run_idx ON local_run_log (tenant_id, run_id, position);
