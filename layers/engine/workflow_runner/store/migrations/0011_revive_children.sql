-- A redriven parent reopens the join it failed at: its children that failed or were
-- cancelled start again, and the worker must know to redrive the run such a row names
-- (it exists) rather than count it as settled. A column with a constant default: no
-- table rewrite. Code of the previous release never reads it (and never reopens joins).
ALTER TABLE run_children ADD COLUMN IF NOT EXISTS revive boolean NOT NULL DEFAULT false;
