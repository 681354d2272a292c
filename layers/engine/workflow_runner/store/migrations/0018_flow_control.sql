-- Flow control (issue 34): the rows limits keep, the slots of concurrency limits, the work
-- queued for a slot and the triggers that started nothing. New tables and two nullable
-- task_queue columns only: the previous release neither reads nor writes them, so old and
-- new code run side by side during a deploy (old code claims a task without looking at
-- its limits; the tasks it schedules carry none).

-- One row per limit key (flow/keys.py names them): what operators see in `wfr limits`,
-- and the state a throttle (its next turn), a rate limit (its recent admissions), a
-- singleton, a debounce or a batch (the key's current run) keeps between triggers.
CREATE TABLE IF NOT EXISTS flow_limits (
    flow_key       text        PRIMARY KEY,
    kind           text        NOT NULL
        CHECK (kind IN ('concurrency', 'throttle', 'rate_limit', 'singleton', 'debounce',
                        'batch')),
    tenant_id      uuid,                  -- NULL: shared by every tenant
    workflow_name  text        NOT NULL,
    step_key       text,                  -- a step's limit: its task key
    key_value      text        NOT NULL DEFAULT '',
    lim            integer     NOT NULL,
    period_ms      bigint      NOT NULL DEFAULT 0,
    burst          integer     NOT NULL DEFAULT 1,
    tat            timestamptz,           -- throttle: when the next token is due (GCRA)
    recent         timestamptz[],         -- rate limit: admissions within the period
    run_id         uuid,                  -- singleton, debounce: the key's latest run
    updated_at     timestamptz NOT NULL
);

-- A concurrency limit's slots, `lim` rows per key. A pass holds one by its row lock
-- (released by its commit, or by its connection dying); a task attempt by a lease
-- (`holder`, until `leased_until`), taken in its claim's transaction and given back
-- with its outcome, or by the lease's end when its worker died.
CREATE TABLE IF NOT EXISTS flow_slots (
    flow_key      text        NOT NULL,
    slot          integer     NOT NULL,
    holder        text,
    leased_until  timestamptz,
    PRIMARY KEY (flow_key, slot)
);

-- Work a concurrency limit holds back, in order of rank per key (queued time less the
-- head start of its run's priority=, then arrival): a run's resume (its
-- pending row waits with no wake time) or a task's attempt (its row waits likewise). A
-- slot that frees wakes the oldest (`woken_at`); the woken work takes the slot.
CREATE TABLE IF NOT EXISTS flow_waiters (
    flow_key       text        NOT NULL,
    seq            bigint      GENERATED ALWAYS AS IDENTITY,
    tenant_id      uuid        NOT NULL,
    work           text        NOT NULL,  -- 'pass' or 'task:<task id>'
    run_id         uuid        NOT NULL,
    step_index     integer     NOT NULL,
    workflow_name  text        NOT NULL,
    queued_at      timestamptz NOT NULL,
    rank_at        timestamptz NOT NULL,  -- queued_at less its priority's head start
    woken_at       timestamptz,
    PRIMARY KEY (flow_key, seq),
    CONSTRAINT flow_waiters_work_key UNIQUE (flow_key, tenant_id, run_id, work)
);
CREATE INDEX IF NOT EXISTS flow_waiters_run_idx ON flow_waiters (tenant_id, run_id);
CREATE INDEX IF NOT EXISTS flow_waiters_rank_idx ON flow_waiters (flow_key, rank_at, seq);

-- Trigger events a rate limit or a singleton let start nothing, with the reason.
CREATE TABLE IF NOT EXISTS flow_skipped (
    tenant_id      uuid        NOT NULL,
    event_id       text        NOT NULL,
    workflow_name  text        NOT NULL,
    reason         text        NOT NULL CHECK (reason IN ('rate_limit', 'singleton')),
    flow_key       text        NOT NULL,
    detail         text        NOT NULL,
    run_id         uuid,                  -- singleton: the unsettled run it kept
    skipped_at     timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, event_id, workflow_name)
);
CREATE INDEX IF NOT EXISTS flow_skipped_recent_idx ON flow_skipped (skipped_at, tenant_id);

-- A task's limits (flow/keys.py LimitSpec, keys resolved by the pass that scheduled it;
-- NULL: none), and the throttle turn its next attempt reserved.
ALTER TABLE task_queue ADD COLUMN IF NOT EXISTS flow jsonb;
ALTER TABLE task_queue ADD COLUMN IF NOT EXISTS flow_ticket timestamptz;

-- cancel_on: what cancels a run of a workflow with CancelOn(...), written when the run
-- starts: the cancelling event's type and the values its payload must carry (a JSON
-- list of [path, value] pairs). An arriving event of that type takes the rows of its
-- values and cancels their runs; the purge deletes the rows of purged runs.
CREATE TABLE IF NOT EXISTS flow_cancel_keys (
    tenant_id      uuid        NOT NULL,
    event_type     text        NOT NULL,
    match_value    text        NOT NULL,
    workflow_name  text        NOT NULL,
    run_id         uuid        NOT NULL,
    started_at     timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, event_type, match_value, workflow_name, run_id)
);
CREATE INDEX IF NOT EXISTS flow_cancel_keys_run_idx ON flow_cancel_keys (tenant_id, run_id);
