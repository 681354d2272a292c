-- Release 0.2: child runs (call_workflow, start_workflow, map). Additive only: code
-- of the previous release ignores both tables.

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
    closed_at           timestamptz,         -- the parent ended: start nothing more
    created_at          timestamptz NOT NULL,
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
    PRIMARY KEY (tenant_id, join_id, item_index)
);
CREATE INDEX run_children_running ON run_children (tenant_id, child_run_id)
    WHERE status = 'running';
CREATE INDEX run_children_by_child ON run_children (tenant_id, child_run_id);
CREATE INDEX run_children_uncounted ON run_children (tenant_id, join_id) WHERE NOT counted;
