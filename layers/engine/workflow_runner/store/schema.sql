-- workflow-runner schema: the fresh-install truth.
-- Every numbered file in migrations/ applied in order must produce exactly this
-- (tests/integration/test_migrations.py proves it).

-- All run streams and dispatch streams. The stream is the truth (ARCHITECTURE §2.1);
-- every other table except inbox is a projection that can be rebuilt from it.
CREATE TABLE wf_events (
    position     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- Writing transaction, for commit-order catch-up reads (see queries.sql, read_events_after).
    xid          xid8        NOT NULL DEFAULT pg_current_xact_id(),
    tenant_id    uuid        NOT NULL,
    stream_id    uuid        NOT NULL,
    stream_type  text        NOT NULL CHECK (stream_type IN ('workflow-run', 'step-dispatch')),
    version      integer     NOT NULL CHECK (version > 0),
    type         text        NOT NULL,
    payload      jsonb       NOT NULL,
    metadata     jsonb       NOT NULL DEFAULT '{}'::jsonb,
    recorded_at  timestamptz NOT NULL,
    CONSTRAINT wf_events_stream_version_key UNIQUE (tenant_id, stream_id, version)
);
CREATE INDEX wf_events_commit_order_idx ON wf_events (xid, position);
-- The inbox events a run stream names (trigger, matched awaited event, callback payload):
-- the purge keeps an inbox row while a run references it.
CREATE INDEX wf_events_event_ref_idx ON wf_events
    (tenant_id, (coalesce(payload -> 'triggerEventRef' ->> 'eventId', payload ->> 'eventId')))
    WHERE type IN ('workflow.run-started', 'workflow.step.event-matched',
                   'workflow.callback.completed');

-- Domain events as received from EventBridge. A redelivery is a no-op on the key.
CREATE TABLE inbox (
    position      bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    tenant_id     uuid        NOT NULL,
    event_id      text        NOT NULL,
    source        text        NOT NULL,
    type          text        NOT NULL,
    detail        jsonb,                  -- NULL once erased
    event_time    timestamptz,
    received_at   timestamptz NOT NULL,
    -- Set when TriggerProjection has started the runs this event triggers, so a
    -- redelivery never starts them again even for workflows without an idempotency key.
    triggered_at  timestamptz,
    -- Set when EventWakeup has matched it against waiting runs (same reason).
    woken_at      timestamptz,
    erased_at     timestamptz,
    -- The keys of every scalar leaf the event offers (match.inbox_keys), so a new wait's
    -- look-back finds it by the equality key the wait requires; '*' when there are too
    -- many to list; '{}' once erased; NULL on rows written by release 0.1.0.
    match_keys    text[],
    PRIMARY KEY (tenant_id, event_id)
);
-- Look-back of a wait with an equality key: the events offering it. Entries go into
-- place at once (no pending list, which every search reads whole: 0020).
CREATE INDEX inbox_match_keys_idx ON inbox USING gin (match_keys) WITH (fastupdate = off)
    WHERE match_keys IS NOT NULL;
-- Look-back in (instant, position) order: every event of a type (a wait without a key),
-- or those stored without keys (release 0.1.0) next to the keyed lookup.
CREATE INDEX inbox_lookback_idx ON inbox
    (tenant_id, type, (match_keys IS NULL), (coalesce(event_time, received_at)), position);

-- Tenants seen by the engine; the due scan starts cron workflows for each of them.
CREATE TABLE tenants (
    tenant_id   uuid        PRIMARY KEY,
    first_seen  timestamptz NOT NULL
);

-- One row per run, written in the same transaction as the stream events it
-- summarises (an inline projection: rebuildable from wf_events).
CREATE TABLE workflow_runs (
    tenant_id               uuid        NOT NULL,
    run_id                  uuid        NOT NULL,
    workflow_name           text        NOT NULL,
    status                  text        NOT NULL
        CHECK (status IN ('running', 'waiting', 'completed', 'failed', 'cancelled')),
    version                 integer     NOT NULL,
    definition_fingerprint  text        NOT NULL,
    trigger_event_type      text        NOT NULL,
    started_at              timestamptz NOT NULL,
    updated_at              timestamptz NOT NULL,
    -- NULL on rows older releases wrote, until the run's next pass (0004).
    workflow_version        integer,
    PRIMARY KEY (tenant_id, run_id)
);
CREATE INDEX workflow_runs_tenant_status_idx ON workflow_runs (tenant_id, status, updated_at);
-- The console and `wfr runs list` across tenants: keyset pages on (updated_at, tenant_id,
-- run_id) per status or per workflow and status; a run by id (prefix) without a tenant.
CREATE INDEX workflow_runs_status_recent_idx
    ON workflow_runs (status, updated_at, tenant_id, run_id);
