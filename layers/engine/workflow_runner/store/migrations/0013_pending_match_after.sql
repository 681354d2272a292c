-- A waiting run an operator migrated (`wfr runs migrate`) keeps its suspension, and with
-- it the suspension version that callbacks, joins and tasks refer to; but its stream has
-- moved on past that version (the migration's two events), so the first matching event
-- must be appended after them, not right after the suspension. NULL: right after the
-- suspension (every row until a migration). A nullable column: no rewrite; code of the
-- previous release never reads it.
ALTER TABLE workflow_run_pending ADD COLUMN IF NOT EXISTS match_after_version integer;
