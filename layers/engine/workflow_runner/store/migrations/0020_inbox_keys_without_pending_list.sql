-- The key index of the inbox (inbox_match_keys_idx, 0006) writes every new entry into
-- its place at once, instead of into GIN's list of pending entries (fastupdate). Every
-- search of a GIN index reads that whole list, and nothing empties it but a vacuum of
-- inbox or its reaching 4 MB: a burst of events filled it within seconds, and each new
-- wait's keyed look-back then read all of it. Where the inbox's statistics had been
-- taken while it held few events of the awaited type, the look-back's plan took the key
-- index, and 50,000 new waits' look-backs took 371 s instead of 7 (the bench's broadcast
-- set-up, workload 11). Writing entries in place bounds every search by the keys it asks
-- for; ingestion did not measurably slow (three alternating rounds, 10,000 events:
-- 4,282-4,679 events/s with the list, 4,442-4,641 without).
--
-- Safe while the previous release runs: its statements are unchanged. The change of
-- the index's setting takes a brief ACCESS EXCLUSIVE lock on the index (inbox inserts
-- wait for it; the runner bounds the wait and retries). Turning it off does not empty
-- the list already pending: gin_clean_pending_list moves those entries into place.
ALTER INDEX IF EXISTS inbox_match_keys_idx SET (fastupdate = off);
SELECT gin_clean_pending_list('inbox_match_keys_idx'::regclass);
