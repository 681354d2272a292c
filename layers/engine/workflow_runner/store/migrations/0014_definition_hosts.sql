-- Which function version has which definition's code (the kept tier of engine/pinning.py):
-- ResumeRun and StepDispatcher register the definitions their code has under their own
-- qualified function ARN when a container starts. A waiting run whose definition the
-- current code no longer has, and whose shape no longer agrees, is handed to a version
-- that registered it. `wfr versions prune` deletes rows of the versions it deletes.
-- Additive: the previous release never reads it.
CREATE TABLE IF NOT EXISTS workflow_definition_hosts (
    workflow_name  text        NOT NULL,
    fingerprint    text        NOT NULL,
    function_role  text        NOT NULL CHECK (function_role IN ('resume-run', 'step-dispatcher')),
    function_arn   text        NOT NULL,
    registered_at  timestamptz NOT NULL,
    PRIMARY KEY (workflow_name, fingerprint, function_role, function_arn)
);
CREATE INDEX IF NOT EXISTS workflow_definition_hosts_arn_idx
    ON workflow_definition_hosts (function_arn);

-- `wfr local` keeps the source of each module that defined workflows, by its hash, so a
-- later command whose code changed still runs the runs that started on the old code
-- (local/kept.py). Unused in AWS.
CREATE TABLE IF NOT EXISTS local_kept_modules (
    module       text        NOT NULL,
    source_sha   text        NOT NULL,
    source       text        NOT NULL,
    definitions  jsonb       NOT NULL,
    kept_at      timestamptz NOT NULL,
    PRIMARY KEY (module, source_sha)
);
