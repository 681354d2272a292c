"""The trigger gates on real PostgreSQL: a throttle holds starts until their turn (in
arrival order, none dropped), a rate limit and a singleton skip triggers (recorded with
the reason), a singleton in cancel mode replaces the unsettled run, and a debounce
starts once with the last trigger of its key."""

from __future__ import annotations

from datetime import timedelta

from workflow_runner.store import Store
from workflow_runner.stream import FlowHeld

from tests.flow.flows import (
    T0,
    at,
    project,
    put,
    resume,
    run_of,
    run_one_task,
    settle,
    status,
    task_rows,
)
from tests.support import TENANT_A, TENANT_B


def _held(store: Store, run_id: str, tenant: str = TENANT_A) -> list[FlowHeld]:
    events, _ = store.streams.load_run(tenant, run_id)
    return [e.fact for e in events if isinstance(e.fact, FlowHeld)]


def _skipped(store: Store) -> list[tuple[str, str, str]]:
    rows = store.conn.execute(
        "SELECT event_id, workflow_name, reason FROM flow_skipped ORDER BY skipped_at, event_id"
    ).fetchall()
    return [(r["event_id"], r["workflow_name"], r["reason"]) for r in rows]


def test_a_throttle_starts_the_first_at_once_and_holds_the_rest_for_their_turns(
    store: Store,
) -> None:
    # When: 13 triggers of account a-1 arrive at once (10 a minute, a burst of 1)
    for n in range(13):
        put(store, "throttled", n)

    # Then: the first ran at once; each later one is held for its turn, 6 s apart, in order
    assert status(store, run_of("throttled", 0)) == "completed"
    turns = [_held(store, run_of("throttled", n))[0].wake_at for n in range(1, 13)]
    assert turns == [T0 + timedelta(seconds=6 * n) for n in range(1, 13)]
    held = _held(store, run_of("throttled", 1))[0]
    assert held.reason == "throttle" and "throttle 10" in held.limit and "a-1" in held.limit

    # When: the turns come; a run is not resumed before its turn
    project(store, at(1))
    assert resume(store, run_of("throttled", 1), 0, at(5)).outcome == "not-due"
    settle(store, at(40))

    # Then: those whose turn came ran, with their own trigger; the others still wait
    done = [n for n in range(13) if status(store, run_of("throttled", n)) == "completed"]
    assert done == list(range(7))


def test_a_throttle_counts_per_key_and_per_tenant(store: Store) -> None:
    for n in range(11):
        put(store, "throttled", n)
    # Another account and another tenant start at once, the bucket of a-1 being empty
    put(store, "throttled", 100, account="a-2")
    put(store, "throttled", 101, tenant=TENANT_B)
    assert status(store, run_of("throttled", 100)) == "completed"
    assert status(store, run_of("throttled", 101), TENANT_B) == "completed"


def test_a_task_throttle_spaces_its_attempts_and_keeps_their_turns(store: Store) -> None:
    # Given: five runs calling a provider (2 a second, a burst of 2)
    for n in range(5):
        put(store, "throttled-task", n, now=at(n / 100))

    # When: the worker claims at 0.1 s
    ran = []
    while (attempt := run_one_task(store, at(0.1))) is not None:
        ran.append(attempt.run_id)

    # Then: two attempts ran (the burst); the others wait for their turns (0.5 s apart)
    assert len(ran) == 2
    rows = task_rows(store)
    waiting = sorted(
        (r["next_attempt_at"], r["flow_ticket"]) for r in rows if r["status"] == "pending"
    )
    assert [w[0] for w in waiting] == [at(0.6), at(1.1), at(1.6)]
    assert all(due == ticket for due, ticket in waiting)

    # When: their turns come, they run without taking new turns
    for moment in (at(0.6), at(1.1), at(1.6)):
        attempt = run_one_task(store, moment)
        assert attempt is not None and attempt.outcome == "completed"
    assert {r["status"] for r in task_rows(store)} == {"completed"}


def test_a_rate_limit_skips_triggers_beyond_its_window_and_records_why(store: Store) -> None:
    # When: five triggers of a-1 within the hour (3 an hour), one of a-2, one later
    for n in range(5):
        put(store, "rate-limited", n, now=at(n))
    put(store, "rate-limited", 5, now=at(5), account="a-2")
    started_later = put(store, "rate-limited", 6, now=T0 + timedelta(hours=1, seconds=1))

    # Then: three of a-1 started, two were skipped with the reason; a-2 and the one
    # after the window started
    started = [n for n in range(7) if store.runs.get(TENANT_A, run_of("rate-limited", n))]
    assert started == [0, 1, 2, 5, 6]
    assert started_later == [run_of("rate-limited", 6)]
    assert _skipped(store) == [
        (f"rate-limited-{TENANT_A[:4]}-3", "rate-limited", "rate_limit"),
        (f"rate-limited-{TENANT_A[:4]}-4", "rate-limited", "rate_limit"),
    ]
    detail = store.flow.skipped()[0].detail
    assert "more than 3 per PT1H" in detail and "a-1" in detail


