-- The definitions runs started on, with their shapes (definition/shape.py): after a
-- deploy changed a workflow, a waiting run resumes on a registered definition whose
-- shape agrees with the one it started on, which the new code no longer has. Written
-- when a definition first starts or moves a run (and by the deploy); one row per
-- definition, whatever the tenant. Additive: the previous release never reads it.
CREATE TABLE IF NOT EXISTS workflow_definitions (
    workflow_name  text        NOT NULL,
    fingerprint    text        NOT NULL,
    version        integer     NOT NULL,
    shape          jsonb       NOT NULL,
    shape_hash     text        NOT NULL,
    pinning        text        NOT NULL CHECK (pinning IN ('shape', 'exact')),
    registered_at  timestamptz NOT NULL,
    PRIMARY KEY (workflow_name, fingerprint)
);
