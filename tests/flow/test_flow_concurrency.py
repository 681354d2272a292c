"""Concurrency on real PostgreSQL: a workflow's passes and tasks and a step's attempts
take slots; work without one waits queued, woken when a slot frees; a holder that dies
frees its slot (a pass's by its connection, a task's by its lease); keys, tenants and
workflows without limits are not slowed."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from workflow_runner import (
    Concurrency,
    DomainEvent,
    Event,
    Steps,
    define_workflow,
    on_event,
)
from workflow_runner.engine import ingest_domain_events
from workflow_runner.engine.task_outcomes import record_success as _record_success
from workflow_runner.errors import TransientStoreError
from workflow_runner.flow.keys import flow_key
from workflow_runner.flow.tasks import claim_within_limits
from workflow_runner.store import Sql, Store, connect
from workflow_runner.stream import NEVER, FlowHeld

from tests.flow.flows import (
    REGISTRY,
    at,
    claim,
    look,
    pending_row,
    project,
    put,
    resume,
    run_of,
    run_one_task,
    status,
    task_rows,
    waiters,
)
from tests.support import TENANT_A, TENANT_B

KEY_A1 = flow_key("concurrency", "tenant", TENANT_A, "per-account", None, "a-1")


def _started_and_at_task(store: Store, *ns: int, account: str = "a-1") -> list[str]:
    """Runs of per-account started at T0, resumed after their minute: each waits for
    its task (a waiting run holds no slot)."""
    runs = []
    for n in ns:
        put(store, "per-account", n, account=account)
        runs.append(run_of("per-account", n))
    project(store, at(60))
    for run_id in runs:
        assert resume(store, run_id, 0, at(60)).outcome == "suspended"
    project(store, at(60))
    return runs


def test_a_resume_beyond_the_limit_waits_queued_and_a_freed_slot_wakes_it(store: Store) -> None:
    # Given: two runs of account a-1 running their task (each attempt holds a slot of 2)
    r1, r2 = _started_and_at_task(store, 1, 2)
    first, second = claim(store, at(61)), claim(store, at(61))
    assert first is not None and second is not None
    put(store, "per-account", 3)
    r3 = run_of("per-account", 3)
    project(store, at(61))

    # When: the third run's minute is over
    held = resume(store, r3, 0, at(61))

    # Then: it waits, queued; as the oldest waiting its pending row wakes when the
    # first task lease ends (a worker that died frees its slot then), not before
    assert (held.outcome, held.reason) == ("not-due", "held_by_limit")
    assert status(store, r3) == "waiting"
    row = pending_row(store, r3)
    first_lease_end = min(first.leased_until, second.leased_until)
    assert row is not None and row["wake_at"] == first_lease_end and row["leased_until"] is None
    assert [(w["run_id"], w["woken_at"]) for w in waiters(store)] == [(r3, None)]

    # When: one task ends (its outcome gives its slot back) and the key is looked at
    _record_success(store, first, 1, at(62))
    woken = look(store, at(62))

    # Then: the third run is woken, due now, and its resume takes the slot
    assert [(w.run_id, w.wake_at) for w in woken] == [(r3, at(62))]
    assert resume(store, r3, 0, at(62)).outcome == "suspended"
    assert waiters(store) == []
    assert {r1, r2} <= {r["run_id"] for r in task_rows(store)}


def test_a_woken_resume_takes_its_slot_while_another_workers_look_counts_the_slots(
    db_url: str, store: Store
) -> None:
    # Given: account a-1 full (two tasks running), a third run held, then woken by the
    # end of one task
    _started_and_at_task(store, 1, 2)
    first, second = claim(store, at(61)), claim(store, at(61))
    assert first is not None and second is not None
    put(store, "per-account", 3)
    r3 = run_of("per-account", 3)
    project(store, at(61))
    assert resume(store, r3, 0, at(61)).reason == "held_by_limit"
    _record_success(store, first, 1, at(62))
    assert [w.run_id for w in look(store, at(62))] == [r3]

    # And: another worker's look at the key in progress (every slot of the key locked)
    other = connect(db_url)
    other.conn.execute("BEGIN")
    other.conn.execute(
        "SELECT slot FROM flow_slots WHERE flow_key = %s ORDER BY slot FOR UPDATE", (KEY_A1,)
    ).fetchall()

    # When: the woken run's resume runs meanwhile
    done: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: done.update(result=resume(store, r3, 0, at(62))))
    thread.start()
    thread.join(timeout=0.5)
    other.conn.execute("COMMIT")  # the look ends
    thread.join(timeout=30)
    other.close()

    # Then: the resume waited for the look and took the slot promised to it (not held
    # again, to be woken by yet another look)
    assert done["result"].outcome == "suspended"
    assert waiters(store) == []


def test_another_account_is_not_held_by_a_full_one(store: Store) -> None:
    # Given: account a-1 at its limit, with a run waiting for a slot
    _started_and_at_task(store, 1, 2)
    assert claim(store, at(61)) is not None and claim(store, at(61)) is not None
    put(store, "per-account", 3)
    project(store, at(61))
    assert resume(store, run_of("per-account", 3), 0, at(61)).reason == "held_by_limit"

    # When: a run of account a-2 and one of another tenant come due
    put(store, "per-account", 4, account="a-2")
    put(store, "per-account", 5, tenant=TENANT_B)
    project(store, at(61))

    # Then: both run at once
    assert resume(store, run_of("per-account", 4), 0, at(61)).outcome == "suspended"
    other = resume(store, run_of("per-account", 5), 0, at(61), tenant=TENANT_B)
    assert other.outcome == "suspended"


def test_a_step_limit_per_account_and_a_global_one_hold_attempts_in_arrival_order(
    store: Store,
) -> None:
    # Given: three calls of account a-1 (one at a time) and six accounts' calls in all
    for n in (1, 2, 3):
        put(store, "one-call", n, now=at(n / 10))  # scheduled in this order
    first = claim(store, at(1))
    assert first is not None and first.run_id == run_of("one-call", 1)

    # When: the worker claims on: the other two of a-1 wait (queued, not due)
    assert claim(store, at(1)) is None
    queued = [w["run_id"] for w in waiters(store)]
    assert queued == [run_of("one-call", 2), run_of("one-call", 3)]
    # The oldest waits until the running attempt's lease ends at the latest, the other
    # until a slot wakes it
    due = [r["next_attempt_at"] for r in task_rows(store) if r["status"] == "pending"]
    assert due == [first.leased_until, NEVER]

    # Then: four other accounts' calls run; the global limit (5) holds the fifth
    for n, account in zip((11, 12, 13, 14, 15), ("b", "c", "d", "e", "f"), strict=True):
        put(store, "one-call", n, now=at(1 + n / 100), account=account)
    claimed = [claim(store, at(2)) for _ in range(5)]
    assert [c.run_id if c else None for c in claimed] == [
        *(run_of("one-call", n) for n in (11, 12, 13, 14)),
        None,
    ]

    # When: the first call ends, its two slots come back
    _record_success(store, first, 1, at(3))
    look(store, at(3))

    # Then: the global slot goes to account f's call, queued for it first; a-1's oldest
    # call now has its account's slot and queues for a global one
    following = [claim(store, at(3)), claim(store, at(3))]
    assert [c.run_id if c else None for c in following] == [run_of("one-call", 15), None]

    # When: another call ends
    done = claimed[0]
    assert done is not None
    _record_success(store, done, 1, at(4))
    look(store, at(4))

    # Then: a-1's oldest call runs, its younger one still waits
    following = [claim(store, at(4)), claim(store, at(4))]
    assert [c.run_id if c else None for c in following] == [run_of("one-call", 2), None]
    assert [w["run_id"] for w in waiters(store)] == [run_of("one-call", 3)]


def test_a_woken_attempt_takes_its_slot_while_another_workers_look_counts_the_slots(
    db_url: str, store: Store
) -> None:
    # Given: account a-1's second call woken by the first's end (its one slot free)
    put(store, "one-call", 1, now=at(0.1))
    put(store, "one-call", 2, now=at(0.2))
    first = claim(store, at(1))
    assert first is not None and claim(store, at(1)) is None
    _record_success(store, first, 1, at(2))
    look(store, at(2))
    [woken] = waiters(store)
    assert woken["run_id"] == run_of("one-call", 2) and woken["woken_at"] is not None

    # And: another worker's look at the key in progress (it locks every slot of the key
    # while it counts the free ones)
    other = connect(db_url)
    other.conn.execute("BEGIN")
    other.conn.execute(
        "SELECT slot FROM flow_slots WHERE flow_key = %s ORDER BY slot FOR UPDATE",
        (woken["flow_key"],),
    ).fetchall()

    # When: a worker claims the woken call meanwhile
    done: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: done.update(task=claim(store, at(2))))
    thread.start()
    thread.join(timeout=0.5)
    other.conn.execute("COMMIT")  # the look ends
    thread.join(timeout=30)
    other.close()

    # Then: the call waited for the look and took the slot handed over to it, instead of
    # going back to the queue to be woken again by yet another look (which would lock
    # the slots again: with many workers, a wake feeding on itself)
    claimed = done["task"]
    assert claimed is not None and claimed.run_id == run_of("one-call", 2)
    assert waiters(store) == []
    leased = store.conn.execute(
        "SELECT holder FROM flow_slots WHERE flow_key = %s AND holder IS NOT NULL",
        (woken["flow_key"],),
    ).fetchall()
    assert [r["holder"] for r in leased] == [f"{TENANT_A}/{claimed.task_id}/1"]


def test_a_worker_that_dies_mid_task_frees_its_slot_when_its_lease_ends(store: Store) -> None:
    # Given: a call of account a-1 claimed by a worker that then dies (never records)
    put(store, "one-call", 1, now=at(0.1))
    put(store, "one-call", 2, now=at(0.2))
    dead = claim(store, at(1))
    assert dead is not None
    assert claim(store, at(1)) is None  # the second waits for the slot
    lease_end = dead.leased_until

    # When: time reaches the end of the dead worker's lease
    # Then: the slot is free again and both calls complete, never two at once
    now = lease_end
    done: list[str] = []
    for _ in range(8):
        attempt = run_one_task(store, now)
        in_flight = store.conn.execute(
            "SELECT count(*) AS n FROM flow_slots WHERE holder IS NOT NULL AND leased_until > %s",
            (now,),
        ).fetchone()
        assert in_flight is not None and in_flight["n"] <= 6  # 1 per account + 5 global
        if attempt is None:
            look(store, now)
            now += timedelta(seconds=1)
            continue
        done.append(attempt.run_id)
        if len(set(done)) == 2 and all(r["status"] == "completed" for r in task_rows(store)):
            break
    assert [r["status"] for r in task_rows(store)] == ["completed", "completed"]


def test_a_pass_holds_its_slot_only_while_its_transaction_lives(db_url: str, store: Store) -> None:
    # Given: another connection in the middle of a pass of account a-1 (holding both
    # slots: a transaction that locked them), and a run that comes due meanwhile
    r1, r2 = _started_and_at_task(store, 1, 2)
    put(store, "per-account", 3)
    r3 = run_of("per-account", 3)
    project(store, at(61))
    other = connect(db_url)
    other_pid = other.conn.info.backend_pid
    other.conn.execute("BEGIN")
    other.conn.execute(
        "SELECT slot FROM flow_slots WHERE flow_key = %s FOR UPDATE", (KEY_A1,)
    ).fetchall()

    # When: the due run's resume runs beside it
    done: dict[str, Any] = {}

    def resume_it() -> None:
        done["result"] = resume(store, r3, 0, at(61))
        done["at"] = time.monotonic()

    resumer_pid = store.conn.info.backend_pid
    thread = threading.Thread(target=resume_it)
    thread.start()
    with psycopg.connect(db_url, autocommit=True) as watcher:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # until the look waits for the other pass
            waiting = watcher.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND pid = %s AND query LIKE %s",
                (resumer_pid, "%FOR UPDATE%"),
            ).fetchone()
            if waiting and waiting[0]:
                break
            time.sleep(0.05)

    # Then: its pass was held at once (SKIP LOCKED), and the look after its commit waits
    # for the other pass to end rather than miss the slot it frees
    # (read on a connection of its own: the resume's is busy in the other thread)
    with psycopg.connect(db_url, autocommit=True) as reader:
        held_row = reader.execute(
            "SELECT wake_at FROM workflow_run_pending WHERE run_id = %s", (r3,)
        ).fetchone()
    assert held_row is not None and held_row[0] == NEVER
    assert thread.is_alive()

    # When: the other connection dies mid-pass (a Lambda killed)
    killed_at = time.monotonic()
    with psycopg.connect(db_url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (other_pid,))
    thread.join(timeout=30)

    # Then: its slots were freed by the connection's end, and the waiting run is woken
    assert done["result"].reason == "held_by_limit"
    assert done["at"] - killed_at < 5
    row = pending_row(store, r3)
    assert row is not None and row["wake_at"] == at(61)
    assert resume(store, r3, 0, at(62)).outcome == "suspended"
    assert {r1, r2, r3} == {r["run_id"] for r in task_rows(store)}


def test_changing_a_limit_fails_no_run_in_flight(store: Store) -> None:
    # Given: a run of per-account waiting, started under Concurrency(2)
    put(store, "per-account", 1)
    run_id = run_of("per-account", 1)
    project(store, at(1))
    before = REGISTRY.latest("per-account")

    # When: a deploy changes the limit (and the key)
    changed = define_workflow(
        name="per-account",
        trigger=on_event("per-account.go"),
        idempotency_key=Event.payload["n"],
        concurrency=Concurrency(1, key=Event.payload["region"]),
        steps=lambda s: [
            s.wait(for_="PT1M"),
            s.task("work", _echo_again),
            s.return_({"n": Steps["work"]}),
        ],
        register=False,
        pinning="exact",
    )
    REGISTRY.register(changed)
    try:
        # Then: the definition keeps its fingerprint, and the run goes on under the new limit
        assert changed.fingerprint != ""
        result = resume(store, run_id, 0, at(61))
        assert result.outcome == "suspended", result
        assert status(store, run_id) == "waiting"
    finally:
        REGISTRY.register(before)


def _echo_again(ctx: Any) -> Any:
    return ctx.event.payload["n"]


class NamedSql(Sql):
    """Records the name of every query run."""

    def __init__(self, conn: psycopg.Connection[dict[str, Any]]) -> None:
        super().__init__(conn)
        self.names: list[str] = []

    def all(self, name: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        self.names.append(name)
        return super().all(name, params)

    def one(self, name: str, params: dict[str, Any]) -> dict[str, Any] | None:
        self.names.append(name)
        return super().one(name, params)

    def run(self, name: str, params: dict[str, Any]) -> int:
        self.names.append(name)
        return super().run(name, params)

    def batch(self, calls: Sequence[tuple[str, dict[str, Any]]]) -> list[list[dict[str, Any]]]:
        self.names += [name for name, _ in calls]
        return super().batch(calls)


def test_workflows_without_limits_run_no_statement_of_flow_control(db_url: str) -> None:
    store = connect(db_url, sql_type=NamedSql)
    try:
        plain = define_workflow(
            name="plain",
            trigger=on_event("plain.go"),
            idempotency_key=Event.payload["n"],
            steps=lambda s: [s.wait(for_="PT1M"), s.task("work", _echo_again), s.return_(1)],
            register=False,
        )
        REGISTRY.register(plain)
        put(store, "plain", 1)
        project(store, at(1))
        assert resume(store, run_of("plain", 1), 0, at(61)).outcome == "suspended"
        attempt = run_one_task(store, at(62))
        assert attempt is not None and attempt.outcome == "completed"
        assert resume(store, run_of("plain", 1), 1, at(62)).outcome == "completed"
        sql = store._sql
        assert isinstance(sql, NamedSql)
        assert [n for n in sql.names if n.startswith("flow_")] == []
    finally:
        REGISTRY.unregister("plain")
        store.close()


@pytest.mark.parametrize("limited", [True, False])
def test_a_resume_of_a_limited_workflow_takes_its_slots_in_one_statement(
    db_url: str, limited: bool
) -> None:
    store = connect(db_url, sql_type=NamedSql)
    try:
        workflow = "per-account" if limited else "plain-too"
        if not limited:
            REGISTRY.register(
                define_workflow(
                    name="plain-too",
                    trigger=on_event("plain-too.go"),
                    idempotency_key=Event.payload["n"],
                    steps=lambda s: [s.wait(for_="PT1M"), s.return_(1)],
                    register=False,
                )
            )
        put(store, workflow, 1)
        put(store, workflow, 2)
        project(store, at(1))
        sql = store._sql
        assert isinstance(sql, NamedSql)
        sql.names.clear()
        from workflow_runner.engine.resume import ResumeRequestItem, resume_runs

        items = [ResumeRequestItem(TENANT_A, run_of(workflow, n), 0) for n in (1, 2)]
        results = resume_runs(store, items, at(61), REGISTRY)
        expected = "suspended" if limited else "completed"
        assert [getattr(r, "outcome", r) for r in results] == [expected] * 2
        flow = [n for n in sql.names if n.startswith("flow_")]
        # One statement a batch (the runs' first passes created the key's slots).
        assert flow == (["flow_take_slots"] if limited else [])
        sql.names.clear()
        put(store, workflow, 3)
        put(store, workflow, 4)
        project(store, at(2))
        sql.names.clear()
        items = [ResumeRequestItem(TENANT_A, run_of(workflow, n), 0) for n in (3, 4)]
        resume_runs(store, items, at(62), REGISTRY)
        flow = [n for n in sql.names if n.startswith("flow_")]
        assert flow == (["flow_take_slots"] if limited else [])
    finally:
        REGISTRY.unregister("plain-too")
        store.close()


def test_an_intake_batch_takes_its_new_runs_first_pass_slots_in_one_statement(
    db_url: str,
) -> None:
    """A batch of triggers takes the slots of its runs' first passes together: one
    statement for the batch (one round trip per run made a generous limit cost the
    sleep benchmark 18%), with the same verdicts as one run at a time."""
    store = connect(db_url, sql_type=NamedSql)
    try:
        put(store, "per-account", 1)  # the key's slots exist; the run waits holding none
        sql = store._sql
        assert isinstance(sql, NamedSql)
        sql.names.clear()
        events = [
            DomainEvent(
                id=f"batch-{n}",
                type="per-account.go",
                payload={"n": n, "account": "a-1"},
                tenant_id=TENANT_A,
                time=at(1),
            )
            for n in (2, 3, 4, 5)
        ]
        ingest_domain_events(store, events, at(1), REGISTRY)
        # One take for the four (one a run before); short of slots, the key's are made
        # sure of and taken again, once for the batch too
        assert [n for n in sql.names if n.startswith("flow_")] == [
            "flow_take_slots",
            "flow_ensure_slots",
            "flow_take_slots",
        ]
        held = {
            n: any(
                isinstance(e.fact, FlowHeld)
                for e in store.streams.load_run(TENANT_A, run_of("per-account", n))[0]
            )
            for n in (2, 3, 4, 5)
        }
        # Limit 2: the first two of the batch ran their first pass, the others are held.
        assert held == {2: False, 3: False, 4: True, 5: True}
    finally:
        store.close()


def test_a_claim_whose_look_after_its_commit_fails_still_runs_its_attempt(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given: account a-1's slot held by a claim; a second call of a-1 and one of b-1 due
    put(store, "one-call", 1, now=at(0.1))
    assert claim(store, at(1)) is not None
    put(store, "one-call", 2, now=at(0.2))
    put(store, "one-call", 3, now=at(0.3), account="b-1")

    # When: one claim holds a-1's call back (asking for a look of a-1's key) and admits
    # b-1's, and the look after its commit fails transiently (a deadlock, say)
    import workflow_runner.flow.wake as wake

    def deadlocked(*args: Any, **kwargs: Any) -> Any:
        raise TransientStoreError("deadlock detected")

    monkeypatch.setattr(wake, "wake_key", deadlocked)
    admitted = claim(store, at(1))

    # Then: the committed claim is returned to be run, not stranded until its lease
    # ends, and a-1's key stays asked for, for the next look
    assert admitted is not None and admitted.run_id == run_of("one-call", 3)
    assert flow_key("concurrency", "tenant", TENANT_A, "one-call", "call", "a-1") in (
        store.flow.wakes
    )


def test_an_attempts_release_locks_its_slots_in_key_order(store: Store) -> None:
    # Every statement that waits for slot locks takes them in (key, slot) order; a
    # release that took a per-tenant and a global slot in the heap's order deadlocked
    # with a woken attempt leasing the same two keys (7 to 9 deadlocks in 2,000 attempts
    # of the bench's pair). The plan must lock the rows it sorted by key and slot.
    from workflow_runner.store.queries import query

    plan = "\n".join(
        row["QUERY PLAN"]
        for row in store.conn.execute(
            "EXPLAIN (COSTS OFF) " + query("flow_release_slots"), {"holder": "t/task/1"}
        ).fetchall()
    )
    lock_rows = plan.index("LockRows")
    sort = plan.index("Sort Key: flow_slots.flow_key, flow_slots.slot")
    assert lock_rows < sort, plan  # the lock is taken on the rows as sorted


def test_a_claim_that_gave_a_slot_back_commits_before_it_claims_again(
    db_url: str, store: Store
) -> None:
    # Given: the global limit (5) taken by five accounts' calls; then a call of account
    # a-1 (its account's slot free, no global one) and one of account g
    for n, account in zip((11, 12, 13, 14, 15), ("b", "c", "d", "e", "f"), strict=True):
        put(store, "one-call", n, now=at(n / 100), account=account)
    assert all(claim(store, at(1)) is not None for _ in range(5))
    put(store, "one-call", 1, now=at(0.5))
    put(store, "one-call", 2, now=at(0.6), account="g")

    # When: a claim leases a-1's slot for the first call, gives it back (no global slot)
    # and holds the call back; what another connection sees when it claims again
    seen_before_next_claim: list[list[str]] = []
    other = psycopg.connect(db_url, autocommit=True)
    calls = 0

    def claim_next() -> Any:
        nonlocal calls
        calls += 1
        if calls == 2:
            rows = other.execute("SELECT run_id::text FROM flow_waiters ORDER BY seq").fetchall()
            seen_before_next_claim.append([r[0] for r in rows])
        return store.tasks.claim(at(1), 600_000, 10_000, 5.0)

    try:
        assert claim_within_limits(store, claim_next, lambda: at(1)) is None
    finally:
        other.close()

    # Then: the held-back call was committed before the next claim: the slot row it gave
    # back is no longer locked by the claim (a woken attempt's adopt, waiting for a look's
    # slot lock while the look waits for that row, deadlocked the bench's pair)
    assert seen_before_next_claim
    assert run_of("one-call", 1) in seen_before_next_claim[0]
