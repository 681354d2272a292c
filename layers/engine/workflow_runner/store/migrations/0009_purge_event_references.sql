-- migrate: no-transaction
-- The purge (issue 12) deletes an old inbox row only when no remaining run names it as
-- its trigger (run-started.triggerEventRef) or as an awaited event it took
-- (event-matched, callback-completed: payload.eventId). This partial expression index
-- answers "does any run stream reference this event" without reading the tenant's
-- streams. Built CONCURRENTLY: wf_events is the largest table and every pass writes it.
-- The event types are literals, not parameters, so the planner can prove the predicate.
CREATE INDEX CONCURRENTLY IF NOT EXISTS wf_events_event_ref_idx ON wf_events
    (tenant_id, (coalesce(payload -> 'triggerEventRef' ->> 'eventId', payload ->> 'eventId')))
    WHERE type IN ('workflow.run-started', 'workflow.step.event-matched',
                   'workflow.callback.completed');
