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

-- name: mark_child_running
-- A child is being started (before its run starts, so that a first pass that settles
-- it finds the row).
UPDATE run_children SET status = 'running', started_at = %(now)s
WHERE tenant_id = %(tenant_id)s AND join_id = %(join_id)s AND item_index = %(item_index)s
  AND status = 'pending';

-- name: join_started
-- Count the children just started and say whether more may start now.
UPDATE run_joins
SET next_index = %(next_index)s,
    running = running + %(started)s,
    start_due_at = CASE
        WHEN closed_at IS NULL AND %(next_index)s < total
             AND running + %(started)s < concurrency THEN %(now)s
        ELSE NULL END
WHERE tenant_id = %(tenant_id)s AND join_id = %(join_id)s;

-- name: settle_child_rows
-- A child run settled: every join that waits for it counts it (a child's run id is
-- shared by joins that named the same workflow and key).
UPDATE run_children
SET status = %(status)s, result = %(result)s, reason = %(reason)s, settled_at = %(now)s
WHERE tenant_id = %(tenant_id)s AND child_run_id = %(child_run_id)s AND status = 'running'
RETURNING join_id::text AS join_id, item_index;

-- name: join_child_settled
-- Count a settled child of a join; free its slot for the next child to start.
UPDATE run_joins
SET running = running - 1,
    settled = settled + 1,
    failed = failed + %(failed)s,
    start_due_at = CASE
        WHEN closed_at IS NULL AND next_index < total AND running - 1 < concurrency
            THEN %(now)s
        ELSE start_due_at END
WHERE tenant_id = %(tenant_id)s AND join_id = %(join_id)s
RETURNING parent_run_id::text AS parent_run_id, kind, child_workflow, total, settled,
          failed, catch, suspension_version, notified_at, closed_at;

-- name: mark_join_notified
-- The parent was told the join settled (once).
UPDATE run_joins SET notified_at = %(now)s
WHERE tenant_id = %(tenant_id)s AND join_id = %(join_id)s AND notified_at IS NULL;

-- name: close_joins_of_run
-- A parent ended: its call and map joins start nothing more (start_workflow children
-- outlive it). Returns the joins closed now.
UPDATE run_joins SET closed_at = %(now)s, start_due_at = NULL
WHERE tenant_id = %(tenant_id)s AND parent_run_id = %(run_id)s AND kind <> 'start'
  AND closed_at IS NULL
RETURNING join_id::text AS join_id;

-- name: cancel_pending_children
-- Children of closed joins that never started: they never will.
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
