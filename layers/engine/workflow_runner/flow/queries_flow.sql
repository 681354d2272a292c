-- Named queries of flow control (workflow_runner.flow): limit rows, concurrency slots,
-- the queue of held work, throttle turns, rate-limit windows and skipped triggers.

-- name: flow_take_slots
-- Lock up to %(counts)s free slots of each key (%(keys)s, %(limits)s pairwise) for the
-- passes of the caller's transaction: a row lock is the slot, released by the commit.
-- SKIP LOCKED: a slot another pass holds is not waited for. `queued`: the key has held
-- work waiting, which a free slot must go to first.
SELECT w.flow_key, s.slot,
       EXISTS (SELECT 1 FROM flow_waiters q WHERE q.flow_key = w.flow_key) AS queued
FROM unnest(%(keys)s::text[], %(limits)s::int[], %(counts)s::int[]) AS w(flow_key, lim, n)
LEFT JOIN LATERAL (
    SELECT f.slot FROM flow_slots f
    WHERE f.flow_key = w.flow_key AND f.slot <= w.lim
      AND (f.holder IS NULL OR f.leased_until <= %(now)s)
    ORDER BY f.slot
    LIMIT w.n
    FOR UPDATE SKIP LOCKED
) s ON true
ORDER BY w.flow_key, s.slot;

-- name: flow_take_slots_waiting
-- As flow_take_slots, for woken passes that got no slot at all: waiting for the slots'
-- row locks instead of skipping them (a look counting the key's slots locks them all;
-- skipping would hold back again the pass it promised a slot to). A slot a pass holds is
-- waited for too, and is free once that pass committed. Keys and slots in order.
SELECT w.flow_key, s.slot,
       EXISTS (SELECT 1 FROM flow_waiters q WHERE q.flow_key = w.flow_key) AS queued
FROM unnest(%(keys)s::text[], %(limits)s::int[], %(counts)s::int[]) AS w(flow_key, lim, n)
LEFT JOIN LATERAL (
    SELECT f.slot FROM flow_slots f
    WHERE f.flow_key = w.flow_key AND f.slot <= w.lim
      AND (f.holder IS NULL OR f.leased_until <= %(now)s)
    ORDER BY f.slot
    LIMIT w.n
    FOR UPDATE
) s ON true
ORDER BY w.flow_key, s.slot;

-- name: flow_lease_slots
-- A task attempt's slots: one free slot of each key, leased to %(holder)s until
-- %(until)s in the claim's transaction (given back with the outcome, or by the lease's
-- end when the worker died). Returns the keys that had one.
WITH picked AS (
    SELECT f.flow_key, f.slot
    FROM unnest(%(keys)s::text[], %(limits)s::int[]) AS w(flow_key, lim)
    CROSS JOIN LATERAL (
        SELECT s.flow_key, s.slot FROM flow_slots s
        WHERE s.flow_key = w.flow_key AND s.slot <= w.lim
          AND (s.holder IS NULL OR s.leased_until <= %(now)s)
        ORDER BY s.slot
        LIMIT 1
        FOR UPDATE SKIP LOCKED
    ) f
)
UPDATE flow_slots s SET holder = %(holder)s, leased_until = %(until)s
FROM picked p
WHERE s.flow_key = p.flow_key AND s.slot = p.slot
RETURNING s.flow_key;

-- name: flow_adopt_slots
-- A woken task attempt's slots: those a release or a look handed over to its work while
-- it waited (holder "handed:<tenant>/task:<task id>"), leased now to %(holder)s until
-- %(until)s. Only rows still handed to it match: a handover whose lease ran out and was
-- taken by another claim is not taken back. Returns the keys it had one of.
UPDATE flow_slots s SET holder = %(holder)s, leased_until = %(until)s
FROM unnest(%(keys)s::text[], %(handed)s::text[]) AS w(flow_key, handed)
WHERE s.flow_key = w.flow_key AND s.holder = w.handed
RETURNING s.flow_key;