CREATE INDEX workflow_runs_workflow_recent_idx
    ON workflow_runs (workflow_name, status, updated_at, tenant_id, run_id);
CREATE INDEX workflow_runs_run_id_idx ON workflow_runs (run_id);

-- The seeds' pending set, one row per suspended run (D1), kept by the pending
-- projection. trigger_event_type/trigger_payload keep the seeds' names: the first
-- holds the matched awaited event's type; the second stays NULL because this engine
-- stores a reference (awaited_event_id), never a copy, of the awaited event.
CREATE TABLE workflow_run_pending (
    tenant_id               uuid        NOT NULL,
    run_id                  uuid        NOT NULL,
    step_index              integer     NOT NULL,
    workflow_name           text        NOT NULL,
    suspension_event_type   text        NOT NULL,
    wake_at                 timestamptz NOT NULL,
    retry_attempt           integer,
    definition_fingerprint  text,
    wait_event_type         text,
    match_expr              jsonb,
    trigger_event_type      text,
    trigger_payload         jsonb,
    -- Beyond the seeds:
    suspension_version      integer     NOT NULL,   -- stream version of the suspension event
    awaited_event_id        text,                   -- inbox reference of the matched event
    lookback_from           timestamptz,            -- earliest inbox time an awaited event may have
    leased_until            timestamptz,            -- due scan handed it to the queue until then
    match_key               text,                   -- an eq atom the match requires (match.py)
    -- An unfinished look-back of the suspension at lookback_version (a projection batch
    -- ran out of budget) continues after (lookback_after_instant, lookback_after_position).
    lookback_after_instant  timestamptz,
    lookback_after_position bigint,
    lookback_version        integer,
    -- Events a 0.1 suspension says its run took (since 0.2: run_consumed_events).
    consumed_event_ids      text[],
    -- The stream version a matching event is appended after when it is not the
    -- suspension's own: a migration moved the run since (NULL: suspension_version).
    match_after_version     integer,
    CONSTRAINT workflow_run_pending_pkey PRIMARY KEY (tenant_id, run_id, step_index)
);
CREATE INDEX workflow_run_pending_tenant_wake_at_idx ON workflow_run_pending (tenant_id, wake_at);
-- Event waits only (timer rows have no wait_event_type): the wakeup's lookup of a
-- tenant's waits of a type by the key the event offers, and the purge's check (0010).
CREATE INDEX workflow_run_pending_event_waits_idx ON workflow_run_pending
    (tenant_id, wait_event_type, match_key) WHERE wait_event_type IS NOT NULL;
-- The rows an awaited event matched (EventWakeup enqueues those not in flight).
CREATE INDEX workflow_run_pending_matched_idx ON workflow_run_pending
    (tenant_id, awaited_event_id) WHERE awaited_event_id IS NOT NULL;
-- Unfinished look-backs, continued by the next projection batches.
CREATE INDEX workflow_run_pending_lookback_idx ON workflow_run_pending
    (tenant_id, run_id) WHERE lookback_after_position IS NOT NULL;
-- The due scan's tenant share and cap: a tenant's rows in flight, without its backlog.
CREATE INDEX workflow_run_pending_leased_idx ON workflow_run_pending (tenant_id, wake_at)
    INCLUDE (leased_until) WHERE leased_until IS NOT NULL;

-- Catch-up position of each asynchronous projection: last applied (xid, position).
CREATE TABLE projection_checkpoints (
    name           text        PRIMARY KEY,
    last_xid       xid8        NOT NULL,
    last_position  bigint      NOT NULL,
    updated_at     timestamptz NOT NULL
);

