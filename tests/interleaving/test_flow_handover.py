"""An attempt's outcome handing its slot on, against a claim that holds task rows while it
takes slots (issue 34), statement by statement on real PostgreSQL (harness.py).

A claim's transaction holds the task rows of the attempts it held back (up to
HOLDS_PER_TRANSACTION) while it goes on to claim, and take slots for, the next. The
outcome of another attempt of the same key frees its slot and hands it on, then a look
after its commit locks the key's slots and sets the next waiter's timer. A woken claim
that waited for slot locks while holding a task row the look (or the release) wanted
deadlocked: 2 to 8 times per 10,000 attempts in the bench, each rolling back an outcome
whose task then ran again at its lease's end. In every split order, in both orders:

- no deadlock, no error;
- never over the limit: at most two slots of the key leased, each to one holder;
- nothing lost: once everything runs, every call completed and nothing waits.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from workflow_runner.engine.task_outcomes import record_success
from workflow_runner.flow.wake import wake_after_commit
from workflow_runner.store import ClaimedTask, Store

from tests.flow.flows import at, claim, put, run_of, settle, task_rows, waiters
from tests.interleaving.harness import Run
from tests.interleaving.test_join_protocol import Lab, explore

NOW = at(10)


@pytest.fixture
def lab(pg_server_url: str, template_database: str) -> Lab:
    return Lab(pg_server_url, template_database)


def _claiming(store: Store) -> Any:
    """A worker's claim at NOW (its look after the commit included)."""
    return claim(store, NOW)


def _live_holders(store: Store) -> dict[str, list[str]]:
    """The holders of the slots whose lease has not ended at NOW, by flow key."""
    held = store.conn.execute(
        "SELECT flow_key, holder FROM flow_slots WHERE holder IS NOT NULL AND leased_until > %s",
        (NOW,),
    ).fetchall()
    per_key: dict[str, list[str]] = {}
    for row in held:
        per_key.setdefault(row["flow_key"], []).append(row["holder"])
    return per_key


def _ending(running: dict[str, ClaimedTask], name: str) -> Any:
    """The outcome of the running attempt `name` at NOW, with the look after its commit."""

    def operation(store: Store) -> Any:
        record_success(store, running[name], 1, NOW)
        return wake_after_commit(store, NOW)

    return operation


def test_an_outcome_handing_its_slot_on_and_a_claim_holding_task_rows_never_deadlock(
    lab: Lab,
) -> None:
    # Given: account a-1 (two calls at a time) with calls 1 and 2 running, 3 and 4
    # queued; call 1 ended, so call 3 is woken (its slot handed over or promised); call
    # 4's timer has fired, so a claim meets it first, holds it back (its key has work
    # queued before it) and goes on to claim call 3 in the same transaction
    running: dict[str, ClaimedTask] = {}

    def setup(store: Store) -> None:
        for n in (1, 2, 3, 4):
            put(store, "two-calls", n, now=at(n / 10))
        first, second = claim(store, at(1)), claim(store, at(1))
        assert first is not None and second is not None
        assert claim(store, at(1)) is None
        running["second"] = second
        record_success(store, first, 1, at(2))
        wake_after_commit(store, at(2))
        woken = [w["run_id"] for w in waiters(store) if w["woken_at"] is not None]
        assert woken == [run_of("two-calls", 3)]
        # (its timer fired before call 3 was woken, so a claim meets call 4 first)
        store.conn.execute(
            "UPDATE task_queue SET next_attempt_at = %s WHERE run_id = %s",
            (at(1.5), run_of("two-calls", 4)),
        )

    def check(store: Store, run: Run) -> None:
        assert not run.errors, run.errors
        holders = [h for key_holders in _live_holders(store).values() for h in key_holders]
        assert len(holders) <= 2 and len(set(holders)) == len(holders), holders
        claimed = run.actors[0].result
        assert claimed is not None and claimed.run_id == run_of("two-calls", 3)
        settle(store, at(100))
        assert [r["status"] for r in task_rows(store)] == ["completed"] * 4
        assert waiters(store) == []

    schedules = explore(lab, setup, _claiming, _ending(running, "second"), check)
    assert schedules >= 8


