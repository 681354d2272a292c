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
          o.run_id::text AS run_id, o.step_kind, o.request, o.attempts, o.next_attempt_at,
          o.stream_version, o.sending_since, o.leased_until;

-- name: settle_dispatch
-- Settle a request for good under this attempt's lease. A delivered request's payload
-- (addresses, bodies) is erased; a failed one keeps it so an operator can redeliver it.
UPDATE dispatch_outbox
SET status = %(status)s, leased_until = NULL, sending_since = NULL,
    request = CASE WHEN %(status)s = 'dispatched' THEN NULL ELSE request END,
    stream_version = %(stream_version)s, last_error = %(error)s,
    failure_reason = %(reason)s, settled_at = %(now)s
WHERE tenant_id = %(tenant_id)s AND request_id = %(request_id)s AND status = 'pending'
  AND leased_until = %(lease_until)s;

-- name: retry_dispatch
-- Schedule another attempt of a request after a transient failure (under its lease).
UPDATE dispatch_outbox
SET next_attempt_at = %(next_attempt_at)s, leased_until = NULL, sending_since = NULL,
    stream_version = %(stream_version)s, last_error = %(error)s
WHERE tenant_id = %(tenant_id)s AND request_id = %(request_id)s AND status = 'pending'
  AND leased_until = %(lease_until)s;

-- name: mark_dispatch_sending
-- A mail is about to be handed to the provider: committed before the call, so a crash
-- in between is seen by the next claim (and the mail not sent twice).
UPDATE dispatch_outbox SET sending_since = %(now)s
WHERE tenant_id = %(tenant_id)s AND request_id = %(request_id)s
  AND leased_until = %(lease_until)s;

-- name: release_dispatch
-- Give a claimed request back unstarted (the dispatcher ran out of time), its attempt
-- not counted, due at once.
UPDATE dispatch_outbox
SET leased_until = NULL, attempts = attempts - 1, next_attempt_at = %(now)s
WHERE tenant_id = %(tenant_id)s AND request_id = %(request_id)s AND status = 'pending'
  AND leased_until = %(lease_until)s;

-- name: redeliver_dispatch
-- An operator asks to deliver a failed request again: a fresh attempt budget.
UPDATE dispatch_outbox
SET status = 'pending', attempts = 0, next_attempt_at = %(now)s, leased_until = NULL,
    sending_since = NULL, stream_version = %(stream_version)s, last_error = NULL,
    failure_reason = NULL, settled_at = NULL
WHERE tenant_id = %(tenant_id)s AND request_id = %(request_id)s AND status = 'failed'
  AND request IS NOT NULL;

-- name: get_dispatch
-- One outbox row (tests and operators).
SELECT tenant_id::text AS tenant_id, request_id::text AS request_id, run_id::text AS run_id,
       step_kind, request, status, attempts, next_attempt_at, leased_until, stream_version,
       sending_since, last_error, failure_reason, created_at, settled_at
FROM dispatch_outbox
WHERE tenant_id = %(tenant_id)s AND request_id = %(request_id)s;

-- name: next_dispatch_due
-- When the earliest pending request is due (None: nothing pending).
SELECT min(next_attempt_at) AS due FROM dispatch_outbox WHERE status = 'pending';

-- name: list_deliveries
-- Fire-and-forget deliveries across tenants (or of one), newest first, by status:
-- failed (settled since the given instant), stuck (pending and due before the stuck
-- bound, no lease running) or pending; keyset pagination on (created_at, request_id).
SELECT tenant_id::text AS tenant_id, request_id::text AS request_id, run_id::text AS run_id,
       step_kind, status, attempts, next_attempt_at, leased_until, last_error, failure_reason,
       created_at, settled_at, request IS NOT NULL AS has_request
FROM dispatch_outbox
WHERE (%(tenant_id)s::uuid IS NULL OR tenant_id = %(tenant_id)s::uuid)
  AND CASE %(status)s
        WHEN 'failed' THEN status = 'failed' AND coalesce(settled_at, created_at) >= %(since)s
        WHEN 'stuck' THEN status = 'pending' AND next_attempt_at < %(stuck_before)s
             AND (leased_until IS NULL OR leased_until < %(stuck_before)s)
        ELSE status = 'pending'
      END
  AND (%(before_created)s::timestamptz IS NULL
       OR (created_at, request_id) < (%(before_created)s, %(before_id)s::uuid))
ORDER BY created_at DESC, request_id DESC
LIMIT %(limit)s;
