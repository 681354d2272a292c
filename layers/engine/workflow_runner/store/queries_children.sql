-- Child runs: joins (what a parent step asked for) and their children.

-- name: insert_join
-- A join a pass asked for (a repeated pass asks for the same id once).
INSERT INTO run_joins (tenant_id, join_id, parent_run_id, kind, child_workflow,
                       suspension_version, total, concurrency, catch, start_due_at, created_at,
                       completion)
VALUES (%(tenant_id)s, %(join_id)s, %(parent_run_id)s, %(kind)s, %(child_workflow)s,
        %(suspension_version)s, %(total)s, %(concurrency)s, %(catch)s, %(now)s, %(now)s,
        %(completion)s)
ON CONFLICT (tenant_id, join_id) DO NOTHING;

-- name: insert_children
-- A join's children in one statement, from a JSON array of rows.
INSERT INTO run_children (tenant_id, join_id, item_index, child_run_id, child_key, input)
SELECT %(tenant_id)s, %(join_id)s, r.item_index, r.child_run_id, r.child_key, r.input
FROM jsonb_to_recordset(%(rows)s)
     AS r(item_index integer, child_run_id uuid, child_key text, input jsonb)
ON CONFLICT (tenant_id, join_id, item_index) DO NOTHING;

-- name: claim_joins
-- Joins with children to start now; SKIP LOCKED lets workers take disjoint joins. A join
-- with a failure it does not catch starts nothing more (its parent is failing); one with
-- a completion policy goes on until the policy stops it (closed_at). Not the joins
-- %(served_tenants)s / %(served_joins)s (pairwise): those the caller started children
-- of since it last counted.
SELECT tenant_id::text AS tenant_id, join_id::text AS join_id,
       parent_run_id::text AS parent_run_id, kind, child_workflow, total, concurrency,
       next_index, running
FROM run_joins
WHERE start_due_at <= %(now)s AND closed_at IS NULL
  AND (catch OR completion IS NOT NULL OR failed = 0)
  AND (tenant_id, join_id) NOT IN (
      SELECT * FROM unnest(%(served_tenants)s::uuid[], %(served_joins)s::uuid[]))
ORDER BY start_due_at
LIMIT %(limit)s
FOR UPDATE SKIP LOCKED;

-- name: children_to_start
-- The next children of a join to start, in item order.
SELECT item_index, child_run_id::text AS child_run_id, child_key, input, revive
FROM run_children
WHERE tenant_id = %(tenant_id)s AND join_id = %(join_id)s
  AND item_index >= %(first)s AND status = 'pending'
ORDER BY item_index
LIMIT %(limit)s;

-- name: mark_children_running
-- Children just started or attached, marked running once their runs exist; their rows
-- locked in item order, the order in which a settling child locks them (record_pass).
UPDATE run_children c SET status = 'running', started_at = %(now)s, revive = false
FROM (SELECT tenant_id, join_id, item_index
      FROM run_children
      WHERE tenant_id = %(tenant_id)s AND join_id = %(join_id)s
        AND item_index = ANY(%(item_indexes)s::integer[]) AND status = 'pending'
      ORDER BY item_index
      FOR UPDATE) l
WHERE c.tenant_id = l.tenant_id AND c.join_id = l.join_id AND c.item_index = l.item_index;

-- name: insert_child_events
-- The trigger events (inputs) of children about to start, stored in the inbox in one
-- statement (a repeated start stores nothing twice).
INSERT INTO inbox (tenant_id, event_id, source, type, detail, event_time, received_at)
SELECT %(tenant_id)s, r.event_id, %(source)s, %(type)s, r.detail, %(now)s, %(now)s
FROM jsonb_to_recordset(%(rows)s) AS r(event_id text, detail jsonb)
ON CONFLICT (tenant_id, event_id) DO NOTHING;

-- name: join_started
-- Count the children just started and say whether more may start now.
UPDATE run_joins
SET next_index = %(next_index)s,
    running = running + %(started)s,
    start_due_at = CASE
        WHEN closed_at IS NULL AND %(next_index)s < total
             AND (catch OR completion IS NOT NULL OR failed = 0)
             AND running + %(started)s < concurrency THEN %(now)s::timestamptz
        ELSE NULL END
WHERE tenant_id = %(tenant_id)s AND join_id = %(join_id)s;

-- name: joins_with_uncounted
-- Joins with settled children the worker has not counted yet.
SELECT DISTINCT tenant_id::text AS tenant_id, join_id::text AS join_id
FROM run_children
WHERE NOT counted
LIMIT %(limit)s;