-- name: flow_release_slots
-- Give back the slots an attempt leased (only its own lease: a worker whose lease
-- ended and was taken over frees nothing); each slot with whether its key has held
-- work waiting (flow_hand_over gives it on in the same transaction). The
-- rows are locked in key and slot order first, the order every statement that waits
-- for slot locks takes them (flow_adopt_slots, flow_count_free): an attempt
-- holding a per-tenant and a global slot released them in the heap's order, and
-- deadlocked with a woken attempt locking the same two keys.
WITH mine AS (
    SELECT flow_key, slot FROM flow_slots
    WHERE holder = %(holder)s
    ORDER BY flow_key, slot
    FOR UPDATE
)
UPDATE flow_slots s SET holder = NULL, leased_until = NULL
FROM mine m
WHERE s.flow_key = m.flow_key AND s.slot = m.slot AND s.holder = %(holder)s
RETURNING s.flow_key, s.slot,
          EXISTS (SELECT 1 FROM flow_waiters q WHERE q.flow_key = s.flow_key) AS queued;

-- name: flow_ensure_slots
-- The row and the slots of concurrency keys met for the first time (or whose limit
-- grew); the limit operators see follows the definition's current value.
WITH wanted AS (
    SELECT * FROM unnest(%(keys)s::text[], %(limits)s::int[], %(tenant_ids)s::uuid[],
                         %(workflows)s::text[], %(steps)s::text[], %(values)s::text[])
        AS w(flow_key, lim, tenant_id, workflow_name, step_key, key_value)
), limits AS (
    INSERT INTO flow_limits (flow_key, kind, tenant_id, workflow_name, step_key, key_value,
                             lim, updated_at)
    SELECT flow_key, 'concurrency', tenant_id, workflow_name, step_key, key_value, lim,
           %(now)s
    FROM wanted
    ON CONFLICT (flow_key) DO NOTHING
), changed AS (
    UPDATE flow_limits f SET lim = w.lim, updated_at = %(now)s
    FROM wanted w
    WHERE f.flow_key = w.flow_key AND f.lim <> w.lim
)
INSERT INTO flow_slots (flow_key, slot)
SELECT w.flow_key, generate_series(1, w.lim) FROM wanted w
-- A key whose slots all exist inserts nothing: a conflicting insert waits for the
-- transaction updating that slot row (a lease, a release) and could deadlock with it.
WHERE NOT EXISTS (SELECT 1 FROM flow_slots c WHERE c.flow_key = w.flow_key AND c.slot = w.lim)
ORDER BY 1, 2
ON CONFLICT (flow_key, slot) DO NOTHING;

-- name: flow_queue_state
-- For each piece of work (key, tenant, run, work pairwise): whether its key has held
-- work waiting, and its own place in that queue (NULL: not queued; false: waiting;
-- true: woken, a slot is free for it).
SELECT w.n,
       EXISTS (SELECT 1 FROM flow_waiters q WHERE q.flow_key = w.flow_key) AS queued,
       (SELECT q.woken_at IS NOT NULL FROM flow_waiters q
        WHERE q.flow_key = w.flow_key AND q.tenant_id = w.tenant_id
          AND q.run_id = w.run_id AND q.work = w.work) AS mine
FROM unnest(%(keys)s::text[], %(tenant_ids)s::uuid[], %(run_ids)s::uuid[], %(works)s::text[])
     WITH ORDINALITY AS w(flow_key, tenant_id, run_id, work, n);

-- name: flow_queue_work
-- Put held work at the end of its key's queue, or back to its place when it was woken
-- but found no slot.
INSERT INTO flow_waiters (flow_key, tenant_id, work, run_id, step_index, workflow_name,
                          queued_at, rank_at)
SELECT * FROM unnest(%(keys)s::text[], %(tenant_ids)s::uuid[], %(works)s::text[],
                     %(run_ids)s::uuid[], %(step_indexes)s::int[], %(workflows)s::text[],
                     %(queued_at)s::timestamptz[], %(ranks)s::timestamptz[])
ORDER BY 1
ON CONFLICT (flow_key, tenant_id, run_id, work) DO UPDATE SET woken_at = NULL;

-- name: flow_admitted
-- Work that took its slot leaves the queue.
DELETE FROM flow_waiters q
USING unnest(%(keys)s::text[], %(tenant_ids)s::uuid[], %(run_ids)s::uuid[], %(works)s::text[])
      AS w(flow_key, tenant_id, run_id, work)
WHERE q.flow_key = w.flow_key AND q.tenant_id = w.tenant_id AND q.run_id = w.run_id
  AND q.work = w.work;

-- name: flow_park_pending
-- A held resume's pending row waits without a wake time (the due scan passes it by)
-- until a slot that frees wakes it.
UPDATE workflow_run_pending p SET wake_at = %(never)s, leased_until = NULL
FROM unnest(%(tenant_ids)s::uuid[], %(run_ids)s::uuid[], %(step_indexes)s::int[])
     AS r(tenant_id, run_id, step_index)
