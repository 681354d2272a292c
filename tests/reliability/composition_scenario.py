"""The composition scenario the crash-point test replays: parents that call and map
child runs, children shared by two parents, a call attached to a run an event started,
a start_workflow child another parent calls, a map with concurrency whose one failing
item fails its parent (no catch), cancels of two parents and a redrive of the failed
one; one day of business time, tenant A.

What happens, fault-free (every gap is wider than a crash's delay: a resume batch
that crashed comes back after the queue's three-minute visibility timeout):

- 09:00 P1 maps parts a b f g (keyed, concurrency 2: f starts when a ends; b takes an
  hour, f two). The event `solo.go` starts solo k1 (an hour). L1 starts part
  `launched` (an hour) with start_workflow and waits two hours. B1 maps four unkeyed
  parts (concurrency 2): item 1 fails at 09:20 (its dependency is down until 11:00),
  so B1 fails and its end cancels item 2 (running); item 3 never starts.
- 09:20 P2 maps parts b (attached: P1's, running) and d. A1 calls solo k1 (attached to
  the run the event started). C1 calls part `launched` (attached to L1's child). Q1
  calls `quick`, a child that ends in its first pass.
- 09:40 the operator cancels P1 (b keeps running for P2, f is cancelled, g never
  starts) and A1 (solo k1 keeps running: an event started it).
- 12:00 the operator redrives B1: item 1 is redriven, item 2 goes on from where it was
  cancelled, item 3 starts; B1 completes.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from workflow_runner import Event, Steps, define_workflow, on_call, on_event, run_id_for
from workflow_runner.clock import ManualClock
from workflow_runner.definition import WorkflowRegistry
from workflow_runner.definition.dsl import StepContext, WorkflowDefinition
from workflow_runner.engine import children as children_module
from workflow_runner.engine import resume_batch as resume_batch_module
from workflow_runner.engine import worker as worker_module
from workflow_runner.engine.operator_actions import (
    Operator,
    cancel_as_operator,
    redrive_as_operator,
)
from workflow_runner.engine.projection import PENDING_PROJECTION
from workflow_runner.store import Store

from tests.reliability.harness import TENANT_A, Driver, FaultPlan, eventbridge

START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
END = START + timedelta(days=1)
FIXED_AT = START + timedelta(hours=2)  # B1's failing item works from then on
OPERATOR = Operator("reliability suite", "composition scenario")


class FlakyDependency(Exception):
    """The service a child depends on is down (until its `failUntil`)."""


def _check(ctx: StepContext) -> bool:
    until = ctx.event.payload.get("failUntil")
    if until is not None and ctx.now < datetime.fromisoformat(until):
        raise FlakyDependency("the stock service is down")
    return True


def _caller(name: str, child: str) -> WorkflowDefinition:
    return define_workflow(
        name=name,
        trigger=on_event(f"{name}.go"),
        idempotency_key=Event.payload["id"],
        steps=lambda s: [
            s.call_workflow(
                child, input=Event.payload["input"], key=Event.payload["key"], result_key="c"
            ),
            s.return_({"isSuccess": True, "c": Steps["c"]}),
        ],
        register=False,
    )


def _mapper(name: str, keyed: bool) -> WorkflowDefinition:
    return define_workflow(
        name=name,
        trigger=on_event(f"{name}.go"),
        idempotency_key=Event.payload["id"],
        steps=lambda s: [
            s.map(
                Event.payload["items"],
                workflow="part",
                concurrency=2,
                key=(lambda ctx: ctx.scope["item"]["key"]) if keyed else None,
                result_key="parts",
            ),
            s.return_({"isSuccess": True, "parts": Steps["parts"]}),
        ],
        register=False,
    )


def workflows() -> list[WorkflowDefinition]:
    """The scenario's workflows (the load test drives them too)."""
    part = define_workflow(
        name="part",
        trigger=on_call(),
        steps=lambda s: [
            s.wait(for_=lambda ctx: ctx.event.payload.get("wait", "PT1M")),
            s.compute("check", _check),
            s.return_(lambda ctx: {"n": ctx.event.payload["n"] * 2}),
        ],
        register=False,
    )
    quick = define_workflow(
        name="quick",
        trigger=on_call(),
        steps=lambda s: [s.return_(lambda ctx: {"n": ctx.event.payload["n"]})],
        register=False,
    )
    solo = define_workflow(
        name="solo",
        trigger=on_event("solo.go"),
        idempotency_key=Event.payload["id"],
        steps=lambda s: [s.wait(for_="PT1H"), s.return_({"solo": Event.payload["id"]})],
        register=False,
    )
    launch = define_workflow(
        name="launch",
        trigger=on_event("launch.go"),
        idempotency_key=Event.payload["id"],
        steps=lambda s: [
            s.start_workflow("part", input=Event.payload["input"], key=Event.payload["key"]),
            s.wait(for_="PT2H"),
            s.return_({"isSuccess": True}),
        ],
        register=False,
    )
    return [
        part,
        quick,
        solo,
        launch,
        _mapper("assemble", keyed=True),
        _mapper("batch", keyed=False),
        _caller("call-part", "part"),
        _caller("call-solo", "solo"),
        _caller("call-quick", "quick"),
    ]


