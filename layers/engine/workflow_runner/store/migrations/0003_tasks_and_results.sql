-- Release 0.2: durable tasks, results recorded once, visible delivery attempts.
-- Additive only: release 0.1 code running beside it during a deploy ignores the new
-- tables and columns (ADD COLUMN with a constant default rewrites no table).

-- Tasks the runs wait for (s.task, and mail/webhook steps with result_key): a worker
-- claims a row with a lease, runs the attempt outside any transaction and records the
-- outcome on the run stream. A row whose lease ran out while `running` was an attempt
-- whose worker died: it counts as failed.
CREATE TABLE task_queue (
    tenant_id               uuid        NOT NULL,
    task_id                 uuid        NOT NULL,
    run_id                  uuid        NOT NULL,
    workflow_name           text        NOT NULL,
    definition_fingerprint  text        NOT NULL,
    task_key                text        NOT NULL,
    step_kind               text        NOT NULL
        CHECK (step_kind IN ('task', 'mail.send', 'webhook.send')),
    path                    jsonb       NOT NULL,
    scope                   jsonb       NOT NULL DEFAULT '{}'::jsonb,
    request                 jsonb,               -- a delivery task's request; NULL once settled
    status                  text        NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'running', 'completed', 'failed', 'cancelled')),
    attempts                integer     NOT NULL DEFAULT 0,
    max_attempts            integer     NOT NULL,
    timeout_ms              integer,
    next_attempt_at         timestamptz NOT NULL,  -- a running row: when its lease ends
    leased_until            timestamptz,
    last_error              text,                -- generic text, never raw
    created_at              timestamptz NOT NULL,
    settled_at              timestamptz,
    PRIMARY KEY (tenant_id, task_id)
);
CREATE INDEX task_queue_due_idx ON task_queue (next_attempt_at)
    WHERE status IN ('pending', 'running');
CREATE INDEX task_queue_run_idx ON task_queue (tenant_id, run_id);

-- The current result of every result key of a run, written by the pass that set it
-- (an inline projection of the streams' resultsDelta / awaitedRefsDelta): a resume
-- reads a run's results here instead of re-reading its whole history.
CREATE TABLE run_results (
    tenant_id         uuid    NOT NULL,
    run_id            uuid    NOT NULL,
    key               text    NOT NULL,
    value             jsonb,             -- NULL for an awaited reference
    awaited           boolean NOT NULL DEFAULT false,
    awaited_event_id  text,              -- inbox id of an awaited payload (NULL: timed out)
    version           integer NOT NULL,  -- stream version of the event that recorded it
    PRIMARY KEY (tenant_id, run_id, key)
);

-- Awaited events a run has taken: a later wait of the run never takes them again.
CREATE TABLE run_consumed_events (
    tenant_id  uuid NOT NULL,
    run_id     uuid NOT NULL,
    event_id   text NOT NULL,
    PRIMARY KEY (tenant_id, run_id, event_id)
);

-- Fire-and-forget deliveries: each attempt's outcome is appended to the request's
-- stream at stream_version + 1 (release 0.1 rows: 1, their outcome is version 2).
ALTER TABLE dispatch_outbox ADD COLUMN stream_version integer NOT NULL DEFAULT 1;
-- Mail is sent at most once: set (and committed) before the provider is called; a
-- claim that finds it set after a lease ran out settles the request as ambiguous.
ALTER TABLE dispatch_outbox ADD COLUMN sending_since timestamptz;
ALTER TABLE dispatch_outbox ADD COLUMN last_error text;
ALTER TABLE dispatch_outbox ADD COLUMN failure_reason text;
ALTER TABLE dispatch_outbox ADD COLUMN settled_at timestamptz;
CREATE INDEX dispatch_outbox_settled_idx ON dispatch_outbox (settled_at)
    WHERE status = 'failed';
CREATE INDEX dispatch_outbox_run_idx ON dispatch_outbox (tenant_id, run_id);
