-- migrate: no-transaction
-- The due scan's tenant share and per-tenant cap (issue 15) count a tenant's rows in
-- flight (leased, lease not ended) before leasing more. Only leased rows are in this
-- index, so a count reads the rows in flight (and the few whose lease ended without
-- their run moving), never the tenant's whole backlog. Built CONCURRENTLY: the pending
-- table holds every waiting run and is written by every pass.
CREATE INDEX CONCURRENTLY IF NOT EXISTS workflow_run_pending_leased_idx
    ON workflow_run_pending (tenant_id, wake_at) INCLUDE (leased_until)
    WHERE leased_until IS NOT NULL;