def registry() -> WorkflowRegistry:
    reg = WorkflowRegistry()
    for definition in workflows():
        reg.register(definition)
    return reg


def go(workflow: str, offset: timedelta = timedelta(0), **payload: Any) -> dict[str, Any]:
    """The EventBridge event that starts a run of `workflow` (tenant A)."""
    return eventbridge(
        f"{workflow}.go",
        {"tenantId": TENANT_A, **payload},
        event_id=f"ev-{workflow}-{payload['id']}",
        when=START + offset,
    )


def item(key: str, n: int, wait: str = "PT1M") -> dict[str, Any]:
    return {"key": key, "n": n, "wait": wait}


P1, P2 = run_id_for("assemble", "p1"), run_id_for("assemble", "p2")
A1, B1 = run_id_for("call-solo", "a1"), run_id_for("batch", "b1")
SHARED_PART = run_id_for("part", "m-b")
SOLO = run_id_for("solo", "k1")
LAUNCHED = run_id_for("part", "launched")


def inputs() -> list[tuple[timedelta, str, dict[str, Any]]]:
    """(offset from START, target, input) in delivery order; target "operator" is an
    operator's `wfr cancel` / `wfr redrive`."""
    zero, twenty = timedelta(0), timedelta(minutes=20)
    p1_items = [
        item("m-a", 1),
        item("m-b", 2, "PT1H"),
        item("m-f", 6, "PT2H"),
        item("m-g", 7),
    ]
    b1_items = [
        {"n": 1},
        {"n": 2, "wait": "PT20M", "failUntil": FIXED_AT.isoformat()},
        {"n": 3, "wait": "PT2H"},
        {"n": 4},
    ]
    launched = {"n": 9, "wait": "PT1H"}
    return [
        (zero, "trigger_projection", go("assemble", id="p1", items=p1_items)),
        (zero, "trigger_projection", go("solo", id="k1")),
        (zero, "trigger_projection", go("launch", id="l1", key="launched", input=launched)),
        (zero, "trigger_projection", go("batch", id="b1", items=b1_items)),
        (
            twenty,
            "trigger_projection",
            go("assemble", twenty, id="p2", items=[item("m-b", 2, "PT1H"), item("m-d", 4)]),
        ),
        (twenty, "trigger_projection", go("call-solo", twenty, id="a1", key="k1", input={})),
        (
            twenty,
            "trigger_projection",
            go("call-part", twenty, id="c1", key="launched", input=launched),
        ),
        (twenty, "trigger_projection", go("call-quick", twenty, id="q1", key="q1", input={"n": 3})),
        (timedelta(minutes=40), "operator", {"action": "cancel", "runId": P1}),
        (timedelta(minutes=40), "operator", {"action": "cancel", "runId": A1}),
        (timedelta(hours=3), "operator", {"action": "redrive", "runId": B1}),
    ]


