"""Which definition a waiting run resumes on (invariant 7), in three tiers.

1. exact: its own, when the code still has it (the fingerprint it recorded);
2. shape: unless it started on a definition pinned exactly, the registered definition
   of its workflow whose shape agrees with the one it started on where the run has been
   and where it stands (definition/shape.py) — the same version first, then the highest;
3. kept: its own definition where it still runs (definition/hosts.py) — in AWS an older
   version of ResumeRun / StepDispatcher that registered it, which the work is handed
   to; locally the definitions an environment had before a redeploy.

Else none: it fails loud with `workflow_definition_changed`, the first structural
difference by its step path in the failure's detail (and, when the kept version it was
handed to is gone, that too).

Every definition that starts or moves a run is registered with its shape
(workflow_definitions), in that pass's transaction, so the code that meets the run
later can compare shapes even when the definition is gone from it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Literal

from ..definition import WorkflowDefinition, WorkflowRegistry
from ..definition.hosts import REGISTERED_HOSTS, RESUME_RUN, STEP_DISPATCHER, DefinitionHosts, Role
from ..definition.shape import Shape, first_difference, shape_hash, shape_of
from ..step_paths import describe_path
from ..store import NewDefinition, PinnedRunGroup, Store, StoredDefinition
from ..stream import (
    RETRY_SCHEDULED,
    STEP_WAITING,
    STEP_WAITING_FOR_CALLBACK,
    STEP_WAITING_FOR_CONDITION,
    STEP_WAITING_FOR_EVENT,
    TASK_SCHEDULED,
    Path,
    RunMigrated,
    RunRedriven,
    RunStarted,
)

# Registrations by (workflow, fingerprint, pinning): a fingerprint names one definition
# for good, but its pinning is not part of it (the latest registration's applies).
_SHAPES: dict[tuple[str, str, str], NewDefinition] = {}


def registration(definition: WorkflowDefinition) -> NewDefinition:
    """The row that registers `definition` (its shape computed once per process)."""
    key = (definition.name, definition.fingerprint, definition.pinning)
    found = _SHAPES.get(key)
    if found is None:
        shape = shape_of(definition)
        found = NewDefinition(
            workflow_name=definition.name,
            fingerprint=definition.fingerprint,
            version=definition.version,
            shape=shape,
            shape_hash=shape_hash(shape),
            pinning=definition.pinning,
        )
        _SHAPES[key] = found
    return found


def register(store: Store, definitions: Sequence[WorkflowDefinition], now: datetime) -> None:
    """Register definitions with their shapes (a deploy: every one of its code's)."""
    store.definitions.register([registration(d) for d in definitions], now, again=True)


def ensure_registered(store: Store, definition: WorkflowDefinition, now: datetime) -> None:
    """Register the definition a pass runs on, unless this connection did already (a
    set lookup: every pass calls it)."""
    if not store.definitions.knows(definition.name, definition.fingerprint, definition.pinning):
        store.definitions.register([registration(definition)], now)


@dataclass(frozen=True)
class Serving:
    """What serves a waiting run: `definition` (None: nothing here), `how` it was found,
    `host`: for `kept`, the kept code that has it (with `definition` None, the work is
    handed to it), and `detail`: for `none`, why, with the first structural difference."""

    definition: WorkflowDefinition | None
    how: Literal["exact", "shape", "kept", "none"]
    detail: str = ""
    host: str | None = None


def stored_definition(store: Store, name: str, fingerprint: str) -> StoredDefinition | None:
    """The registered definition a run started on."""
    return store.definitions.get(name, fingerprint)


def serving_definition(
    store: Store,
    registry: WorkflowRegistry,
    name: str,
    fingerprint: str,
    path: Path,
    hosts: DefinitionHosts | None = REGISTERED_HOSTS,
    role: Role = RESUME_RUN,
    gone: str | None = None,
) -> Serving:
    """Which definition a run of `name` on `fingerprint`, suspended at `path`, resumes
    on (see the module's docstring).

    Args:
        hosts: where kept code is found (None: no kept tier, e.g. for a version the work
            was handed to: it never hands it on).
        role: the function whose kept code is asked for (passes or tasks).
        gone: a kept version found gone, named in the detail when nothing else serves.
    """
    exact = registry.find(name, fingerprint)
    if exact is not None:
        return Serving(exact, "exact")
    by_shape = _by_shape(store, registry, name, fingerprint, path)
    if by_shape.definition is not None:
        return by_shape
    kept = hosts.kept(store, name, fingerprint, role) if hosts is not None else None
    if kept is not None:
        return Serving(kept.definition, "kept", host=kept.host)
    if gone is not None:
        return replace(by_shape, detail=f"{by_shape.detail}; its kept version {gone} is gone")
    return by_shape


def _by_shape(
    store: Store, registry: WorkflowRegistry, name: str, fingerprint: str, path: Path
) -> Serving:
    """The second tier: a registered definition whose shape agrees, or why none."""
    candidates = sorted(
        (d for d in registry if d.name == name), key=lambda d: d.version, reverse=True
    )
    if not candidates:
        return Serving(None, "none", f"no version of workflow {name!r} is registered")
    started = stored_definition(store, name, fingerprint)
    if started is None:
        return Serving(
            None,
            "none",
            "the definition it started on is not registered and its shape was never "
            "recorded (it started before this release recorded shapes, and that "
            "definition was gone when it upgraded)",
        )
    if started.pinning == "exact":
        return Serving(None, "none", "it is pinned exactly (pinning='exact')")
    candidates.sort(key=lambda d: d.version != started.version)  # its own version first
    differences = []
    for candidate in candidates:
        difference = first_difference(started.shape, shape(candidate), path)
        if difference is None:
            return Serving(candidate, "shape")
        differences.append(f"v{candidate.version}: {difference}")
    return Serving(None, "none", differences[0])


def shape(definition: WorkflowDefinition) -> Shape:
    """A registered definition's shape (computed once per process)."""
    return registration(definition).shape


# --- judging the waiting runs against a registry (wfr doctor, redeploy, the deploy) --


_WAIT_KINDS = {
    STEP_WAITING: "wait",
    STEP_WAITING_FOR_EVENT: "wait_for_event",
    RETRY_SCHEDULED: "retry",
    TASK_SCHEDULED: "task",
    STEP_WAITING_FOR_CALLBACK: "wait_for_callback",
    STEP_WAITING_FOR_CONDITION: "wait_for_condition",
}


@dataclass(frozen=True)
class PinnedDefinition:
    """Suspended runs of one workflow pinned to one definition, judged against a registry
    (the code about to be deployed, say).

    `version` is the workflow version the example run started (or was redriven) on;
    `resumes_on` the version that serves all of them (None: some fail with
    workflow_definition_changed when they resume; their own version when kept code
    serves them); `exact`, `by_shape`, `kept` and `failing` count its runs that resume
    on their own definition, on another whose shape agrees (definition/shape.py), stay on
    a kept version that has their own (definition/hosts.py), or fail — `kept_on` names that
    kept code (ResumeRun's version, then StepDispatcher's for their tasks) and
    `differences`, by the place they wait at, the first structural difference that
    fails them; `verdict` says it in words.
    """

    workflow_name: str
    fingerprint: str
    version: int | None
    runs: int
    tenants: int
    steps: dict[str, int]
    example_tenant_id: str
    example_run_id: str
    resumes_on: int | None
    verdict: str
    exact: int = 0
    by_shape: int = 0
    failing: int = 0
    differences: dict[str, str] = field(default_factory=dict)
    kept: int = 0
    kept_on: tuple[str, ...] = ()

    @property
    def fails(self) -> bool:
        return self.failing > 0

    def describe(self) -> str:
        """One line: what, how many, where they wait, an example."""
        version = f" v{self.version}" if self.version is not None else ""
        where = ", ".join(f"{place} ×{count}" for place, count in self.steps.items())
        return (
            f"{self.runs} run(s) of {self.workflow_name}{version} (definition "
            f"{self.fingerprint[:12]}…, {self.tenants} tenant(s)) {self.verdict}; waiting at "
            f"{where}; e.g. run {self.example_run_id} of tenant {self.example_tenant_id}"
        )


def _started_version(store: Store, tenant_id: str, run_id: str, fingerprint: str) -> int | None:
    """The workflow version a run was started (or last redriven or migrated) on, from its
    stream."""
    version: int | None = None
    for event in store.streams.load(tenant_id, run_id):
        fact = event.fact
        if isinstance(fact, RunStarted):
            version = fact.workflow_version
        elif isinstance(fact, RunRedriven) and fact.definition_fingerprint == fingerprint:
            version = fact.definition_version or version
        elif isinstance(fact, RunMigrated) and fact.to_fingerprint == fingerprint:
            version = fact.to_version
    return version


def _place(group: PinnedRunGroup) -> str:
    kind = _WAIT_KINDS.get(group.suspension_event_type, "wait")
    nested = len(group.path) > 1
    return f"step {group.step_index} ({kind})" + (
        f" at {describe_path(group.path)}" if nested else ""
    )


def _verdict(
    registry: WorkflowRegistry,
    name: str,
    version: int | None,
    served: list[tuple[PinnedRunGroup, Serving]],
) -> tuple[int | None, str]:
    """Which version serves every run (None: some fail), and why, in words."""
    moved = [s for _, s in served if s.how in ("exact", "shape")]
    versions = {s.definition.version for s in moved if s.definition is not None}
    hosts = sorted({s.host for _, s in served if s.how == "kept" and s.host})
    failing = [(g, s) for g, s in served if s.how == "none"]
    if not failing:
        kept = f"stay on kept version {', '.join(hosts)}" if hosts else ""
        if not versions:
            return version, kept
        serving = max(versions)
        how = {s.how for s in moved}
        resume = (
            f"resume on registered v{serving}"
            if how == {"exact"}
            else f"resume on v{serving} (its shape agrees where they wait)"
        )
        return serving, f"{resume}, the others {kept}" if kept else resume
    registered = sorted(wf.version for wf in registry if wf.name == name)
    if not registered:
        return None, f"will fail: no version of {name} is registered"
    listed = ", ".join(f"v{v}" for v in registered)
    why = (
        f"v{version} is registered with another definition (edited in place; "
        if version in registered
        else "their version is no longer registered ("
    )
    return None, f"will fail: {why}registered: {listed}); {failing[0][1].detail}"


def pinned_definitions(
    store: Store,
    registry: WorkflowRegistry,
    tenant: str | None = None,
    hosts: DefinitionHosts | None = REGISTERED_HOSTS,
) -> list[PinnedDefinition]:
    """Every definition suspended runs are pinned to, and whether `registry` (the code
    about to be deployed, say) resumes them: on that definition, on one whose shape
    agrees where they wait, on kept code that still has it, or not at all (invariant 7).

    Args:
        store: the database whose runs to judge.
        registry: the definitions the functions would load.
        tenant: only this tenant's runs (default: every tenant).
        hosts: where kept code is found (default: the function versions registered in
            the database; None: nothing is kept).

    Returns:
        One entry per (workflow, fingerprint), by workflow name; runs whose suspension the
        pending projection has not applied yet are not counted.
    """
    grouped: dict[tuple[str, str], list[PinnedRunGroup]] = {}
    for group in store.operator.pinned_run_groups(tenant):
        grouped.setdefault((group.workflow_name, group.definition_fingerprint), []).append(group)
    pinned = []
    for (name, fingerprint), groups in grouped.items():
        example = min(groups, key=lambda g: (g.example_tenant_id, g.example_run_id))
        version = _started_version(
            store, example.example_tenant_id, example.example_run_id, fingerprint
        )
        served = [
            (g, serving_definition(store, registry, name, fingerprint, g.path, hosts))
            for g in groups
        ]
        resumes_on, verdict = _verdict(registry, name, version, served)
        steps: dict[str, int] = {}
        for g in groups:
            steps[_place(g)] = steps.get(_place(g), 0) + g.runs
        pinned.append(
            PinnedDefinition(
                workflow_name=name,
                fingerprint=fingerprint,
                version=version,
                runs=sum(g.runs for g in groups),
                tenants=groups[0].tenants,
                steps=steps,
                example_tenant_id=example.example_tenant_id,
                example_run_id=example.example_run_id,
                resumes_on=resumes_on,
                verdict=verdict,
                exact=sum(g.runs for g, s in served if s.how == "exact"),
                by_shape=sum(g.runs for g, s in served if s.how == "shape"),
                failing=sum(g.runs for g, s in served if s.how == "none"),
                differences={_place(g): s.detail for g, s in served if s.how == "none"},
                kept=sum(g.runs for g, s in served if s.how == "kept"),
                kept_on=_kept_on(store, hosts, name, fingerprint, served),
            )
        )
    return pinned


def _kept_on(
    store: Store,
    hosts: DefinitionHosts | None,
    name: str,
    fingerprint: str,
    served: list[tuple[PinnedRunGroup, Serving]],
) -> tuple[str, ...]:
    """The kept code runs of a definition stay on: its passes' host, then its tasks'."""
    found = [s.host for _, s in served if s.how == "kept" and s.host]
    if not found or hosts is None:
        return ()
    tasks = hosts.kept(store, name, fingerprint, STEP_DISPATCHER)
    return tuple(dict.fromkeys([found[0]] + ([tasks.host] if tasks is not None else [])))


@dataclass(frozen=True)
class StrandedRuns:
    """What a deploy of `registry` does to the waiting runs (the deploy's check)."""

    waiting: int
    exact: int
    by_shape: int
    kept: int
    failing: int
    # One line per definition whose runs would fail: the workflow, how many, and the
    # first structural difference where they wait.
    failures: list[str]

    def summary(self) -> str:
        return (
            f"{self.waiting} waiting run(s): {self.exact} resume on their own definition, "
            f"{self.by_shape} on one whose shape agrees, {self.kept} stay on a kept "
            f"version, {self.failing} would fail"
        )


def stranded_runs(
    store: Store, registry: WorkflowRegistry, hosts: DefinitionHosts | None = REGISTERED_HOSTS
) -> StrandedRuns:
    """Judge every waiting run against `registry` (the code being deployed), as `wfr
    doctor` does; the Migrate custom resource fails the deploy on it when told to. Runs
    that stay on a kept version (the versions the deploy leaves in place) do not fail."""
    pinned = pinned_definitions(store, registry, hosts=hosts)
    failures = [
        f"{p.workflow_name} v{p.version}: {p.failing} run(s) would fail; "
        + "; ".join(f"at {place}: {why}" for place, why in p.differences.items())
        for p in pinned
        if p.fails
    ]
    return StrandedRuns(
        waiting=sum(p.runs for p in pinned),
        exact=sum(p.exact for p in pinned),
        by_shape=sum(p.by_shape for p in pinned),
        kept=sum(p.kept for p in pinned),
        failing=sum(p.failing for p in pinned),
        failures=failures,
    )