def test_two_outcomes_handing_slots_on_at_once_leave_every_woken_attempt_due_now(
    lab: Lab,
) -> None:
    # Given: account a-1 (two calls at a time) with calls 1 and 2 running and 3, 4 and 5
    # queued behind them, in arrival order
    running: dict[str, ClaimedTask] = {}

    def setup(store: Store) -> None:
        for n in (1, 2, 3, 4, 5):
            put(store, "two-calls", n, now=at(n / 10))
        first, second = claim(store, at(1)), claim(store, at(1))
        assert first is not None and second is not None
        assert claim(store, at(1)) is None
        running["first"], running["second"] = first, second

    # When: both calls' outcomes are recorded at once, each handing its slot on in its
    # own transaction (one of them reads the queue's head for its safety timer while
    # the other wakes that very call and commits: issue 34's stuck tail)
    def check(store: Store, run: Run) -> None:
        assert not run.errors, run.errors
        holders = [h for key_holders in _live_holders(store).values() for h in key_holders]
        assert len(holders) <= 2 and len(set(holders)) == len(holders), holders
        # Then: calls 3 and 4 are woken and due now (no timer put one off to the
        # handover's end)
        due = {r["run_id"]: r["next_attempt_at"] for r in task_rows(store)}
        woken = {w["run_id"] for w in waiters(store) if w["woken_at"] is not None}
        assert woken == {run_of("two-calls", n) for n in (3, 4)}, woken
        late = {run: due[run] for run in woken if due[run] > NOW}
        assert not late, late
        # ... so workers claiming a second later run both woken calls at once
        soon = NOW + timedelta(seconds=1)
        claimed = {c.run_id for c in (claim(store, soon), claim(store, soon)) if c is not None}
        assert claimed == woken, claimed
        settle(store, at(100))
        assert [r["status"] for r in task_rows(store)] == ["completed"] * 5
        assert waiters(store) == []

    schedules = explore(lab, setup, _ending(running, "first"), _ending(running, "second"), check)
    assert schedules >= 8


def test_an_attempt_giving_a_slot_on_to_wait_for_its_other_key_and_that_keys_release_lose_no_wake(
    lab: Lab,
) -> None:
    """A woken attempt whose other key is busy hands its slot on and waits in that key's
    queue; the look after its commit is at that key only (the slot it gave back went
    to the next in line in its own transaction). Against the release of that other
    key, in every split order: nothing over the limits, and nothing left waiting for a
    timer: workers claiming at that moment run both calls that were queued."""
    running: dict[str, ClaimedTask] = {}

    def setup(store: Store) -> None:
        # Given: five accounts' calls hold the five global slots (a-1's first among
        # them); a-1's second call and f's call queued for a global slot; b's call
        # ended and handed its global slot to a-1's second call
        accounts = {1: "a-1", 2: "b", 3: "c", 4: "d", 5: "e", 6: "a-1", 7: "f"}
        for n, account in accounts.items():
            put(store, "one-call", n, now=at(n / 10), account=account)
        for n in range(1, 6):
            claimed = claim(store, at(1))
            assert claimed is not None and claimed.run_id == run_of("one-call", n)
            running[str(n)] = claimed
        assert claim(store, at(1)) is None
        record_success(store, running["2"], 1, at(2))
        wake_after_commit(store, at(2))

    def check(store: Store, run: Run) -> None:
        assert not run.errors, run.errors
        for key, holders in _live_holders(store).items():
            assert len(holders) <= (5 if ":global:" in key else 1), (key, holders)
        # Then: workers claiming now (no clock moving) run a-1's second call and f's
        claimed = {c.run_id for c in [run.actors[0].result] if c is not None}
        for _ in range(4):
            more = claim(store, NOW)
            if more is not None:
                claimed.add(more.run_id)
        assert claimed == {run_of("one-call", 6), run_of("one-call", 7)}, claimed
        settle(store, at(100))
        assert [r["status"] for r in task_rows(store)] == ["completed"] * 7
        assert waiters(store) == []

    # When: a worker claims (a-1's second call, which cannot have a-1's slot yet) while
    # a-1's first call's outcome is recorded, each with its look after the commit
    schedules = explore(lab, setup, _claiming, _ending(running, "1"), check)
    assert schedules >= 8