def test_a_singleton_skips_a_trigger_while_its_run_is_unsettled(store: Store) -> None:
    put(store, "singleton-skip", 1)
    assert put(store, "singleton-skip", 2) == []
    put(store, "singleton-skip", 3, account="a-2")
    assert [s[2] for s in _skipped(store)] == ["singleton"]
    assert store.flow.skipped()[0].run_id == run_of("singleton-skip", 1)

    # Once it settled, the key starts again
    project(store, at(1))
    settle(store, T0 + timedelta(hours=2))
    assert status(store, run_of("singleton-skip", 1)) == "completed"
    assert put(store, "singleton-skip", 4, now=T0 + timedelta(hours=2)) == [
        run_of("singleton-skip", 4)
    ]


def test_a_singleton_in_cancel_mode_cancels_the_unsettled_run_and_starts(store: Store) -> None:
    put(store, "singleton-cancel", 1)
    put(store, "singleton-cancel", 2, now=at(10))
    assert status(store, run_of("singleton-cancel", 1)) == "cancelled"
    assert status(store, run_of("singleton-cancel", 2)) == "waiting"
    cancelled = store.runs.get(TENANT_A, run_of("singleton-cancel", 1))
    assert cancelled is not None
    events, _ = store.streams.load_run(TENANT_A, run_of("singleton-cancel", 1))
    assert "singleton: replaced by event" in str(events[-1].fact)


def test_a_debounce_starts_once_the_key_is_quiet_with_its_last_trigger(store: Store) -> None:
    # When: three triggers of a-1, two minutes apart (a 5-minute quiet period)
    (run_id,) = put(store, "debounced", 1)
    assert put(store, "debounced", 2, now=at(120)) == []
    assert put(store, "debounced", 3, now=at(240)) == []
    project(store, at(240))

    # Then: nothing ran yet; the run waits until 5 minutes after the last trigger
    assert status(store, run_id) == "waiting"
    assert _held(store, run_id)[-1].wake_at == at(540)
    settle(store, at(539))
    assert status(store, run_id) == "waiting"

    # When: the key stays quiet
    settle(store, at(540))

    # Then: the run ran once, with the last event
    events, _ = store.streams.load_run(TENANT_A, run_id)
    assert status(store, run_id) == "completed"
    assert events[-1].fact.result == {"n": 3}  # type: ignore[union-attr]


def test_a_debounce_starts_at_its_timeout_however_often_it_is_triggered(store: Store) -> None:
    (run_id,) = put(store, "debounced", 0)
    for n in range(1, 10):  # every 4 minutes: never 5 minutes quiet
        put(store, "debounced", n, now=at(240 * n))
        project(store, at(240 * n))
        settle(store, at(240 * n))
        if status(store, run_id) == "completed":
            break
    # The 20-minute timeout started it with the last trigger before it
    events, _ = store.streams.load_run(TENANT_A, run_id)
    assert events[-1].fact.result == {"n": 5}  # type: ignore[union-attr]
    assert _held(store, run_id)[-1].wake_at == at(1200)


def test_runs_migrate_refuses_a_run_held_before_its_first_step(store: Store) -> None:
    # Given: a throttled run held for its turn (it has run no step)
    from workflow_runner import Event, Throttle, WorkflowRegistry, define_workflow, on_event
    from workflow_runner.engine.operator_actions import Operator
    from workflow_runner.engine.run_migration import MigrationRequest, migrate_runs
    from workflow_runner.engine.step_mapping import parse_mapping

    from tests.flow.flows import REGISTRY

    put(store, "throttled", 0)
    put(store, "throttled", 1)
    held = run_of("throttled", 1)
    assert status(store, held) == "waiting" and _held(store, held)
    v2 = define_workflow(
        name="throttled",
        version=2,
        trigger=on_event("throttled.go"),
        idempotency_key=Event.payload["n"],
        throttle=Throttle(10, "PT1M", key=Event.payload["account"]),
        steps=lambda s: [s.wait(for_="PT1M"), s.return_({"n": Event.payload["n"]})],
        register=False,
    )
    registry = WorkflowRegistry()
    registry.register(REGISTRY.latest("throttled"))
    registry.register(v2)

    # When: an operator migrates the workflow's waiting runs to version 2
    request = MigrationRequest("throttled", 2, mapping=parse_mapping([]))
    report = migrate_runs(store, registry, request, at(1), Operator("tests", "v2"))

    # Then: the held run is refused, untouched, with why
    (move,) = report.moves
    assert move.run_id == held and move.outcome == "refused"
    assert move.why is not None and "flow control" in move.why
    assert len(_held(store, held)) == 1
