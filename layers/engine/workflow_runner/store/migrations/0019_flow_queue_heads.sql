-- migrate: no-transaction
-- The held work of a key not yet woken, in the order it is woken (rank, then arrival):
-- a release's hand-over and a look read the first few of a key's queue, and the safety
-- timer its first. Through the index of every waiter (flow_waiters_rank_idx) the server
-- chose, without statistics on the table (a queue that filled within a minute has
-- none), to read and sort the key's whole queue for them: `woken_at IS NULL` is
-- estimated at half a percent of rows when nearly all are. With the condition in the
-- index that reading is an index scan that stops at the rows it needs. Built
-- CONCURRENTLY: a hot key's queue is written by every claim; code of the previous
-- release runs its queries unchanged (the older index stays, for `wfr runs show`'s
-- places in line).
CREATE INDEX CONCURRENTLY IF NOT EXISTS flow_waiters_queued_idx
    ON flow_waiters (flow_key, rank_at, seq)
    WHERE woken_at IS NULL;