-- Transactional outbox for mail and webhook steps: written in the pass that
-- requested them, delivered after commit by the step dispatcher.
CREATE TABLE dispatch_outbox (
    tenant_id        uuid        NOT NULL,
    request_id       uuid        NOT NULL,
    run_id           uuid        NOT NULL,
    step_kind        text        NOT NULL CHECK (step_kind IN ('mail.send', 'webhook.send')),
    request          jsonb,               -- NULL once delivered or failed for good
    status           text        NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'dispatched', 'failed')),
    attempts         integer     NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz NOT NULL,
    leased_until     timestamptz,
    created_at       timestamptz NOT NULL,
    -- Each attempt's outcome is appended to the request's stream at stream_version + 1.
    stream_version   integer     NOT NULL DEFAULT 1,
    -- Mail is sent at most once: set and committed before the provider is called.
    sending_since    timestamptz,
    last_error       text,
    failure_reason   text,
    settled_at       timestamptz,
    PRIMARY KEY (tenant_id, request_id)
);
CREATE INDEX dispatch_outbox_due_idx ON dispatch_outbox (next_attempt_at) WHERE status = 'pending';
CREATE INDEX dispatch_outbox_settled_idx ON dispatch_outbox (settled_at)
    WHERE status = 'failed';
CREATE INDEX dispatch_outbox_run_idx ON dispatch_outbox (tenant_id, run_id);

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
    request                 jsonb,
    status                  text        NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'running', 'completed', 'failed', 'cancelled')),
    attempts                integer     NOT NULL DEFAULT 0,
    max_attempts            integer     NOT NULL,
    timeout_ms              integer,
    next_attempt_at         timestamptz NOT NULL,
    leased_until            timestamptz,
    last_error              text,
    created_at              timestamptz NOT NULL,
    settled_at              timestamptz,
    -- Its limits (flow control: flow/keys.py LimitSpec; NULL: none), and the throttle
    -- turn its next attempt reserved.
    flow                    jsonb,
    flow_ticket             timestamptz,
    PRIMARY KEY (tenant_id, task_id)
);
CREATE INDEX task_queue_due_idx ON task_queue (next_attempt_at)
    WHERE status IN ('pending', 'running');
CREATE INDEX task_queue_run_idx ON task_queue (tenant_id, run_id);

-- The current result of every result key of a run (an inline projection of the
-- streams' resultsDelta / awaitedRefsDelta): a resume reads a run's results here.
CREATE TABLE run_results (
    tenant_id         uuid    NOT NULL,
    run_id            uuid    NOT NULL,
    key               text    NOT NULL,
    value             jsonb,
    awaited           boolean NOT NULL DEFAULT false,
    awaited_event_id  text,
    version           integer NOT NULL,
    PRIMARY KEY (tenant_id, run_id, key)
);

-- Awaited events a run has taken: a later wait of the run never takes them again.
CREATE TABLE run_consumed_events (
    tenant_id  uuid NOT NULL,
    run_id     uuid NOT NULL,
    event_id   text NOT NULL,
    PRIMARY KEY (tenant_id, run_id, event_id)
);

-- Cron triggers: the last scheduled instant started per tenant and workflow.
CREATE TABLE cron_state (
    tenant_id      uuid        NOT NULL,
    workflow_name  text        NOT NULL,
    last_fire_at   timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, workflow_name)
);

-- The local runtime (`wfr local ...`, `wfr demo`) keeps its business clock, its
-- stand-in for the SQS resume queue and the mail it captured here, so that separate
-- command invocations continue where the last one stopped. Unused in AWS.
CREATE TABLE local_runtime_clock (
    singleton  boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    now        timestamptz NOT NULL
);

-- Resume requests, visible from visible_at on (an SQS delay, in local business time).
CREATE TABLE local_resume_queue (
    message_id  bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id   uuid        NOT NULL,
    run_id      uuid        NOT NULL,
    step_index  integer     NOT NULL,
    wake_at     timestamptz,
    force       boolean     NOT NULL DEFAULT false,
    visible_at  timestamptz NOT NULL,
    sent_at     timestamptz NOT NULL
);
CREATE INDEX local_resume_queue_visible_idx ON local_resume_queue (visible_at, message_id);

