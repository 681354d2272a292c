-- A map's completion policy (definition/completion.py), stored with its join: the worker
-- that counts the join's children decides from it when the map ends (and stops the rest)
-- instead of stopping at the first failure. A nullable column: no table rewrite; the
-- previous release never reads it (its joins have none, and behave as before).
ALTER TABLE run_joins ADD COLUMN IF NOT EXISTS completion jsonb;