WHERE p.tenant_id = r.tenant_id AND p.run_id = r.run_id AND p.step_index = r.step_index;

-- name: flow_park_task
-- A held task attempt: back to pending, its attempt not counted, due at %(until)s (its
-- throttle turn, or never: a slot that frees wakes it), with the turn it reserved.
UPDATE task_queue
SET status = 'pending', attempts = attempts - 1, leased_until = NULL,
    next_attempt_at = %(until)s, flow_ticket = %(ticket)s
WHERE tenant_id = %(tenant_id)s AND task_id = %(task_id)s AND status = 'running'
  AND attempts = %(attempt)s;

-- name: flow_next_turn
-- The earliest throttle turn a pending task attempt holds (the worker waits for it).
SELECT min(next_attempt_at) AS turn FROM task_queue
WHERE status = 'pending' AND flow_ticket IS NOT NULL AND next_attempt_at > %(now)s;

-- name: flow_use_ticket
-- A claimed attempt whose throttle turn has come uses it up.
UPDATE task_queue SET flow_ticket = NULL
WHERE tenant_id = %(tenant_id)s AND task_id = %(task_id)s;

-- name: flow_count_free
-- Lock every slot of a key, waiting for the passes that hold one to commit, and count
-- those free now (missing rows are free slots), with the free rows' numbers (a look
-- hands them over, flow_hand_over). Waiting here is what makes a wake after a hold
-- exact: a pass in progress when the work was held is seen once it has ended.
SELECT %(limit)s - count(*) + count(*) FILTER (
           WHERE s.holder IS NULL OR s.leased_until <= %(now)s) AS free,
       coalesce(array_agg(s.slot ORDER BY s.slot) FILTER (
           WHERE s.holder IS NULL OR s.leased_until <= %(now)s), '{}') AS free_slots,
       min(s.leased_until) FILTER (
           WHERE s.holder IS NOT NULL AND s.leased_until > %(now)s) AS next_lease_end
FROM (SELECT slot, holder, leased_until FROM flow_slots
      WHERE flow_key = %(key)s AND slot <= %(limit)s
      ORDER BY slot
      FOR UPDATE) s;

-- name: flow_drop_dead_waiters
-- Held work that is gone (its run no longer waits: cancelled, purged; its task no
-- longer open) leaves the queue; looked at from the front in the order work is woken
-- (rank, then arrival), the first %(limit)s rows.
DELETE FROM flow_waiters q
USING (SELECT seq FROM flow_waiters WHERE flow_key = %(key)s ORDER BY rank_at, seq
       LIMIT %(limit)s) h
WHERE q.flow_key = %(key)s AND q.seq = h.seq
  AND CASE WHEN q.work = 'pass' THEN NOT EXISTS (
              SELECT 1 FROM workflow_runs r
              WHERE r.tenant_id = q.tenant_id AND r.run_id = q.run_id AND r.status = 'waiting')
           ELSE NOT EXISTS (
              SELECT 1 FROM task_queue t
              WHERE t.tenant_id = q.tenant_id
                AND t.task_id = substr(q.work, 6)::uuid AND t.status IN ('pending', 'running'))
      END;

