-- Child runs: joins (what a parent step asked for) and their children.

-- name: insert_join
-- A join a pass asked for (a repeated pass asks for the same id once).
INSERT INTO run_joins (tenant_id, join_id, parent_run_id, kind, child_workflow,
                       suspension_version, total, concurrency, catch, start_due_at, created_at)
VALUES (%(tenant_id)s, %(join_id)s, %(parent_run_id)s, %(kind)s, %(child_workflow)s,
        %(suspension_version)s, %(total)s, %(concurrency)s, %(catch)s, %(now)s, %(now)s)
ON CONFLICT (tenant_id, join_id) DO NOTHING;

-- name: insert_children
-- A join's children in one statement, from a JSON array of rows.
INSERT INTO run_children (tenant_id, join_id, item_index, child_run_id, child_key, input)
SELECT %(tenant_id)s, %(join_id)s, r.item_index, r.child_run_id, r.child_key, r.input
FROM jsonb_to_recordset(%(rows)s)
     AS r(item_index integer, child_run_id uuid, child_key text, input jsonb)
ON CONFLICT (tenant_id, join_id, item_index) DO NOTHING;

-- name: claim_joins
-- Joins with children to start now; SKIP LOCKED lets workers take disjoint joins.
SELECT tenant_id::text AS tenant_id, join_id::text AS join_id,
       parent_run_id::text AS parent_run_id, kind, child_workflow, total, concurrency,
       next_index, running
FROM run_joins
WHERE start_due_at <= %(now)s AND closed_at IS NULL
ORDER BY start_due_at
LIMIT %(limit)s
FOR UPDATE SKIP LOCKED;

-- name: children_to_start
-- The next children of a join to start, in item order.
SELECT item_index, child_run_id::text AS child_run_id, child_key, input
FROM run_children
WHERE tenant_id = %(tenant_id)s AND join_id = %(join_id)s
  AND item_index >= %(first)s AND status = 'pending'
ORDER BY item_index
LIMIT %(limit)s;

-- name: mark_children_running
-- Children about to start (before their runs start, so that a first pass that settles
-- one finds its row).
UPDATE run_children SET status = 'running', started_at = %(now)s
WHERE tenant_id = %(tenant_id)s AND join_id = %(join_id)s
  AND item_index = ANY(%(item_indexes)s::integer[]) AND status = 'pending';

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
-- Count settled children into their join; free their slots for the next children.
UPDATE run_joins
SET running = running - %(settled)s,
    settled = settled + %(settled)s,
    failed = failed + %(failed)s,
    start_due_at = CASE
        WHEN closed_at IS NULL AND next_index < total
             AND running - %(settled)s < concurrency THEN %(now)s
        ELSE start_due_at END
WHERE tenant_id = %(tenant_id)s AND join_id = %(join_id)s
RETURNING parent_run_id::text AS parent_run_id, kind, child_workflow, total, settled,
          failed, catch, suspension_version, notified_at, closed_at;

-- name: mark_join_notified
-- The parent was told the join settled (once).
UPDATE run_joins SET notified_at = %(now)s
WHERE tenant_id = %(tenant_id)s AND join_id = %(join_id)s AND notified_at IS NULL;

-- name: cancel_pending_children
-- Children of closed joins that never started: they never will (nothing to count).
UPDATE run_children SET status = 'cancelled', settled_at = %(now)s
WHERE tenant_id = %(tenant_id)s AND join_id = ANY(%(join_ids)s::uuid[]) AND status = 'pending';

-- name: running_children
-- The running children of joins (to cancel with their parent).
SELECT DISTINCT child_run_id::text AS child_run_id
FROM run_children
WHERE tenant_id = %(tenant_id)s AND join_id = ANY(%(join_ids)s::uuid[]) AND status = 'running';

-- name: join_outcomes
-- How each child of a join ended, in item order (what the parent's step returns).
SELECT item_index, child_run_id::text AS child_run_id, status, result, reason
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
