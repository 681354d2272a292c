"""Migration: an operator moves waiting runs onto another registered definition of their
workflow (`wfr runs migrate`, the console's "Migrate waiting runs").

Since a waiting run resumes on a definition whose shape agrees where it stands
(engine/pinning.py), migration is for the structural changes that stop it from doing so
(a step inserted before its position, say), or for moving runs deliberately. Each
waiting run of the workflow (of one tenant, if asked) that is not on the target
definition yet is judged: its target place is its own path, or where a mapping
(engine/step_mapping.py) puts it; it moves when that place exists in the target and
holds the same kind of step, waiting for the same thing under the same keys
(engine/step_kinds.py). Anything else is refused, with nothing written for the run.
A dry run only judges, and shows for each run the first structural difference
of its own definition against the target (definition/shape.py): what else differs.

A move is one transaction per run: the audit fact `workflow.operator-action` {action:
"migrate"} and `workflow.run-migrated` (stream/operator.py) are appended at the stream
version the run was read at, so a resume, a task outcome, a match, a callback answer or
a cancel racing it and the migration never both take that version. One that took it
first makes the migration look again: at the same suspension (an outcome or a match
arrived: it is kept and moves along) it moves the run; at another one, or a run that
ended, it reports `lost` and writes nothing; a run that another migration moved onto
the target first counts as already there, and nothing is written for it. The
suspension keeps its version, so joins, tasks and callbacks that refer to it stay
valid; the rows that name its step are moved in the same transaction: its tasks' paths
and definition (task_queue), its callback tokens' step (callbacks; taken before the
append, in the order a completion takes them), and the run's summary's definition
(workflow_runs; its version stays, as the resume reads the stream's tail from it). The
pending projection moves its pending row (engine/projection.py).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Literal

from ..definition import (
    MailSend,
    Parallel,
    Task,
    WebhookSend,
    WorkflowDefinition,
    WorkflowRegistry,
)
from ..definition.shape import first_difference
from ..errors import InvalidInput, RunNotFound
from ..step_paths import describe_path
from ..step_requests import task_key
from ..store import RunKey, RunQuery, RunSummary, Store
from ..stream import (
    RUN_STREAM,
    Fact,
    FlowHeld,
    OperatorAction,
    Path,
    RunMigrated,
    RunState,
    StepWaitingForCallback,
    StepWaitingForCondition,
    Suspension,
    TaskScheduled,
    TasksScheduled,
)
from .operator_actions import Operator
from .passes import load_run_for_pass
from .pinning import ensure_registered, shape
from .run_lookup import check_workflow
from .step_kinds import describe_suspension, refusal, step_at_place
from .step_mapping import StepMapping

MoveOutcome = Literal["would-move", "moved", "refused", "lost"]
OUTCOME_TEXT: dict[str, str] = {
    "would-move": "would move",
    "moved": "moved",
    "refused": "refused",
    "lost": "lost",
}
_MAX_ATTEMPTS = 10
_PAGE = 500


@dataclass(frozen=True)
class MigrationRequest:
    """What to migrate: the waiting runs of `workflow` (of `tenant_id`, or every
    tenant's) to its registered version `to_version`, by `mapping`; `dry_run`: judge
    only, write nothing."""

    workflow: str
    to_version: int
    tenant_id: str | None = None
    mapping: StepMapping = field(default_factory=StepMapping)
    dry_run: bool = False


@dataclass(frozen=True)
class RunMove:
    """One run's migration: where it waits (`waiting`, `from_path` on `from_version`),
    where it goes (`to_path`), and what happened: `would-move` (a dry run's verdict),
    `moved`, `refused` (`why`), or `lost` (it moved on first: `why`). `difference`: the
    first structural difference of its own definition against the target where it
    stands (None: none; its definition's shape unknown says so)."""

    tenant_id: str
    run_id: str
    from_version: int | None
    from_fingerprint: str
    suspension_version: int
    waiting: str
    from_path: Path
    to_path: Path
    outcome: MoveOutcome
    why: str | None = None
    difference: str | None = None


@dataclass(frozen=True)
class MigrationReport:
    """What a migration did (or, dry, would do) to each selected run, and how many
    waiting runs were on the target already (not selected)."""

    workflow: str
    to_version: int
    to_fingerprint: str
    dry_run: bool
    moves: list[RunMove]
    already_there: int = 0

    def with_outcome(self, *outcomes: MoveOutcome) -> list[RunMove]:
        return [m for m in self.moves if m.outcome in outcomes]

    @property
    def complete(self) -> bool:
        """Every selected run moved (or, dry, would move)."""
        return all(m.outcome in ("would-move", "moved") for m in self.moves)

    def summary(self) -> str:
        """One line: how many runs moved (would move), were refused, lost, or were there."""
        counts = Counter[str](m.outcome for m in self.moves)
        parts = [f"{counts[o]} {text}" for o, text in OUTCOME_TEXT.items() if counts[o]]
        parts.append(f"{self.already_there} already on v{self.to_version}")
        return f"{self.workflow} → v{self.to_version}: " + ", ".join(parts)

    def differences(self) -> list[tuple[str, int, str]]:
        """What else differs from the target where the runs wait, once per place:
        (the runs' version and place, how many, the first structural difference)."""
        found = Counter[tuple[str, str]](
            (f"v{m.from_version} {describe_path(m.from_path)}", m.difference)
            for m in self.moves
            if m.difference
        )
        return [(where, count, text) for (where, text), count in found.items()]


def target_definition(registry: WorkflowRegistry, name: str, version: int) -> WorkflowDefinition:
    """The registered version `version` of workflow `name`.

    Raises:
        InvalidInput: no such workflow (with the closest names) or version (with the
            registered ones).
    """
    check_workflow(name, registry.names(), "registered")
    versions = {d.version: d for d in registry if d.name == name}
    if version not in versions:
        listed = ", ".join(f"v{v}" for v in sorted(versions))
        raise InvalidInput(f"{name} has no version {version} registered (registered: {listed})")
    return versions[version]


def migrate_runs(
    store: Store,
    registry: WorkflowRegistry,
    request: MigrationRequest,
    now: datetime,
    operator: Operator,
) -> MigrationReport:
    """Move the waiting runs `request` selects onto version `request.to_version`.

    Each run is judged, then (unless a dry run) moved in a transaction of its own; see
    the module's docstring for what is checked, recorded and moved.

    Args:
        store: the database.
        registry: the registered definitions (the target must be one of them).
        request: which runs, to which version, by which mapping; dry or not.
        now: business time (recorded on the streams).
        operator: who asks, and why (recorded with every move).

    Returns:
        The report: one RunMove per selected run, by tenant and run id.

    Raises:
        InvalidInput: the workflow or version is not registered (nothing written).
    """
    target = target_definition(registry, request.workflow, request.to_version)
    summaries = _waiting_runs(store, request.workflow, request.tenant_id)
    selected = [r for r in summaries if r.definition_fingerprint != target.fingerprint]
    there = len(summaries) - len(selected)
    moves: list[RunMove] = []
    for summary in sorted(selected, key=lambda r: (r.tenant_id, r.run_id)):
        try:
            state = load_run_for_pass(store, summary.tenant_id, summary.run_id, tail=True).state
        except RunNotFound:
            continue  # purged or erased since it was listed
        if state.fingerprint == target.fingerprint:
            there += 1  # moved there since it was listed
            continue
        judged = judge(store, state, summary.workflow_version, target, request.mapping)
        if not request.dry_run and judged.outcome == "would-move":
            moved = _move(store, judged, target, request.mapping, operator, now)
            if moved is None:
                there += 1  # another migration moved it there first
                continue
            judged = moved
        moves.append(judged)
    return MigrationReport(
        workflow=target.name,
        to_version=target.version,
        to_fingerprint=target.fingerprint,
        dry_run=request.dry_run,
        moves=moves,
        already_there=there,
    )


def _waiting_runs(store: Store, workflow: str, tenant_id: str | None) -> list[RunSummary]:
    """Every waiting run of the workflow, read before any is moved (a move changes the
    order the pages are read in)."""
    query = RunQuery(statuses=["waiting"], workflow_name=workflow, tenant_id=tenant_id)
    found: list[RunSummary] = []
    while True:
        last = found[-1] if found else None
        after = RunKey(last.updated_at, last.tenant_id, last.run_id) if last else None
        page = store.console.runs(query, after, _PAGE)
        found += page
        if len(page) < _PAGE:
            return found


def judge(
    store: Store,
    state: RunState,
    from_version: int | None,
    target: WorkflowDefinition,
    mapping: StepMapping,
) -> RunMove:
    """Whether a run, as folded, moves onto `target` and where (`would-move`), or not
    and why (`refused`; `lost` when it no longer waits)."""
    suspension = state.suspension
    own = suspension.entry_path if suspension is not None else []
    stored = store.definitions.get(state.workflow_name, state.fingerprint)
    if isinstance(suspension, FlowHeld):  # flow control holds it before its first step
        return RunMove(
            tenant_id=state.tenant_id,
            run_id=state.run_id,
            from_version=from_version
            if from_version is not None
            else getattr(stored, "version", None),
            from_fingerprint=state.fingerprint,
            suspension_version=state.suspension_version,
            waiting=f"held by {suspension.reason} before its first step",
            from_path=own,
            to_path=own,
            outcome="refused",
            why=f"it is held by flow control ({suspension.limit}) and has run no step yet",
        )
    move = RunMove(
        tenant_id=state.tenant_id,
        run_id=state.run_id,
        from_version=from_version if from_version is not None else getattr(stored, "version", None),
        from_fingerprint=state.fingerprint,
        suspension_version=state.suspension_version,
        waiting=describe_suspension(suspension) if suspension is not None else state.status,
        from_path=own,
        to_path=mapping.target(own),
        outcome="would-move",
    )
    if state.status != "waiting" or suspension is None:
        return replace(move, outcome="lost", why=f"it is {state.status} now, not waiting")
    difference = (
        first_difference(stored.shape, shape(target), own)
        if stored is not None
        else "unknown: the shape of its definition was never recorded"
    )
    why = refusal(target, suspension, move.to_path)
    outcome: MoveOutcome = "refused" if why is not None else "would-move"
    return replace(move, outcome=outcome, why=why, difference=difference)


class _Retry(Exception):
    """The append lost its version: roll back what the attempt wrote and look again."""


def _move(
    store: Store,
    planned: RunMove,
    target: WorkflowDefinition,
    mapping: StepMapping,
    operator: Operator,
    now: datetime,
) -> RunMove | None:
    """Move one judged run, in one transaction (see the module's docstring); None: it
    is on the target already (another migration moved it there first)."""
    tenant_id, run_id = planned.tenant_id, planned.run_id
    for _ in range(_MAX_ATTEMPTS):
        try:
            with store.transaction():
                state = load_run_for_pass(store, tenant_id, run_id, tail=True).state
                if state.fingerprint == target.fingerprint:
                    return None
                if state.suspension_version != planned.suspension_version:
                    return replace(
                        planned,
                        outcome="lost",
                        why=f"it moved on before the migration got to it (it is {state.status})",
                    )
                judged = judge(store, state, planned.from_version, target, mapping)
                suspension = state.suspension
                if (
                    judged.outcome != "would-move"
                    or suspension is None
                    or isinstance(suspension, FlowHeld)
                ):
                    return judged
                return _record(store, state, suspension, judged, target, operator, now)
        except _Retry:
            continue
    return replace(planned, outcome="lost", why="it kept changing; the migration got no turn")


def _record(
    store: Store,
    state: RunState,
    suspension: Suspension | StepWaitingForCallback | StepWaitingForCondition,
    move: RunMove,
    target: WorkflowDefinition,
    operator: Operator,
    now: datetime,
) -> RunMove:
    tenant_id, run_id = state.tenant_id, state.run_id
    to_step = int(move.to_path[0]["i"])
    facts: list[Fact] = [
        OperatorAction(
            action="migrate",
            by=operator.by,
            reason=operator.reason,
            step_index=suspension.step_index,
        ),
        RunMigrated(
            suspension_version=state.suspension_version,
            from_fingerprint=state.fingerprint,
            to_fingerprint=target.fingerprint,
            to_version=target.version,
            from_step_index=suspension.step_index,
            to_step_index=to_step,
            from_path=list(suspension.path),
            to_path=move.to_path,
        ),
    ]
    if not store.streams.append(tenant_id, run_id, RUN_STREAM, state.version, facts, now):
        raise _Retry
    # The callback rows after the stream, in the order an answer takes them (it appends
    # its fact, then marks the row): an answer racing the migration waits at the stream
    # and retries on the migrated run, or wins it and the migration retries.
    if isinstance(suspension, StepWaitingForCallback):
        store.callbacks.move(tenant_id, run_id, state.suspension_version, to_step, move.to_path)
    store.tasks.move(
        tenant_id, run_id, _task_paths(suspension, target, move.to_path), target.fingerprint
    )
    store.runs.move(tenant_id, run_id, target.fingerprint, target.version, now)
    ensure_registered(store, target, now)
    return replace(move, outcome="moved")


def _task_paths(
    suspension: Suspension | StepWaitingForCallback | StepWaitingForCondition,
    target: WorkflowDefinition,
    to: Path,
) -> list[tuple[str, Path]]:
    """Where each task of the suspension runs its step on the target."""
    if isinstance(suspension, TaskScheduled):
        return [(suspension.task_id, to)]
    if not isinstance(suspension, TasksScheduled):
        return []
    parallel = step_at_place(target.steps, to)
    assert isinstance(parallel, Parallel)
    index = {
        task_key(sub): j
        for j, sub in enumerate(parallel.steps)
        if isinstance(sub, (Task, MailSend, WebhookSend))
    }
    return [(t.task_id, [*to, {"i": index[t.task_key]}]) for t in suspension.tasks]