-- name: flow_hand_over
-- Wake the first held work of a key (by rank: queued time less its priority's head
-- start, then arrival) for the free slots %(slots)s, whose row locks the caller holds
-- (a release freed them, a look counted them). A task attempt gets one outright: the
-- slot is leased to its work ("handed:<tenant>/task:<task id>") until %(until)s and its
-- row is due now, so its claim adopts the slot (flow_adopt_slots) with no look, no count
-- and no wait. A pass is promised a free slot (woken; it takes one as it runs).
-- %(wake)s: how many to wake at most. A look (%(look)s) wakes that many less the work
-- woken earlier and still to take a free slot, passes included; a release wakes only
-- the task attempts ahead of the first pass or busy attempt (a look after its commit
-- does the rest). Rows other transactions hold are skipped, never waited for (a waiter
-- being put back, a task row a claim holds: that claim puts it back to its place and
-- asks for a look), so a release or a look never waits for a claim that holds task
-- rows; a claim, for its part, never waits for slot locks while it holds them.
-- Run with a bound of at least %(wake)s (FlowStore.hand_over; 64 as written): the first
-- that many of the queue are locked, and of them the first %(wake)s less those promised
-- are woken. A LIMIT the plan cannot read as a number is planned as a tenth of the key's
-- queue, and the joins below then read the whole queue and the task queue (5 ms a
-- release with 2,500 attempts queued); a bound of a few rows keeps them to index probes.
WITH promised AS (
    SELECT count(*) AS n FROM flow_waiters q
    WHERE %(look)s AND q.flow_key = %(key)s AND q.woken_at IS NOT NULL
      AND NOT EXISTS (
          SELECT 1 FROM flow_slots s
          WHERE s.flow_key = q.flow_key AND s.leased_until > %(now)s
            AND s.holder = 'handed:' || q.tenant_id || '/' || q.work)
), locked AS (
    SELECT seq, tenant_id, run_id, step_index, work, workflow_name, queued_at, rank_at,
           CASE WHEN work LIKE 'task:%%' THEN substr(work, 6)::uuid END AS task_id
    FROM flow_waiters
    WHERE flow_key = %(key)s AND woken_at IS NULL
    ORDER BY rank_at, seq
    LIMIT 64 /* bound */
    FOR UPDATE SKIP LOCKED
), heads AS (
    SELECT * FROM locked
    ORDER BY rank_at, seq
    LIMIT greatest(0, %(wake)s - (SELECT n FROM promised))
), ready AS (
    SELECT t.tenant_id, t.task_id FROM task_queue t
    JOIN heads h ON t.tenant_id = h.tenant_id AND t.task_id = h.task_id
    WHERE t.status = 'pending'
    FOR UPDATE OF t SKIP LOCKED
), ranked AS (
    SELECT h.*, r.task_id IS NOT NULL AS ready,
           bool_or(r.task_id IS NULL) OVER (ORDER BY h.rank_at, h.seq) AS stopped
    FROM heads h
    LEFT JOIN ready r ON r.tenant_id = h.tenant_id AND r.task_id = h.task_id
), chosen AS (
    SELECT *, row_number() OVER (PARTITION BY task_id IS NULL ORDER BY rank_at, seq) AS n
    FROM ranked
    WHERE CASE WHEN %(look)s THEN task_id IS NULL OR ready ELSE NOT stopped END
), free AS (
    SELECT f.slot, row_number() OVER (ORDER BY f.slot) AS n
    FROM unnest(%(slots)s::int[]) AS f(slot)
), handed AS (
    UPDATE flow_slots s
    SET holder = 'handed:' || c.tenant_id || '/' || c.work, leased_until = %(until)s
    FROM chosen c JOIN free f ON f.n = c.n
    WHERE c.task_id IS NOT NULL AND s.flow_key = %(key)s AND s.slot = f.slot
      AND (s.holder IS NULL OR s.leased_until <= %(now)s)
    RETURNING c.seq
), woken AS (
    UPDATE flow_waiters q SET woken_at = %(now)s
    FROM chosen c
    WHERE q.flow_key = %(key)s AND q.seq = c.seq
      AND (%(look)s OR c.seq IN (SELECT seq FROM handed))
    RETURNING q.seq, q.tenant_id, q.run_id, q.step_index, q.work, q.workflow_name,
              q.queued_at
), due AS (
    -- Due at once, and ahead of the work not yet tried: due from the task's creation,
    -- not from now. Claims take the oldest due first, and an attempt handed a slot holds
    -- it idle until claimed; due only now, it waited behind every task created before
    -- (one hot key's 10,000 untried attempts, each held back in turn: issue 34's pair).
    UPDATE task_queue t SET next_attempt_at = least(t.created_at, %(now)s)
    FROM chosen c
    WHERE t.tenant_id = c.tenant_id AND t.task_id = c.task_id
      AND c.seq IN (SELECT seq FROM woken)
)
SELECT w.tenant_id::text AS tenant_id, w.run_id::text AS run_id, w.step_index, w.work,
       w.workflow_name, w.queued_at, w.seq IN (SELECT seq FROM handed) AS handed
FROM woken w
ORDER BY w.seq;