-- Mail the local step dispatcher "sent": captured instead of handed to SES.
CREATE TABLE local_mailbox (
    position    bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    request_id  text        NOT NULL UNIQUE,
    sender      text        NOT NULL,
    recipients  jsonb       NOT NULL,
    subject     text        NOT NULL,
    body        text        NOT NULL,
    sent_at     timestamptz NOT NULL
);

-- The local runtime's log of what went wrong in a run, with the exception's text that
-- stored events never carry (invariant 8): read by `wfr local`, `wfr runs show` on a
-- local database and the test kit. Unused in AWS.
CREATE TABLE local_run_log (
    position   bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id  uuid        NOT NULL,
    run_id     uuid        NOT NULL,
    logged_at  timestamptz NOT NULL,
    message    text        NOT NULL,
    task_key   text,
    detail     text
);
CREATE INDEX local_run_log_run_idx ON local_run_log (tenant_id, run_id, position);

-- A join: the child runs one step of a parent asked for. The worker starts them, at
-- most `concurrency` running at once; each child's terminal transaction marks its own
-- row settled (uncounted), and the worker counts settled rows into the join and, when
-- it is done (or failed and not caught), tells the parent.
CREATE TABLE run_joins (
    tenant_id           uuid        NOT NULL,
    join_id             uuid        NOT NULL,
    parent_run_id       uuid        NOT NULL,
    kind                text        NOT NULL CHECK (kind IN ('call', 'map', 'start')),
    child_workflow      text        NOT NULL,
    suspension_version  integer,             -- the parent's suspension; NULL for start
    total               integer     NOT NULL,
    concurrency         integer     NOT NULL,
    catch               boolean     NOT NULL DEFAULT false,
    next_index          integer     NOT NULL DEFAULT 0,  -- children below it were started
    running             integer     NOT NULL DEFAULT 0,
    settled             integer     NOT NULL DEFAULT 0,
    failed              integer     NOT NULL DEFAULT 0,
    start_due_at        timestamptz,         -- the worker starts more from then; NULL: none
    notified_at         timestamptz,         -- the parent was told (ChildrenSettled)
    closed_at           timestamptz,         -- the parent ended or the map stopped: start nothing more
    created_at          timestamptz NOT NULL,
    completion          jsonb,               -- a map's completion policy; NULL: none
    PRIMARY KEY (tenant_id, join_id)
);
CREATE INDEX run_joins_start_due ON run_joins (start_due_at) WHERE start_due_at IS NOT NULL;
CREATE INDEX run_joins_parent ON run_joins (tenant_id, parent_run_id);

-- One row per child of a join, in item order: its run id, input, and how it ended.
CREATE TABLE run_children (
    tenant_id       uuid        NOT NULL,
    join_id         uuid        NOT NULL,
    item_index      integer     NOT NULL,
    child_run_id    uuid        NOT NULL,
    child_key       text        NOT NULL,
    input           jsonb       NOT NULL,
    status          text        NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'running', 'completed', 'failed', 'cancelled')),
    result          jsonb,
    reason          text,
    started_at      timestamptz,
    settled_at      timestamptz,
    counted         boolean     NOT NULL DEFAULT true,  -- false: settled, join not told yet
    revive          boolean     NOT NULL DEFAULT false, -- reopened by a redrive: redrive its run
    PRIMARY KEY (tenant_id, join_id, item_index)
);
CREATE INDEX run_children_running ON run_children (tenant_id, child_run_id)
    WHERE status = 'running';
CREATE INDEX run_children_by_child ON run_children (tenant_id, child_run_id);
CREATE INDEX run_children_uncounted ON run_children (tenant_id, join_id) WHERE NOT counted;

