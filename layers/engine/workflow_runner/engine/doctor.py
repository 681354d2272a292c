"""`wfr doctor`: check the invariants of ARCHITECTURE.md §2 on a live database.

Each check reports ok, warning (worth a look, not broken: e.g. a projection that is
a few events behind) or problem (an invariant is broken, or will break), with the
runs or types concerned and how to fix it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from ..definition import WorkflowRegistry
from ..definition.hosts import REGISTERED_HOSTS, DefinitionHosts
from ..store import Store
from .deliveries import STUCK_AFTER, list_deliveries
from .pinning import PinnedDefinition, pinned_definitions

Status = Literal["ok", "warning", "problem"]

# More unapplied events than this means PendingProjection is not keeping up.
LAG_PROBLEM = 1000


@dataclass
class Check:
    """The result of one check."""

    name: str
    status: Status
    summary: str
    fix: str = ""
    items: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "summary": self.summary,
            "fix": self.fix,
            "items": self.items,
        }


@dataclass
class DoctorReport:
    checks: list[Check]

    @property
    def problems(self) -> int:
        return sum(1 for c in self.checks if c.status == "problem")

    @property
    def ok(self) -> bool:
        return self.problems == 0

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "problems": self.problems,
            "checks": [c.to_json() for c in self.checks],
        }


def check_unsettled_runs(store: Store, tenant: str | None) -> Check:
    """Invariant 4: every run neither completed, failed nor cancelled has a pending row
    (or is about to get one: its suspension is not projected yet)."""
    rows = store.operator.unsettled_without_pending(tenant)
    stranded = [r for r in rows if not r.unprojected]
    lagging = [r for r in rows if r.unprojected]
    name = "every unsettled run has a pending row"
    if stranded:
        return Check(
            name,
            "problem",
            f"{len(stranded)} run(s) are {stranded[0].status} without a pending row "
            "and nothing left to project: they are stranded",
            "resume each one now (`wfr resume RUN_ID --tenant T --force`) or cancel it "
            "(`wfr cancel RUN_ID --tenant T`); then look for the pass that ended without "
            "a suspension event",
            [f"{r.tenant_id} {r.run_id} {r.workflow_name} ({r.status})" for r in stranded],
        )
    if lagging:
        return Check(
            name,
            "warning",
            f"{len(lagging)} waiting run(s) are not projected yet (projection lag)",
            "let PendingProjection catch up (locally: `wfr local tick`)",
            [f"{r.tenant_id} {r.run_id} {r.workflow_name}" for r in lagging],
        )
    return Check(name, "ok", "no unsettled run lacks a pending row")


def check_settled_pending(store: Store, tenant: str | None) -> Check:
    """No pending row belongs to a completed, failed or cancelled run."""
    rows = store.operator.settled_with_pending(tenant)
    stale = [r for r in rows if not r.unprojected]
    lagging = [r for r in rows if r.unprojected]
    name = "no pending row for a settled run"
    if stale:
        return Check(
            name,
            "problem",
            f"{len(stale)} pending row(s) belong to settled runs although their terminal "
            "event was projected",
            "the rows are harmless to resume (ResumeRun answers already-resumed) but wrong: "
            "rebuild the pending projection (truncate workflow_run_pending and reset the "
            "'workflow_run_pending' checkpoint, then let PendingProjection replay)",
            [f"{r.tenant_id} {r.run_id} step {r.step_index} ({r.status})" for r in stale],
        )
    if lagging:
        return Check(
            name,
            "warning",
            f"{len(lagging)} settled run(s) still have pending rows (projection lag)",
            "let PendingProjection catch up (locally: `wfr local tick`)",
            [f"{r.tenant_id} {r.run_id} ({r.status})" for r in lagging],
        )
    return Check(name, "ok", "no settled run has a pending row")


def check_projection_lag(store: Store) -> Check:
    """How far the pending projection is behind the run streams."""
    state = store.operator.projection_state()
    behind, at = state.behind, state.checkpoint_at
    name = "pending projection lag"
    where = f" (checkpoint written {at.isoformat()})" if at else " (it has never run)"
    if behind >= LAG_PROBLEM:
        return Check(
            name,
            "problem",
            f"{behind} events not applied{where}",
            "PendingProjection is not keeping up or not running: check its errors and "
            "schedule, then let it catch up",
        )
    if behind:
        return Check(
            name,
            "warning",
            f"{behind} event(s) not applied yet{where}",
            "normally transient; PendingProjection applies them on its next nudge "
            "or schedule (locally: `wfr local tick`)",
        )
    return Check(name, "ok", "the pending projection is up to date")


def check_pinned_definitions(
    store: Store,
    registry: WorkflowRegistry,
    tenant: str | None,
    pinned: list[PinnedDefinition] | None = None,
) -> Check:
    """Invariant 7, before a deploy: which waiting runs the registered definitions (run
    `wfr doctor` with the new code's WORKFLOW_MODULES) would fail; those that stay on a
    kept version (check_kept_versions) do not."""
    if pinned is None:
        pinned = pinned_definitions(store, registry, tenant)
    failing = [p for p in pinned if p.fails]
    runs = sum(p.runs for p in pinned)
    name = "waiting runs resume on the registered definitions"
    if failing:
        lost = sum(p.failing for p in failing)
        return Check(
            name,
            "problem",
            f"{lost} waiting run(s) on {len(failing)} definition(s) that would fail: their "
            "own definition is not registered, no registered definition's shape agrees "
            "where they wait and no kept version has it; they will fail with "
            "workflow_definition_changed when they resume",
            "keep the old definition registered next to the new one (define the new one "
            "with version=N+1 and leave the old one in WORKFLOW_MODULES until no run waits "
            "on it), or let them fail and `wfr redrive` them on the new definition",
            [p.describe() for p in failing],
        )
    exact, by_shape = sum(p.exact for p in pinned), sum(p.by_shape for p in pinned)
    kept = sum(p.kept for p in pinned)
    names = set(registry.names())
    # Runs served by a version that is not the latest say when that one may be removed;
    # runs that move by shape say onto which, runs on kept code on which version.
    listed = [
        p
        for p in pinned
        if p.by_shape
        or p.kept
        or p.workflow_name not in names
        or p.resumes_on != registry.latest(p.workflow_name).version
    ]
    return Check(
        name,
        "ok",
        f"{runs} waiting run(s) on {len(pinned)} definition(s): {exact} resume on their own "
        f"definition, {by_shape} on one whose shape agrees where they wait, {kept} stay on "
        "a kept version",
        items=[p.describe() for p in listed],
    )


def check_kept_versions(pinned: list[PinnedDefinition]) -> Check:
    """The kept versions (definition/hosts.py) waiting runs stay on: each with the runs and
    tenants it still serves. One no run references any more may be deleted (`wfr
    versions prune`)."""
    name = "kept versions serve the runs of changed definitions"
    lines: dict[str, list[str]] = {}
    for p in pinned:
        version = f" v{p.version}" if p.version is not None else ""
        for host in p.kept_on:
            lines.setdefault(host, []).append(
                f"{p.workflow_name}{version} (definition {p.fingerprint[:12]}…): {p.kept} "
                f"waiting run(s), {p.tenants} tenant(s)"
            )
    if not lines:
        return Check(name, "ok", "no waiting run needs a kept version")
    runs = sum(p.kept for p in pinned)
    return Check(
        name,
        "ok",
        f"{runs} waiting run(s) stay on {len(lines)} kept version(s) until they settle",
        "keep these versions while their runs wait; `wfr versions prune` deletes only "
        "versions no unsettled run needs",
        [f"{host}: {'; '.join(found)}" for host, found in sorted(lines.items())],
    )


@dataclass(frozen=True)
class TemplateRoutes:
    """What the deployed EventBridge rules route, as read from the SAM template by the
    caller (the CLI reads template.yaml; the engine does not read files)."""

    template: Path | None  # None: no template was found
    missing: list[str] = field(default_factory=list)  # types that reach no function
    error: str | None = None  # the template could not be read
    described: str | None = None  # the template, and the engine application it nests


def check_template(routes: TemplateRoutes | None, registry: WorkflowRegistry) -> Check:
    """Template EventPatterns route every trigger type to TriggerProjection and every
    awaited type to EventWakeup."""
    name = "template routes every trigger and awaited event type"
    if routes is None or routes.template is None:
        return Check(
            name,
            "warning",
            "no template.yaml found (none here or above, none packaged with the engine); "
            "routing not checked",
            "run from your project's folder (`wfr init DIR` starts one) or pass --template FILE",
        )
    if routes.error is not None:
        return Check(name, "problem", routes.error, "fix the template")
    if routes.missing:
        return Check(
            name,
            "problem",
            f"{len(routes.missing)} event type(s) of the registered workflows reach no function",
            "add the types to the EventPattern of the rule (TriggerProjection for "
            "triggers, EventWakeup for awaited types) in template.yaml and deploy",
            routes.missing,
        )
    return Check(
        name,
        "ok",
        f"{len(registry.trigger_types())} trigger and {len(registry.awaited_types())} awaited "
        f"type(s) routed by {routes.described or routes.template}",
    )


def check_deliveries(store: Store, tenant: str | None, now: datetime) -> Check:
    """Fire-and-forget deliveries: stuck ones (no dispatcher running) are a problem;
    failed and ambiguous ones in the last day are worth a look."""
    name = "mail and webhook deliveries"
    stuck = list_deliveries(store, "stuck", now, tenant_id=tenant, limit=1000)
    if stuck:
        return Check(
            name,
            "problem",
            f"{len(stuck)} delivery(ies) are overdue by more than "
            f"{int(STUCK_AFTER.total_seconds() // 60)} minutes: no dispatcher is delivering",
            "check StepDispatcher's errors and its schedule (locally: `wfr local tick`)",
            [f"{r.tenant_id} {r.request_id} {r.step_kind} run {r.run_id}" for r in stuck],
        )
    failed = list_deliveries(store, "failed", now, tenant_id=tenant, limit=1000)
    if failed:
        ambiguous = sum(1 for r in failed if r.failure_reason == "ambiguous")
        return Check(
            name,
            "warning",
            f"{len(failed)} delivery(ies) failed in the last day"
            + (f", {ambiguous} of them ambiguous mail (maybe sent)" if ambiguous else ""),
            "see `wfr dispatches list --status failed`; fix the cause, then "
            "`wfr dispatches redeliver --all` (check an ambiguous mail's mailbox first)",
            [
                f"{r.tenant_id} {r.request_id} {r.step_kind}: {r.last_error} ({r.failure_reason})"
                for r in failed
            ],
        )
    return Check(name, "ok", "no delivery failed in the last day, none is overdue")


def check_tasks(store: Store, tenant: str | None, now: datetime) -> Check:
    """Tasks: stuck ones (no worker running) are a problem; failed ones worth a look."""
    name = "tasks"
    stuck = store.tasks.find("stuck", now, now - STUCK_AFTER, tenant_id=tenant, limit=1000)
    if stuck:
        return Check(
            name,
            "problem",
            f"{len(stuck)} task(s) are overdue by more than "
            f"{int(STUCK_AFTER.total_seconds() // 60)} minutes: no worker is running them",
            "check StepDispatcher (the worker): its errors, schedule and time budget",
            [f"{t.tenant_id} {t.task_id} {t.task_key} of run {t.run_id}" for t in stuck],
        )
    failed = store.tasks.find("failed", now - timedelta(days=1), now, tenant_id=tenant, limit=1000)
    if failed:
        return Check(
            name,
            "warning",
            f"{len(failed)} task(s) failed for good in the last day",
            "their runs failed (reason task_failed, or result_not_storable for a result "
            "that is not JSON) unless they catch it: fix the cause, "
            "then `wfr redrive RUN_ID --tenant T`",
            [f"{t.tenant_id} run {t.run_id} task {t.task_key}: {t.last_error}" for t in failed],
        )
    return Check(name, "ok", "no task failed in the last day, none is overdue")


def check_children(store: Store, tenant: str | None, now: datetime) -> Check:
    """Child runs: every settled child is settled in its joins (else its parent waits
    forever); a join whose children were due to start long ago has no worker."""
    name = "child runs"
    untold = store.children.untold(tenant)
    if untold:
        return Check(
            name,
            "problem",
            f"{len(untold)} child run(s) settled but their map/call step was never told: "
            "their parents wait for them forever",
            "`wfr doctor --repair` tells them (the worker then counts them and resumes "
            "the parents); report it: the join protocol lost a settle",
            [
                f"{u.tenant_id} run {u.parent_run_id}: child {u.item_index} "
                f"({u.child_run_id}) is {u.child_status}"
                for u in untold
            ],
        )
    overdue = store.children.overdue(now - STUCK_AFTER, tenant)
    if overdue:
        return Check(
            name,
            "problem",
            f"{len(overdue)} map/call step(s) have children waiting more than "
            f"{int(STUCK_AFTER.total_seconds() // 60)} minutes to start: no worker is running",
            "check StepDispatcher (the worker starts child runs): its errors and schedule",
            [
                f"{j['tenant_id']} run {j['parent_run_id']}: {j['child_workflow']} children "
                f"due since {j['start_due_at']:%Y-%m-%dT%H:%M:%SZ}"
                for j in overdue
            ],
        )
    uncounted = store.children.oldest_uncounted(tenant)
    if uncounted is not None and uncounted < now - STUCK_AFTER:
        return Check(
            name,
            "problem",
            f"child runs that settled at {uncounted:%Y-%m-%dT%H:%M:%SZ} are not counted into "
            "their map/call step yet: no worker is running, so their parents wait",
            "check StepDispatcher (the worker counts settled children): errors, schedule",
        )
    return Check(name, "ok", "every child run due to start has started and been counted")


def run_doctor(
    store: Store,
    registry: WorkflowRegistry,
    tenant: str | None = None,
    routes: TemplateRoutes | None = None,
    now: datetime | None = None,
    hosts: DefinitionHosts | None = REGISTERED_HOSTS,
) -> DoctorReport:
    """Run every check.

    Args:
        store: the database.
        registry: the registered workflows (what the functions would load).
        tenant: restrict the run checks to one tenant (default: all).
        routes: what the SAM template routes (None: not checked, a warning).
        now: business time (default: the system clock).
        hosts: where kept code is found (default: the function versions registered in
            the database; locally the sources `wfr local` kept).
    """
    now = now or datetime.now(UTC)
    pinned = pinned_definitions(store, registry, tenant, hosts)
    return DoctorReport(
        [
            check_unsettled_runs(store, tenant),
            check_settled_pending(store, tenant),
            check_projection_lag(store),
            check_pinned_definitions(store, registry, tenant, pinned),
            check_kept_versions(pinned),
            check_deliveries(store, tenant, now),
            check_tasks(store, tenant, now),
            check_children(store, tenant, now),
            check_template(routes, registry),
        ]
    )