-- name: lock_join
-- Lock one join for counting (another worker counting it: skip).
SELECT join_id FROM run_joins
WHERE tenant_id = %(tenant_id)s AND join_id = %(join_id)s
FOR UPDATE SKIP LOCKED;

-- name: take_uncounted
-- The settled children of a join not counted yet, now counted.
UPDATE run_children SET counted = true
WHERE tenant_id = %(tenant_id)s AND join_id = %(join_id)s AND NOT counted
RETURNING item_index, child_run_id::text AS child_run_id, status, reason;

-- name: join_counted
-- Count settled children into their join; free their slots for the next children. A
-- failure the join does not catch stops it: nothing more starts, not even a child whose
-- start was already due (the worker stops the join in this transaction). A join with a
-- completion policy is stopped by the worker when its policy decides.
UPDATE run_joins
SET running = running - %(settled)s,
    settled = settled + %(settled)s,
    failed = failed + %(failed)s,
    start_due_at = CASE
        WHEN NOT catch AND completion IS NULL AND failed + %(failed)s > 0 THEN NULL
        WHEN closed_at IS NULL AND next_index < total
             AND running - %(settled)s < concurrency THEN %(now)s
        ELSE start_due_at END
WHERE tenant_id = %(tenant_id)s AND join_id = %(join_id)s
RETURNING parent_run_id::text AS parent_run_id, kind, child_workflow, total, settled,
          failed, catch, suspension_version, notified_at, closed_at, completion;

-- name: mark_join_notified
-- The parent was told the join settled (once).
UPDATE run_joins SET notified_at = %(now)s
WHERE tenant_id = %(tenant_id)s AND join_id = %(join_id)s AND notified_at IS NULL;

-- name: cancel_pending_children
-- Children of closed joins that never started: they never will (nothing to count).
UPDATE run_children SET status = 'cancelled', settled_at = %(now)s
WHERE tenant_id = %(tenant_id)s AND join_id = ANY(%(join_ids)s::uuid[]) AND status = 'pending';

-- name: stop_join
-- A map its worker stops (its completion policy decided, or a failure it does not catch):
-- nothing more starts; its parent is told in the same transaction. Returns the children
-- that never started, now never will.
WITH closed AS (
    UPDATE run_joins SET closed_at = %(now)s, start_due_at = NULL
    WHERE tenant_id = %(tenant_id)s AND join_id = %(join_id)s AND closed_at IS NULL
    RETURNING tenant_id, join_id
)
UPDATE run_children c SET status = 'cancelled', settled_at = %(now)s
FROM closed
WHERE c.tenant_id = closed.tenant_id AND c.join_id = closed.join_id AND c.status = 'pending'
RETURNING c.item_index;

-- name: running_children_of_join
-- The running children of one join, in item order (what its stop cancels).
SELECT item_index, child_run_id::text AS child_run_id
FROM run_children
WHERE tenant_id = %(tenant_id)s AND join_id = %(join_id)s AND status = 'running'
ORDER BY item_index;

-- name: running_children
-- The running children of joins (to cancel with their parent).
SELECT DISTINCT child_run_id::text AS child_run_id
FROM run_children
WHERE tenant_id = %(tenant_id)s AND join_id = ANY(%(join_ids)s::uuid[]) AND status = 'running';

