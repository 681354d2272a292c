-- Registered definitions and their shapes (definition/shape.py).

-- name: register_definitions
-- Definitions the code has, from a JSON array of rows; one already stored is kept (a
-- fingerprint names one definition for good) but takes the pinning registered last (it
-- is not part of the fingerprint).
INSERT INTO workflow_definitions (workflow_name, fingerprint, version, shape, shape_hash,
                                  pinning, registered_at)
SELECT d.workflow_name, d.fingerprint, d.version, d.shape, d.shape_hash, d.pinning, %(now)s
FROM jsonb_to_recordset(%(rows)s) AS d(workflow_name text, fingerprint text, version integer,
                                       shape jsonb, shape_hash text, pinning text)
ON CONFLICT (workflow_name, fingerprint) DO UPDATE SET pinning = excluded.pinning
WHERE workflow_definitions.pinning <> excluded.pinning;

-- name: stored_definition
-- One definition a run started on (or moved to).
SELECT workflow_name, fingerprint, version, shape, shape_hash, pinning, registered_at
FROM workflow_definitions
WHERE workflow_name = %(workflow_name)s AND fingerprint = %(fingerprint)s;