-- name: flow_time_head
-- The safety timer of a key's first held work not woken (by rank): its task attempt or
-- its held resume is due at %(at)s at the latest. A timer brings work forward, never
-- puts it off: another release may be waking that head at this moment (due now), and a
-- later due time would strand it, its slot handed over, until the handover's end
-- (issue 34's stuck tail). A task row another transaction holds is skipped, not waited
-- for: a claim holding it puts it back and asks for a look itself (see flow_hand_over).
-- One statement: the head read and its timer set in one round trip, under the slot
-- locks the caller holds.
WITH head AS (
    SELECT tenant_id, run_id, step_index, work FROM flow_waiters
    WHERE flow_key = %(key)s AND woken_at IS NULL
    ORDER BY rank_at, seq
    LIMIT 1
), task AS (
    SELECT q.tenant_id, q.task_id FROM task_queue q
    JOIN head h ON q.tenant_id = h.tenant_id AND h.work LIKE 'task:%%'
               AND q.task_id = substr(h.work, 6)::uuid
    WHERE q.status = 'pending'
    FOR UPDATE OF q SKIP LOCKED
), timed_task AS (
    UPDATE task_queue t SET next_attempt_at = least(t.next_attempt_at, %(at)s)
    FROM task r
    WHERE t.tenant_id = r.tenant_id AND t.task_id = r.task_id
    RETURNING t.task_id
)
UPDATE workflow_run_pending p SET wake_at = least(p.wake_at, %(at)s)
FROM head h
WHERE h.work = 'pass' AND p.tenant_id = h.tenant_id AND p.run_id = h.run_id
  AND p.step_index = h.step_index;

-- name: flow_due_pending
-- Woken (or timed) held resumes: their pending rows due at %(at)s, lease free.
UPDATE workflow_run_pending p SET wake_at = %(at)s, leased_until = NULL
FROM unnest(%(tenant_ids)s::uuid[], %(run_ids)s::uuid[], %(step_indexes)s::int[])
     AS r(tenant_id, run_id, step_index)
WHERE p.tenant_id = r.tenant_id AND p.run_id = r.run_id AND p.step_index = r.step_index
RETURNING p.tenant_id::text AS tenant_id, p.run_id::text AS run_id, p.step_index, p.wake_at;

-- name: flow_reserve_turn
-- A throttle's token bucket as virtual scheduling (GCRA): each unit of work reserves
-- the next turn, `burst` turns at once when the bucket is full, one per interval after
-- that, in the order they reserve. The row lock serialises a key's reservations.
INSERT INTO flow_limits (flow_key, kind, tenant_id, workflow_name, step_key, key_value, lim,
                         period_ms, burst, tat, updated_at)
VALUES (%(key)s, 'throttle', %(tenant_id)s, %(workflow)s, %(step)s, %(value)s, %(limit)s,
        %(period_ms)s, %(burst)s, %(now)s::timestamptz + %(interval)s, %(now)s)
ON CONFLICT (flow_key) DO UPDATE
SET tat = greatest(flow_limits.tat, %(now)s::timestamptz) + %(interval)s,
    lim = EXCLUDED.lim, period_ms = EXCLUDED.period_ms, burst = EXCLUDED.burst,
    updated_at = %(now)s
RETURNING greatest(%(now)s::timestamptz, flow_limits.tat - %(burst)s * %(interval)s) AS turn;

-- name: flow_lock_limit
-- A rate limit's, singleton's or debounce's row, created on first use and locked for the
-- caller's transaction (a key's triggers are judged one at a time), with the status of
-- the key's latest run.
WITH created AS (
    INSERT INTO flow_limits (flow_key, kind, tenant_id, workflow_name, key_value, lim,
                             period_ms, recent, updated_at)
    VALUES (%(key)s, %(kind)s, %(tenant_id)s, %(workflow)s, %(value)s, %(limit)s,
            %(period_ms)s, '{}', %(now)s)
    ON CONFLICT (flow_key) DO NOTHING
    RETURNING flow_key
)
SELECT (SELECT count(*) FROM created) AS created;

-- name: flow_read_locked
-- The locked row's state (see flow_lock_limit).
SELECT f.recent, f.run_id::text AS run_id, r.status AS run_status
FROM flow_limits f
LEFT JOIN workflow_runs r ON r.tenant_id = %(tenant_id)s AND r.run_id = f.run_id
WHERE f.flow_key = %(key)s
FOR UPDATE OF f;

-- name: flow_set_state
-- Record a rate limit's admissions or a key's latest run.
UPDATE flow_limits SET recent = %(recent)s, run_id = %(run_id)s, lim = %(limit)s,
                       period_ms = %(period_ms)s, updated_at = %(now)s
WHERE flow_key = %(key)s;

-- name: flow_record_skip
-- A trigger that started nothing, and why (a redelivery records it once).
INSERT INTO flow_skipped (tenant_id, event_id, workflow_name, reason, flow_key, detail,
                          run_id, skipped_at)
