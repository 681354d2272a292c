"""Flow control in the test kit: the same limits as deployed, on the handlers of the SAM
application, with time travel (a throttle's turns, a debounce's quiet period, a dead
worker's lease are crossed by `advance`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from workflow_runner import (
    Concurrency,
    Debounce,
    Event,
    RateLimit,
    Singleton,
    Steps,
    Throttle,
    define_workflow,
    on_event,
    run_id_for,
)
from workflow_runner.flow.tasks import claim_within_limits
from workflow_runner.testing import WorkflowTestEnv

from tests.support import TENANT_A

MakeEnv = Callable[..., WorkflowTestEnv]


def _provision(ctx: Any) -> dict[str, Any]:
    return {"account": ctx.event.payload["accountId"]}


SIGNUP = define_workflow(
    name="signup",
    trigger=on_event("user.signed-up"),
    idempotency_key=Event.payload["userId"],
    steps=lambda s: [
        s.task(
            "provision",
            _provision,
            throttle=Throttle(10, "PT1M", key=Event.payload["accountId"]),
            concurrency=Concurrency(1, key=Event.payload["accountId"]),
        ),
        s.return_(Steps["provision"]),
    ],
    register=False,
)


def test_signups_under_a_10_per_minute_throttle_run_at_its_pace_in_business_time(
    make_env: MakeEnv,
) -> None:
    # 200 signups of one account: 20 minutes of turns, crossed by time travel (each turn
    # a cycle of the handlers: about 0.1 s each on a loaded two-core machine)
    env = make_env(workflows=[SIGNUP])
    began = time.monotonic()
    for n in range(200):
        env.put_event(
            tenant=TENANT_A, type="user.signed-up", payload={"userId": f"u{n}", "accountId": "a"}
        )
    runs = env.runs(tenant=TENANT_A, workflow="signup")
    assert sum(r.status == "completed" for r in runs) == 1  # the first: its turn was now

    env.advance("PT10M")  # 100 turns of 6 s: 101 done, none ahead of its turn
    runs = env.runs(tenant=TENANT_A, workflow="signup")
    assert sum(r.status == "completed" for r in runs) == 101

    env.advance("PT10M")
    runs = env.runs(tenant=TENANT_A, workflow="signup")
    assert {r.status for r in runs} == {"completed"}
    assert time.monotonic() - began < 20 * 60  # not the 20 minutes the turns take


def test_a_rate_limited_trigger_is_skipped_and_a_singleton_starts_one(make_env: MakeEnv) -> None:
    limited = define_workflow(
        name="digest",
        trigger=on_event("note.added"),
        rate_limit=RateLimit(2, "PT1H", key=Event.payload["userId"]),
        steps=lambda s: [s.return_({"ok": True})],
        register=False,
    )
    single = define_workflow(
        name="sync",
        trigger=on_event("crm.changed"),
        singleton=Singleton(Event.payload["accountId"]),
        steps=lambda s: [s.wait(for_="PT10M"), s.return_({"ok": True})],
        register=False,
    )
    env = make_env(workflows=[limited, single])
    for _ in range(3):
        env.put_event(tenant=TENANT_A, type="note.added", payload={"userId": "u1"})
        env.put_event(tenant=TENANT_A, type="crm.changed", payload={"accountId": "a1"})
    assert len(env.runs(tenant=TENANT_A, workflow="digest")) == 2
    assert len(env.runs(tenant=TENANT_A, workflow="sync")) == 1
    skipped = env.store.flow.skipped(tenant_id=TENANT_A)
    assert sorted(s.reason for s in skipped) == ["rate_limit", "singleton", "singleton"]

    env.advance("PT10M")  # the sync run settles: the key starts again
    env.put_event(tenant=TENANT_A, type="crm.changed", payload={"accountId": "a1"})
    assert len(env.runs(tenant=TENANT_A, workflow="sync")) == 2


def test_a_debounced_run_starts_after_the_quiet_period_with_the_last_event(
    make_env: MakeEnv,
) -> None:
    debounced = define_workflow(
        name="reindex",
        trigger=on_event("doc.edited"),
        debounce=Debounce("PT2M", key=Event.payload["docId"]),
        steps=lambda s: [s.return_({"version": Event.payload["version"]})],
        register=False,
    )
    env = make_env(workflows=[debounced])
    for version in range(1, 4):
        env.put_event(
            tenant=TENANT_A, type="doc.edited", payload={"docId": "d1", "version": version}
        )
        env.advance("PT1M")
    (run,) = env.runs(tenant=TENANT_A, workflow="reindex")
    assert run.status == "waiting"
    env.advance("PT1M")
    (run,) = env.runs(tenant=TENANT_A, workflow="reindex")
    assert run.status == "completed" and run.result == {"version": 3}


def test_a_task_limited_to_one_at_a_time_waits_for_a_dead_workers_lease(
    make_env: MakeEnv,
) -> None:
    env = make_env(workflows=[SIGNUP])
    signup = {"userId": "u0", "accountId": "b"}
    env.put_event(tenant=TENANT_A, type="user.signed-up", payload=signup)
    env.put_event(tenant=TENANT_A, type="user.signed-up", payload={**signup, "userId": "u1"})
    # u1's attempt waits for its throttle turn (6 s); at that moment a worker claims it
    # (its slot with it) and dies before it records anything
    turn = env.now + timedelta(seconds=6)
    dead = claim_within_limits(
        env.store, lambda: env.store.tasks.claim(turn, 600_000, 10_000, 5.0), lambda: turn
    )
    assert dead is not None and dead.run_id == run_id_for("signup", "u1")
    env.put_event(tenant=TENANT_A, type="user.signed-up", payload={**signup, "userId": "u2"})

    # When: time passes beyond the dead worker's lease (30 s timeout + 5 s margin)
    env.advance("PT1M")

    # Then: u2 ran only once the lease had ended (one call at a time), and u1 ran again
    u2 = env.run(tenant=TENANT_A, workflow="signup", key="u2")
    assert u2.status == "completed"
    completed_at = next(e.recorded_at for e in u2.events if e.type == "workflow.task.completed")
    assert completed_at >= dead.leased_until
    u1 = env.run(tenant=TENANT_A, workflow="signup", key="u1")
    assert u1.status == "completed"


def test_a_debounced_run_keeps_its_last_trigger_after_a_wait_and_in_its_tasks(
    make_env: MakeEnv,
) -> None:
    # the held facts naming the last trigger precede the first pass; a pass after a wait
    # and a task read the run's tail, which no longer has them
    def version_of(ctx: Any) -> int:
        return int(ctx.event.payload["version"])

    debounced = define_workflow(
        name="republish",
        trigger=on_event("doc.edited"),
        debounce=Debounce("PT2M", key=Event.payload["docId"]),
        steps=lambda s: [
            s.wait(for_="PT1H"),
            s.task("seen", version_of),
            s.return_({"event": Event.payload["version"], "task": Steps["seen"]}),
        ],
        register=False,
    )
    env = make_env(workflows=[debounced])
    for version in range(1, 4):
        env.put_event(
            tenant=TENANT_A, type="doc.edited", payload={"docId": "d1", "version": version}
        )
        env.advance("PT1M")
    env.advance("PT2H")
    (run,) = env.runs(tenant=TENANT_A, workflow="republish")
    assert run.status == "completed" and run.result == {"event": 3, "task": 3}