-- name: join_outcomes
-- How each child of a join ended, in item order (what the parent's step returns).
SELECT item_index, child_run_id::text AS child_run_id, status, result, reason,
       started_at IS NOT NULL AS started
FROM run_children
WHERE tenant_id = %(tenant_id)s AND join_id = %(join_id)s
ORDER BY item_index;

-- name: children_of_run
-- A parent's children, join by join, in item order (runs show, the console).
SELECT j.join_id::text AS join_id, j.kind, j.child_workflow, c.item_index,
       c.child_run_id::text AS child_run_id, c.status, c.reason
FROM run_joins j
JOIN run_children c ON c.tenant_id = j.tenant_id AND c.join_id = j.join_id
WHERE j.tenant_id = %(tenant_id)s AND j.parent_run_id = %(run_id)s
ORDER BY j.created_at, j.join_id, c.item_index
LIMIT %(limit)s;

-- name: next_join_start
-- When the worker next has children to start (the local runtime's time travel).
SELECT min(start_due_at) AS at FROM run_joins WHERE start_due_at IS NOT NULL;

-- name: oldest_uncounted
-- When the oldest child the worker has not counted settled (doctor).
SELECT min(settled_at) AS at FROM run_children
WHERE NOT counted AND (%(tenant_id)s::uuid IS NULL OR tenant_id = %(tenant_id)s);

-- name: overdue_joins
-- Joins whose children were due to start long ago: no worker is starting them.
SELECT tenant_id::text AS tenant_id, join_id::text AS join_id,
       parent_run_id::text AS parent_run_id, child_workflow, start_due_at
FROM run_joins
WHERE start_due_at < %(before)s AND (%(tenant_id)s::uuid IS NULL OR tenant_id = %(tenant_id)s)
ORDER BY start_due_at
LIMIT %(limit)s;

-- name: lock_child_owners
-- Serialize the parents that end at once and share a child: each decides whether the
-- child has another owner after the one before it committed its joins' close.
SELECT pg_advisory_xact_lock(hashtextextended(%(tenant_id)s || ':' || %(child_run_id)s, 7));

-- name: child_owned_elsewhere
-- Whether a child still has an owner: a row in an open call/map join, or in a
-- start_workflow join (whose children outlive their parents), that is not settled.
SELECT EXISTS (
    SELECT 1 FROM run_children c
    JOIN run_joins j ON j.tenant_id = c.tenant_id AND j.join_id = c.join_id
    WHERE c.tenant_id = %(tenant_id)s AND c.child_run_id = %(child_run_id)s
      AND c.status IN ('pending', 'running')
      AND (j.kind = 'start' OR j.closed_at IS NULL)
) AS owned;

-- name: lock_open_joins
-- A parent's open call/map joins, locked in one order before its stream moves (a
-- cancel): the worker locks a join before it appends to its parent's stream.
SELECT join_id FROM run_joins
WHERE tenant_id = %(tenant_id)s AND parent_run_id = %(run_id)s AND kind <> 'start'
  AND closed_at IS NULL
ORDER BY join_id
FOR UPDATE;

-- name: revive_children
-- A redriven parent's join: its children that failed or were cancelled start again
-- (revived: the worker redrives a run that exists, starts one that does not).
-- Completed ones not counted yet are counted by reopen_join, which counts them all.
UPDATE run_children
SET status = CASE WHEN status IN ('failed', 'cancelled') THEN 'pending' ELSE status END,
    revive = status IN ('failed', 'cancelled'),
    counted = true,
    result = CASE WHEN status IN ('failed', 'cancelled') THEN NULL ELSE result END,
    reason = CASE WHEN status IN ('failed', 'cancelled') THEN NULL ELSE reason END,
    started_at = CASE WHEN status IN ('failed', 'cancelled') THEN NULL ELSE started_at END,
    settled_at = CASE WHEN status IN ('failed', 'cancelled') THEN NULL ELSE settled_at END
WHERE tenant_id = %(tenant_id)s AND join_id = %(join_id)s
  AND (status IN ('failed', 'cancelled') OR NOT counted);

-- name: reopen_join
-- Reopen a join its parent's redrive waits at again, its counts as its rows now say:
-- completed children counted, running ones (shared with another parent) running.
UPDATE run_joins j
SET closed_at = NULL, notified_at = NULL, suspension_version = %(suspension_version)s,
    failed = 0, settled = c.completed, running = c.running, next_index = c.first_pending,
    start_due_at = CASE WHEN c.first_pending < j.total THEN %(now)s::timestamptz END
FROM (SELECT count(*) FILTER (WHERE status = 'completed') AS completed,
             count(*) FILTER (WHERE status = 'running') AS running,
             coalesce(min(item_index) FILTER (WHERE status = 'pending'), max(item_index) + 1)
                 AS first_pending
      FROM run_children
      WHERE tenant_id = %(tenant_id)s AND join_id = %(join_id)s) c
WHERE j.tenant_id = %(tenant_id)s AND j.join_id = %(join_id)s
RETURNING j.total;

-- name: untold_children
-- Rows still running whose child run has settled: the join was never told (the doctor
-- reports them; its repair tells them). Both tables are written by the child's terminal
-- transaction, so a consistent read never sees one without the other.
SELECT c.tenant_id::text AS tenant_id, c.join_id::text AS join_id,
       j.parent_run_id::text AS parent_run_id, c.item_index,
       c.child_run_id::text AS child_run_id, r.status AS child_status
FROM run_children c
JOIN workflow_runs r ON r.tenant_id = c.tenant_id AND r.run_id = c.child_run_id
JOIN run_joins j ON j.tenant_id = c.tenant_id AND j.join_id = c.join_id
WHERE c.status = 'running' AND r.status IN ('completed', 'failed', 'cancelled')
  AND (%(tenant_id)s::uuid IS NULL OR c.tenant_id = %(tenant_id)s)
ORDER BY c.tenant_id, c.join_id, c.item_index
LIMIT %(limit)s;
