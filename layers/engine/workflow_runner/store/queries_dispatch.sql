-- Named queries of the step dispatcher (workflow_runner.dispatcher).

-- name: claim_dispatches
-- Lease up to %(limit)s due pending requests, oldest first, counting the attempt. SKIP
-- LOCKED lets concurrent dispatchers take disjoint rows; the lease keeps a row whose
-- delivery is in progress (outside any transaction) from being taken again.
UPDATE dispatch_outbox o
SET leased_until = %(lease_until)s, attempts = o.attempts + 1
FROM (
    SELECT tenant_id, request_id
    FROM dispatch_outbox
    WHERE status = 'pending' AND next_attempt_at <= %(now)s
      AND (leased_until IS NULL OR leased_until <= %(now)s)
    ORDER BY next_attempt_at, request_id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
) due
WHERE o.tenant_id = due.tenant_id AND o.request_id = due.request_id
RETURNING o.tenant_id::text AS tenant_id, o.request_id::text AS request_id,
          o.run_id::text AS run_id, o.step_kind, o.request, o.attempts, o.next_attempt_at;

-- name: finish_dispatch
-- Settle a request for good and erase its payload (addresses, bodies).
UPDATE dispatch_outbox
SET status = %(status)s, request = NULL, leased_until = NULL
WHERE tenant_id = %(tenant_id)s AND request_id = %(request_id)s AND status = 'pending';

-- name: retry_dispatch
-- Schedule another attempt of a request after a transient failure.
UPDATE dispatch_outbox
SET next_attempt_at = %(next_attempt_at)s, leased_until = NULL
WHERE tenant_id = %(tenant_id)s AND request_id = %(request_id)s AND status = 'pending'
  AND leased_until = %(lease_until)s;

-- name: get_dispatch
-- One outbox row (tests and operators).
SELECT tenant_id::text AS tenant_id, request_id::text AS request_id, run_id::text AS run_id,
       step_kind, request, status, attempts, next_attempt_at, leased_until
FROM dispatch_outbox
WHERE tenant_id = %(tenant_id)s AND request_id = %(request_id)s;

-- name: next_dispatch_due
-- When the earliest pending request is due (None: nothing pending).
SELECT min(next_attempt_at) AS due FROM dispatch_outbox WHERE status = 'pending';