-- Callback tokens: one row per token a pass handed out (a wait_for_callback's, or a
-- created callback's), with its SHA-256 (never the token), the suspension it completes
-- (a created callback: the version of the pass's outcome that made it), until when, and
-- its answer (set once, in the transaction that records it on the run stream).
CREATE TABLE callbacks (
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
    completion_event_id  text,
    -- A created callback's name and what its token is derived from with the run's
    -- secret (useless without it). NULL: a wait_for_callback's token.
    name                 text,
    mint                 text,
    -- The heartbeat interval (NULL: none) and the last heartbeat.
    heartbeat_seconds    integer,
    last_heartbeat_at    timestamptz,
    failed_error         text,        -- an answer that reported a failure: its error name
    -- The run stopped listening without an answer: timeout, heartbeat_timeout, moved_on,
    -- superseded.
    closed_at            timestamptz,
    closed_reason        text
);
CREATE INDEX callbacks_run_idx ON callbacks (tenant_id, run_id);

-- The definitions runs started on, with their shapes (definition/shape.py): a waiting
-- run whose definition the code no longer has resumes on one whose shape agrees.
CREATE TABLE workflow_definitions (
    workflow_name  text        NOT NULL,
    fingerprint    text        NOT NULL,
    version        integer     NOT NULL,
    shape          jsonb       NOT NULL,
    shape_hash     text        NOT NULL,
    pinning        text        NOT NULL CHECK (pinning IN ('shape', 'exact')),
    registered_at  timestamptz NOT NULL,
    PRIMARY KEY (workflow_name, fingerprint)
);

-- Flow control (workflow_runner.flow): one row per limit key, with the state a throttle
-- (its next turn), a rate limit (its recent admissions), a singleton, a debounce or a batch
-- (the key's latest run) keeps between triggers.
CREATE TABLE flow_limits (
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

-- A concurrency limit's slots, `lim` rows per key: a pass holds one by its row lock, a
-- task attempt by a lease (`holder` until `leased_until`).
CREATE TABLE flow_slots (
    flow_key      text        NOT NULL,
    slot          integer     NOT NULL,
    holder        text,
    leased_until  timestamptz,
    PRIMARY KEY (flow_key, slot)
);

-- Work a concurrency limit holds back, first in first out per key.
CREATE TABLE flow_waiters (
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
CREATE INDEX flow_waiters_run_idx ON flow_waiters (tenant_id, run_id);
CREATE INDEX flow_waiters_rank_idx ON flow_waiters (flow_key, rank_at, seq);
-- The work not yet woken, in the order it is woken: a hand-over reads the first few, the
-- safety timer the first (an index scan that stops there, statistics or not).
CREATE INDEX flow_waiters_queued_idx ON flow_waiters (flow_key, rank_at, seq)
    WHERE woken_at IS NULL;

-- Trigger events a rate limit or a singleton let start nothing, with the reason.
CREATE TABLE flow_skipped (
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
CREATE INDEX flow_skipped_recent_idx ON flow_skipped (skipped_at, tenant_id);

-- cancel_on: what cancels a run of a workflow with CancelOn(...), written when the run
-- starts (the cancelling event's type and the [path, value] pairs its payload must carry).
CREATE TABLE flow_cancel_keys (
    tenant_id      uuid        NOT NULL,
    event_type     text        NOT NULL,
    match_value    text        NOT NULL,
    workflow_name  text        NOT NULL,
    run_id         uuid        NOT NULL,
    started_at     timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, event_type, match_value, workflow_name, run_id)
);
CREATE INDEX flow_cancel_keys_run_idx ON flow_cancel_keys (tenant_id, run_id);

-- Which function version has which definition's code (registered by ResumeRun and
-- StepDispatcher at a container's start): a waiting run whose definition the current
-- code lacks, and whose shape no longer agrees, is handed to a version that has it.
CREATE TABLE workflow_definition_hosts (
    workflow_name  text        NOT NULL,
    fingerprint    text        NOT NULL,
    function_role  text        NOT NULL CHECK (function_role IN ('resume-run', 'step-dispatcher')),
    function_arn   text        NOT NULL,
    registered_at  timestamptz NOT NULL,
    PRIMARY KEY (workflow_name, fingerprint, function_role, function_arn)
);
CREATE INDEX workflow_definition_hosts_arn_idx ON workflow_definition_hosts (function_arn);

-- `wfr local`: the source of each module that defined workflows, by its hash, so a later
-- command whose code changed still runs the runs that started on the old code.
CREATE TABLE local_kept_modules (
    module       text        NOT NULL,
    source_sha   text        NOT NULL,
    source       text        NOT NULL,
    definitions  jsonb       NOT NULL,
    kept_at      timestamptz NOT NULL,
    PRIMARY KEY (module, source_sha)
);
