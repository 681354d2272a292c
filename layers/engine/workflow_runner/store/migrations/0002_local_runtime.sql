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
