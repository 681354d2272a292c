-- Which function version has which definition's code (workflow_definition_hosts, 0014).

-- name: register_hosts
-- A function version has these definitions (a JSON array of {workflow_name, fingerprint});
-- registered again by each of its containers, kept once with the first time.
INSERT INTO workflow_definition_hosts (workflow_name, fingerprint, function_role, function_arn,
                                       registered_at)
SELECT d.workflow_name, d.fingerprint, %(role)s, %(arn)s, %(now)s
FROM jsonb_to_recordset(%(rows)s) AS d(workflow_name text, fingerprint text)
ON CONFLICT DO NOTHING;

-- name: hosts_of_definition
-- The function versions of one role that registered a definition, newest first.
SELECT function_arn, registered_at
FROM workflow_definition_hosts
WHERE workflow_name = %(workflow_name)s AND fingerprint = %(fingerprint)s
  AND function_role = %(role)s
ORDER BY registered_at DESC, function_arn DESC;

-- name: hosts_all
-- Every registration (the pruning command: which version has what).
SELECT workflow_name, fingerprint, function_role, function_arn, registered_at
FROM workflow_definition_hosts
ORDER BY function_arn, workflow_name, fingerprint;

-- name: forget_host
-- A function version is gone (deleted): it hosts nothing any more.
DELETE FROM workflow_definition_hosts WHERE function_arn = %(arn)s;

-- name: unsettled_definitions
-- The definitions runs that are not settled started on (or moved to): what a kept version
-- may still be needed for. Read through the status index.
SELECT DISTINCT workflow_name, definition_fingerprint AS fingerprint
FROM workflow_runs
WHERE status IN ('running', 'waiting');