VALUES (%(tenant_id)s, %(event_id)s, %(workflow)s, %(reason)s, %(key)s, %(detail)s,
        %(run_id)s, %(now)s)
ON CONFLICT (tenant_id, event_id, workflow_name) DO NOTHING;

-- name: flow_list_skipped
-- Skipped triggers, newest first (across tenants, or of one).
SELECT tenant_id::text AS tenant_id, event_id, workflow_name, reason, flow_key, detail,
       run_id::text AS run_id, skipped_at
FROM flow_skipped
WHERE (%(tenant_id)s::uuid IS NULL OR tenant_id = %(tenant_id)s::uuid)
  AND (%(workflow)s::text IS NULL OR workflow_name = %(workflow)s)
ORDER BY skipped_at DESC, tenant_id, event_id
LIMIT %(limit)s;

-- name: flow_list_limits
-- Every limit key with what it holds now: attempts in flight (leased slots; a pass holds
-- its slot only for its transaction), work queued (held for a slot; a throttle's turns
-- still ahead, from its next turn), for `wfr limits` and the console.
SELECT f.flow_key, f.kind, f.tenant_id::text AS tenant_id, f.workflow_name, f.step_key,
       f.key_value, f.lim, f.period_ms, f.burst, f.tat, f.updated_at,
       (SELECT count(*) FROM flow_slots s
        WHERE s.flow_key = f.flow_key AND s.holder IS NOT NULL
          AND s.leased_until > %(now)s) AS in_flight,
       (SELECT count(*) FROM flow_waiters q WHERE q.flow_key = f.flow_key) AS queued,
       (SELECT min(q.queued_at) FROM flow_waiters q WHERE q.flow_key = f.flow_key)
           AS oldest_queued_at
FROM flow_limits f
WHERE (%(tenant_id)s::uuid IS NULL OR f.tenant_id = %(tenant_id)s::uuid
       OR f.tenant_id IS NULL)
  AND (%(workflow)s::text IS NULL OR f.workflow_name = %(workflow)s)
ORDER BY f.workflow_name, f.kind, f.flow_key
LIMIT %(limit)s;

-- name: flow_run_waits
-- What holds one run back now: its queued resume or task attempts, by limit.
SELECT q.flow_key, q.work, q.step_index, q.queued_at, q.woken_at,
       (SELECT count(*) FROM flow_waiters a
        WHERE a.flow_key = q.flow_key AND (a.rank_at, a.seq) < (q.rank_at, q.seq)) AS ahead
FROM flow_waiters q
WHERE q.tenant_id = %(tenant_id)s AND q.run_id = %(run_id)s
ORDER BY q.seq;

-- name: flow_run_turns
-- A run's task attempts waiting for their throttle turn.
SELECT task_key, flow_ticket FROM task_queue
WHERE tenant_id = %(tenant_id)s AND run_id = %(run_id)s AND status = 'pending'
  AND flow_ticket > %(now)s
ORDER BY flow_ticket;

-- name: flow_queued_by_workflow
-- Work held for a slot per workflow, and how long the oldest has waited (LimitQueued).
SELECT workflow_name, count(*) AS queued, min(queued_at) AS oldest
FROM flow_waiters
GROUP BY workflow_name
ORDER BY workflow_name;

-- name: flow_add_cancel_keys
-- What may cancel a run that starts now (cancel_on), one row per CancelOn.
INSERT INTO flow_cancel_keys (tenant_id, event_type, match_value, workflow_name, run_id,
                              started_at)
SELECT %(tenant_id)s::uuid, k.event_type, k.match_value, %(workflow)s, %(run_id)s::uuid,
       %(now)s
FROM unnest(%(types)s::text[], %(values)s::text[]) AS k(event_type, match_value)
ON CONFLICT DO NOTHING;

-- name: flow_take_cancel_keys
-- The runs an arriving event names (their rows go: a run is cancelled once); those
-- started before `since` are too old to cancel (their rows go too: they only age).
WITH taken AS (
    DELETE FROM flow_cancel_keys
    WHERE tenant_id = %(tenant_id)s::uuid AND event_type = %(event_type)s
      AND match_value = %(value)s AND workflow_name = %(workflow)s
    RETURNING run_id, started_at
)
SELECT run_id::text AS run_id FROM taken
WHERE %(since)s::timestamptz IS NULL OR started_at >= %(since)s::timestamptz
ORDER BY run_id;