# --- the driver ----------------------------------------------------------------------------


class CompositionDriver(Driver):
    """The reliability Driver plus the operator (cancel and redrive, retried after a crash
    as a person repeats a command that failed) and a worker that runs as soon as it has
    children to start or count (StepDispatcher is nudged after every pass; its schedule
    is the safety net), so a crash delays the worker by one tick, not to the next timer."""

    def invoke(self, name: str, event: Any) -> Any:
        if name != "operator":
            return super().invoke(name, event)
        self.stats.invocations[name] += 1
        store, now = self.store(), self.clock.now()
        if event["action"] == "cancel":
            return cancel_as_operator(store, TENANT_A, event["runId"], now, OPERATOR)
        return redrive_as_operator(store, TENANT_A, event["runId"], now, OPERATOR, self.registry)

    def next_instant(self) -> datetime | None:
        row = self.monitor.conn.execute(
            "SELECT least((SELECT min(start_due_at) FROM run_joins),"
            "             (SELECT min(settled_at) FROM run_children WHERE NOT counted)) AS at,"
            " EXISTS (SELECT 1 FROM wf_events WHERE position > coalesce("
            "   (SELECT last_position FROM projection_checkpoints WHERE name = %s), 0))"
            " AS behind",
            (PENDING_PROJECTION,),
        ).fetchone()
        assert row is not None
        now = self.clock.now()
        candidates = [t for t in (super().next_instant(), row["at"]) if t is not None]
        if row["behind"]:
            candidates.append(now)  # a parent told by the worker: the projection's nudge
        return min(candidates) if candidates else None


def play(
    db_url: str,
    plan: FaultPlan | None = None,
    seed: int | None = None,
) -> CompositionDriver:
    """Replay the scenario to END and let the schedules settle everything."""
    clock = ManualClock(START)
    driver = CompositionDriver(db_url, registry(), clock, plan)
    rng = random.Random(seed) if seed is not None else None
    by_offset: dict[timedelta, list[tuple[str, dict[str, Any]]]] = {}
    for offset, target, event in inputs():
        by_offset.setdefault(offset, []).append((target, event))
    for offset in sorted(by_offset):
        driver.run_until(START + offset, rng)
        for target, event in by_offset[offset]:
            driver.send(target, event)
        driver.tick(rng)
    driver.run_until(END, rng)
    driver.recover()
    return driver


# --- which operation each boundary belongs to --------------------------------------------

OPERATIONS = ("start", "attach", "revive", "settle", "end", "count", "cancel", "redrive")


@dataclass
class _Segment:
    operation: str
    first: int  # boundary numbers, as FaultPlan counts them (1-based, inclusive)
    last: int
    settled_runs: list[str] = field(default_factory=list)  # "pass" segments only


