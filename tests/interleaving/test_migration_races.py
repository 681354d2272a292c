"""A migration (engine/run_migration.py) racing what else moves a waiting run, statement
by statement in every split order on real PostgreSQL (harness.py): a resume of the run,
the task worker recording the outcome of its task, a callback completing its wait, and
the wakeup matching its awaited event. After each schedule, and after everything left
to do has run:

- one writer wins each stream version: the migration is recorded at most once, the
  resume claims the suspension at most once, the outcome, completion or match is
  recorded exactly once;
- the run resumes exactly once, at the place the migration moved it to (on version 2)
  when the migration is recorded, at its old place (on version 1) when it is not, never
  at both; a migration that lost wrote nothing;
- nothing is lost: the task's result, the callback's payload and the event's payload
  reach the run's result;
- nobody deadlocks.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from workflow_runner import (
    DomainEvent,
    Event,
    Steps,
    WorkflowRegistry,
    define_workflow,
    on_event,
    run_id_for,
)
from workflow_runner.definition import WorkflowDefinition
from workflow_runner.engine.callbacks import complete_callback
from workflow_runner.engine.ingest import ingest_domain_event
from workflow_runner.engine.operator_actions import Operator
from workflow_runner.engine.passes import load_run
from workflow_runner.engine.projection import project_pending
from workflow_runner.engine.resume import resume_run
from workflow_runner.engine.run_migration import MigrationRequest, migrate_runs
from workflow_runner.engine.step_mapping import parse_mapping
from workflow_runner.engine.tasks import TaskPorts, run_task
from workflow_runner.engine.wakeup import wake_on_event
from workflow_runner.store import Store

from tests.interleaving.harness import Lab, Operation, Run, explore
from tests.support import TENANT_A

T0 = datetime(2030, 1, 1, 9, 0, tzinfo=UTC)
DUE = T0 + timedelta(minutes=2)  # the timer is due
OPS = Operator("tests (ada@host)", "a step was inserted before the wait")
KEY = "o-1"
RUN = run_id_for("order", KEY)
TOKEN: dict[str, str] = {}  # the callback token the run handed out in the prepared state


def _charge(ctx: Any) -> dict[str, Any]:
    return {"charged": ctx.event.payload["id"]}


def _token(ctx: Any) -> str:
    return str(ctx.callback.token)


# One step each version waits at; version 2 inserted a compute before it.
WAITS: dict[str, Callable[[Any], Any]] = {
    "timer": lambda s: s.wait(for_="PT1M"),
    "task": lambda s: s.task("got", _charge),
    "callback": lambda s: s.wait_for_callback("got", timeout="P1D"),
    "event": lambda s: s.wait_for_event("paid", timeout="P1D", result_key="got"),
}


def _order(version: int, wait: str) -> WorkflowDefinition:
    def steps(s: Any) -> list[Any]:
        inserted = [s.compute("plan", lambda ctx: "pro")] if version == 2 else []
        first = [s.compute("token", _token)] if wait == "callback" else []
        got = Steps["got"] if wait != "timer" else None
        return [*first, *inserted, WAITS[wait](s), s.return_({"v": version, "got": got})]

    return define_workflow(
        name="order",
        version=version,
        trigger=on_event("order.placed"),
        idempotency_key=Event.payload["id"],
        awaits={"paid": "order.paid"},
        steps=steps,
        register=False,
    )


def _registry(wait: str) -> WorkflowRegistry:
    registry = WorkflowRegistry()
    registry.register(_order(1, wait))
    registry.register(_order(2, wait))
    return registry


REGISTRIES = {wait: _registry(wait) for wait in WAITS}
# Where the run waits on v1, and where the migration moves it to on v2.
PLACES = {"timer": (0, 1), "task": (0, 1), "callback": (1, 2), "event": (0, 1)}


def _setup(wait: str) -> Callable[[Store], None]:
    def setup(store: Store) -> None:
        registry = WorkflowRegistry()
        registry.register(_order(1, wait))  # the run starts on v1
        started = DomainEvent(
            id="placed", type="order.placed", payload={"id": KEY}, tenant_id=TENANT_A, time=T0
        )
        ingest_domain_event(store, started, T0, registry)
        project_pending(store, T0)
        if wait == "callback":
            TOKEN["token"] = store.results.of_run(TENANT_A, RUN).values["token"]

    return setup


def _migrate(wait: str) -> Operation:
    old, new = PLACES[wait]
    request = MigrationRequest("order", 2, mapping=parse_mapping([f"{old}={new}"]))
    return lambda store: migrate_runs(store, REGISTRIES[wait], request, DUE, OPS)


def _ports(wait: str) -> TaskPorts:
    return TaskPorts(REGISTRIES[wait], mailer=None, http=None, guard=None)  # type: ignore[arg-type]


def _quiesce(store: Store, wait: str) -> None:
    """Run what is left, as the worker, projection and resume queue would."""
    registry = REGISTRIES[wait]
    for _ in range(5):
        project_pending(store, DUE)
        run_task(store, _ports(wait), lambda: DUE, lambda: 60.0)
        project_pending(store, DUE)
        state = load_run(store, TENANT_A, RUN)
        if state.suspension is None:
            return
        resume_run(store, TENANT_A, RUN, state.suspension.step_index, DUE, registry=registry)
    raise AssertionError("the run did not come to rest")


def _types(store: Store) -> list[str]:
    return [e.type for e in store.streams.load(TENANT_A, RUN)]


def _check(wait: str, got: Any, once: str | None) -> Callable[[Store, Run], None]:
    """The invariants of the module's docstring; `got`: what the run's result holds
    under "got" when it completes; `once`: the event type recorded exactly once."""

    def check(store: Store, run: Run) -> None:
        assert not run.errors, run.errors
        report = next(a.result for a in run.actors if a.name == "A")
        # Not selected at all: the run had ended before the migration listed it.
        outcome = report.moves[0].outcome if report.moves else "not selected"
        _quiesce(store, wait)
        events = store.streams.load(TENANT_A, RUN)
        types = [e.type for e in events]
        migrated = [e for e in events if e.type == "workflow.run-migrated"]
        actions = [e for e in events if e.payload.get("action") == "migrate"]
        assert len(migrated) == len(actions) == (1 if outcome == "moved" else 0), types
        assert outcome in ("moved", "lost", "not selected"), report
        [resumed] = [e for e in events if e.type == "workflow.step.resumed"]
        old, new = PLACES[wait]
        if migrated:
            assert migrated[0].version < resumed.version
            assert resumed.payload["stepIndex"] == new
        else:
            assert resumed.payload["stepIndex"] == old
        assert types[-1] == "workflow.run-completed", types
        result = events[-1].payload["result"]
        assert result == {"v": 2 if migrated else 1, "got": got}, result
        if once is not None:
            assert types.count(once) == 1, types

    return check


def test_a_migration_racing_a_resume_of_the_run_one_of_them_wins(lab: Lab) -> None:
    def resume(store: Store) -> Any:
        return resume_run(store, TENANT_A, RUN, 0, DUE, registry=REGISTRIES["timer"])

    outcomes: list[str] = []

    def check(store: Store, run: Run) -> None:
        report, resumed = run.actors[0].result, run.actors[1].result
        outcomes.append(report.moves[0].outcome if report.moves else "not selected")
        outcomes.append(f"resume {resumed.outcome}")
        _check("timer", None, None)(store, run)

    explore(lab, _setup("timer"), _migrate("timer"), resume, check)
    # Both won in some schedule: the migration (the resume then found the run moved, or
    # resumed it at its new place), and the resume (the migration lost, writing nothing).
    assert {"moved", "lost", "resume completed", "resume already-resumed"} <= set(outcomes)


def test_a_migration_racing_the_task_worker_keeps_the_outcome_and_moves_the_run(
    lab: Lab,
) -> None:
    def record_outcome(store: Store) -> Any:
        return run_task(store, _ports("task"), lambda: DUE, lambda: 60.0)

    def check(store: Store, run: Run) -> None:
        _check("task", {"charged": KEY}, "workflow.task.completed")(store, run)
        assert run.actors[0].result.moves[0].outcome == "moved"  # an outcome never beats it
        row = store.conn.execute("SELECT path, status FROM task_queue").fetchone()
        assert row is not None and (row["path"], row["status"]) == ([{"i": 1}], "completed")

    explore(lab, _setup("task"), _migrate("task"), record_outcome, check)


def test_a_migration_racing_a_callback_completion_neither_deadlocks_nor_loses_it(
    lab: Lab,
) -> None:
    def complete(store: Store) -> Any:
        return complete_callback(store, TOKEN["token"], {"approved": True}, DUE)

    def check(store: Store, run: Run) -> None:
        _check("callback", {"approved": True}, "workflow.callback.completed")(store, run)
        assert run.actors[0].result.moves[0].outcome == "moved"
        assert run.actors[1].result.step_index in PLACES["callback"]

    explore(lab, _setup("callback"), _migrate("callback"), complete, check)


def test_a_migration_racing_the_wakeup_of_its_event_loses_no_wakeup(lab: Lab) -> None:
    paid = DomainEvent(
        id="paid", type="order.paid", payload={"id": KEY}, tenant_id=TENANT_A, time=DUE
    )

    def wake(store: Store) -> Any:
        return wake_on_event(store, paid, DUE)

    def check(store: Store, run: Run) -> None:
        _check("event", {"id": KEY}, "workflow.step.event-matched")(store, run)
        assert run.actors[0].result.moves[0].outcome == "moved"

    explore(lab, _setup("event"), _migrate("event"), wake, check)


def test_two_migrations_to_the_same_version_move_the_run_once(lab: Lab) -> None:
    def check(store: Store, run: Run) -> None:
        assert not run.errors, run.errors
        reports = [a.result for a in run.actors]
        # One moved it; the other found it on v2 already, whenever it looked.
        assert sorted(len(r.moves) for r in reports) == [0, 1], reports
        [moved] = [m for r in reports for m in r.moves]
        assert moved.outcome == "moved"
        assert sorted(r.already_there for r in reports) == [0, 1], reports
        _quiesce(store, "timer")
        events = store.streams.load(TENANT_A, RUN)
        types = [e.type for e in events]
        assert types.count("workflow.run-migrated") == 1, types
        assert [e.payload.get("action") for e in events].count("migrate") == 1, types
        [resumed] = [e for e in events if e.type == "workflow.step.resumed"]
        assert resumed.payload["stepIndex"] == PLACES["timer"][1]
        assert events[-1].payload["result"] == {"v": 2, "got": None}, types

    explore(lab, _setup("timer"), _migrate("timer"), _migrate("timer"), check)