@dataclass
class OperationMap:
    """The composition operation each boundary of a fault-free play belongs to: the
    worker starting a join's children (`start`; `attach` when the transaction found a
    child another parent or an event had started; `revive` when it revived a redriven
    parent's child), the worker counting settled children (`count`), a child's settling
    pass (`settle`: ResumeRun's batch transaction in which a child completed or failed),
    a parent's last pass (`end`: its joins closed, children nobody else owns cancelled),
    the operator's cancel and redrive. Polls of the worker that found nothing are all
    alike: only the first of each kind is kept."""

    plan: FaultPlan
    segments: list[_Segment] = field(default_factory=list)
    _idle: set[str] = field(default_factory=set)

    def _add(self, operation: str, first: int, last: int, **extra: Any) -> None:
        if last < first:
            return
        if operation.endswith("-idle"):
            if operation in self._idle:
                return
            self._idle.add(operation)
            operation = operation.removesuffix("-idle")
        self.segments.append(_Segment(operation, first, last, **extra))

    def points(self, store: Store) -> dict[str, list[int]]:
        """Boundary numbers by operation, once the play is over (`store`: its database)."""
        children = {
            r["run"]
            for r in store.conn.execute(
                "SELECT child_run_id::text AS run FROM run_children"
            ).fetchall()
        }
        parents = {
            r["run"]
            for r in store.conn.execute(
                "SELECT parent_run_id::text AS run FROM run_joins WHERE kind <> 'start'"
            ).fetchall()
        }
        out: dict[str, list[int]] = {op: [] for op in OPERATIONS}
        for s in self.segments:
            operation = s.operation
            if operation == "pass":
                settled = set(s.settled_runs)
                if settled & children:
                    operation = "settle"
                elif settled & parents:
                    operation = "end"
                else:
                    continue
            out[operation] += range(s.first, s.last + 1)
        return out

    @contextmanager
    def recording(self) -> Iterator[None]:
        """Record the operations of the play run inside (the engine's own functions,
        wrapped where the worker and ResumeRun call them)."""
        plan = self.plan
        assert plan.keep_labels, "the boundaries' labels split the worker's transactions"
        count_real = worker_module.count_settled_children
        start_real = worker_module.start_children
        child_start_real = children_module._child_start
        attached_real = children_module.count_settled_runs
        resume_real = resume_batch_module.resume_runs
        outcomes: list[tuple[int, str]] = []  # (boundary count then, operation)

        def count(*args: Any, **kwargs: Any) -> int:
            first = plan.count + 1
            counted: int = count_real(*args, **kwargs)
            self._add("count" if counted else "count-idle", first, plan.count)
            return counted

        def child_start(registry: Any, join: Any, child: Any, *rest: Any) -> Any:
            if child.revive:
                outcomes.append((plan.count, "revive"))
            return child_start_real(registry, join, child, *rest)

        def count_attached(store: Any, tenant_id: str, run_ids: Any, *rest: Any) -> int:
            if run_ids:  # the batch's children whose runs existed
                outcomes.append((plan.count, "attach"))
            counted: int = attached_real(store, tenant_id, run_ids, *rest)
            return counted

        def start(*args: Any, **kwargs: Any) -> Any:
            first = plan.count + 1
            outcomes.clear()
            started = start_real(*args, **kwargs)
            claims = [
                n for n in range(first, plan.count + 1) if plan.labels[n - 1] == "sql:claim_joins"
            ]
            for i, begin in enumerate(claims):
                end = claims[i + 1] - 1 if i + 1 < len(claims) else plan.count
                if i >= started.joins:
                    self._add("start-idle", begin, end)
                    continue
                kinds = {op for at, op in outcomes if begin <= at <= end}
                operation = "revive" if "revive" in kinds else "attach" if kinds else "start"
                self._add(operation, begin, end)
            return started

        def resume_runs(*args: Any, **kwargs: Any) -> Any:
            first = plan.count + 1
            results = resume_real(*args, **kwargs)
            settled = [
                r.run_id
                for r in results
                if not isinstance(r, Exception) and r.outcome in ("completed", "failed")
            ]
            self._add("pass", first, plan.count, settled_runs=settled)
            return results

        def operate(driver: CompositionDriver, name: str, event: Any) -> Any:
            first = plan.count + 1
            try:
                return invoke_real(driver, name, event)
            finally:
                if name == "operator":
                    self._add(event["action"], first, plan.count)

        invoke_real = CompositionDriver.invoke
        patches: list[tuple[Any, str, Callable[..., Any]]] = [
            (worker_module, "count_settled_children", count),
            (worker_module, "start_children", start),
            (children_module, "_child_start", child_start),
            (children_module, "count_settled_runs", count_attached),
            (resume_batch_module, "resume_runs", resume_runs),
            (CompositionDriver, "invoke", operate),
        ]
        saved = [(target, name, getattr(target, name)) for target, name, _ in patches]
        for target, name, wrapper in patches:
            setattr(target, name, wrapper)
        try:
            yield
        finally:
            for target, name, real in saved:
                setattr(target, name, real)
