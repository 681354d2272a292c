"""A slot an attempt gives back goes straight to the attempt first in its key's queue, in
the releasing transaction (issue 34): no look after the commit, no count of the key's
slots, no lock on them but the one freed; and a slot handed to an attempt that never
comes for it is free again when the handover's lease ends, with the queue moving on.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from workflow_runner.engine.task_outcomes import record_success
from workflow_runner.flow import wake as wake_module
from workflow_runner.flow.keys import flow_key
from workflow_runner.flow.wake import HANDOVER_SECONDS
from workflow_runner.store import Store

from tests.flow.flows import (
    at,
    claim,
    look,
    put,
    run_of,
    run_one_task,
    task_rows,
    waiters,
)
from tests.support import TENANT_A


def _slots(store: Store) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = store.conn.execute(
        "SELECT slot, holder, leased_until FROM flow_slots ORDER BY flow_key, slot"
    ).fetchall()
    return rows


def _task_id(store: Store, run_id: str) -> str:
    row = store.conn.execute(
        "SELECT task_id::text AS task_id FROM task_queue WHERE run_id = %s", (run_id,)
    ).fetchone()
    assert row is not None
    return str(row["task_id"])


def test_a_release_hands_its_slot_to_the_first_queued_attempt_without_a_look(
    store: Store,
) -> None:
    # Given: account a-1's one call running, two more queued behind it in arrival order
    for n in (1, 2, 3):
        put(store, "prio-call", n, now=at(n / 10), prio=0)
    first = claim(store, at(1))
    assert first is not None and first.run_id == run_of("prio-call", 1)
    assert claim(store, at(1)) is None
    assert [w["run_id"] for w in waiters(store)] == [run_of("prio-call", n) for n in (2, 3)]

    # When: the first call's outcome is recorded (and no look runs after it)
    record_success(store, first, 1, at(2))

    # Then: its transaction handed the slot to the second call: leased to that call's
    # work for the handover's time, the call due (from its creation: ahead of work not
    # yet tried, which would keep its slot idle), nothing left to look at
    second = _task_id(store, run_of("prio-call", 2))
    assert store.flow.wakes == {}
    [slot] = _slots(store)
    assert slot["holder"] == f"handed:{TENANT_A}/task:{second}"
    assert slot["leased_until"] == at(2) + timedelta(seconds=HANDOVER_SECONDS)
    queued = waiters(store)
    assert [(w["run_id"], w["woken_at"] is not None) for w in queued] == [
        (run_of("prio-call", 2), True),
        (run_of("prio-call", 3), False),
    ]
    due = {r["run_id"]: r["next_attempt_at"] for r in task_rows(store)}
    assert due[run_of("prio-call", 2)] == at(0.2)
    # The next in line has a timer for the handover's end (should that call never come)
    assert due[run_of("prio-call", 3)] == slot["leased_until"]

    # When: a worker claims at once
    claimed = claim(store, at(2))

    # Then: the second call adopts the slot under its own lease; the third still waits
    assert claimed is not None and claimed.run_id == run_of("prio-call", 2)
    [slot] = _slots(store)
    assert slot["holder"] == f"{TENANT_A}/{second}/1"
    assert slot["leased_until"] == claimed.leased_until
    assert [w["run_id"] for w in waiters(store)] == [run_of("prio-call", 3)]
    assert claim(store, at(2)) is None


def test_a_slot_handed_to_an_attempt_that_never_comes_is_free_again_at_the_handovers_end(
    store: Store,
) -> None:
    # Given: account a-1's first call ended and handed its slot to the second, whose
    # task then went away before any worker claimed it (its run cancelled, say)
    for n in (1, 2, 3):
        put(store, "prio-call", n, now=at(n / 10), prio=0)
    first = claim(store, at(1))
    assert first is not None and claim(store, at(1)) is None
    record_success(store, first, 1, at(2))
    store.conn.execute(
        "UPDATE task_queue SET status = 'cancelled' WHERE run_id = %s",
        (run_of("prio-call", 2),),
    )

    # When: nothing happens until the handover's lease ends
    # Then: before that the third call stays queued (the slot is still handed over) ...
    assert claim(store, at(2 + HANDOVER_SECONDS - 1)) is None
    end = at(2 + HANDOVER_SECONDS)
    # ... and at its end the third call's timer brings it; it runs, never two at once
    done = []
    for _ in range(6):
        attempt = run_one_task(store, end)
        held = [s for s in _slots(store) if s["holder"] and s["leased_until"] > end]
        assert len(held) <= 1, held
        if attempt is not None:
            done.append(attempt.run_id)
            break
        look(store, end)
    assert done == [run_of("prio-call", 3)]
    assert waiters(store) == []


def test_a_safety_timer_never_puts_off_an_attempt_already_due(store: Store) -> None:
    # Given: account a-1's first call ended and handed its slot to the second (due now)
    for n in (1, 2, 3):
        put(store, "prio-call", n, now=at(n / 10), prio=0)
    first = claim(store, at(1))
    assert first is not None and claim(store, at(1)) is None
    record_success(store, first, 1, at(2))
    second = run_of("prio-call", 2)
    [head] = [w for w in waiters(store) if w["run_id"] == second]
    assert head["woken_at"] is not None

    # When: a timer that saw the queue before that handover (its head still the second,
    # not woken: another release's timer, issue 34) is set for the handover's end
    woken = "UPDATE flow_waiters SET woken_at = %s WHERE run_id = %s"
    store.conn.execute(woken, (None, second))
    store.flow.time_head(head["flow_key"], at(2 + HANDOVER_SECONDS))
    store.conn.execute(woken, (head["woken_at"], second))

    # Then: the second call stays due now; a worker claims it at once
    due = {r["run_id"]: r["next_attempt_at"] for r in task_rows(store)}
    assert due[second] == at(0.2)  # due from its creation (see the test above)
    claimed = claim(store, at(2))
    assert claimed is not None and claimed.run_id == second


def test_an_attempt_woken_with_one_keys_slot_takes_a_free_slot_of_its_other_key_ahead_of_its_queue(
    store: Store,
) -> None:
    """With both keys of an attempt queued, an attempt woken on one (its slot handed
    over) that went to the back of the other's queue gave its slot back, and woken there
    found the first key's queue waiting in turn: none ever held both (issue 34's pair).
    It takes a free slot of the other key instead."""
    # Given: a-1's call runs (the global slot); b's first call, then a-1's second
    # and b's second wait in the global key's queue
    for n, account in ((1, "a-1"), (2, "b"), (3, "a-1"), (4, "b")):
        put(store, "tight-pair", n, now=at(n / 10), account=account)
    first = claim(store, at(1))
    assert first is not None and first.run_id == run_of("tight-pair", 1)
    assert claim(store, at(1)) is None
    # ... and b's second waits in b's own queue (its account's slot free: the
    # release that freed it found that call's row held by a claim)
    b_key = flow_key("concurrency", "tenant", TENANT_A, "tight-pair", "call", "b")
    store.conn.execute(
        "UPDATE flow_waiters SET flow_key = %s WHERE run_id = %s",
        (b_key, run_of("tight-pair", 4)),
    )

    # When: a-1's call ends, its global slot handed to b's first call
    record_success(store, first, 1, at(2))
    claimed = claim(store, at(2))

    # Then: b's first call runs with both slots; b's second still waits
    assert claimed is not None and claimed.run_id == run_of("tight-pair", 2)
    rows = store.conn.execute("SELECT flow_key, holder FROM flow_slots").fetchall()
    holders = {r["flow_key"]: r["holder"] for r in rows}
    assert holders[b_key] is not None
    assert holders[b_key] == holders["concurrency:global:*:*:tight"]
    assert run_of("tight-pair", 4) in [w["run_id"] for w in waiters(store)]


@pytest.fixture
def looked(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The keys looked at (wake_key) from here on, in order."""
    keys: list[str] = []
    real = wake_module.wake_key

    def spy(store: Store, key: str, limit: int, now: Any) -> Any:
        keys.append(key)
        return real(store, key, limit, now)

    monkeypatch.setattr(wake_module, "wake_key", spy)
    return keys


def test_an_attempt_that_hands_its_slot_on_and_waits_for_its_other_key_asks_a_look_at_that_key_only(
    store: Store, looked: list[str]
) -> None:
    """Woken with a global slot handed to it while its account's slot is busy, an
    attempt gives the global slot back (handed on to the next in line in the same
    transaction) and waits in its account's queue. Only that queue needs a look after
    the commit; a look at the global key too (every key it touched, before) locked all
    five global slots once more for nothing: half the looks of issue 34's pair."""
    # Given: five accounts' calls hold the five global slots (a-1's first among them);
    # a-1's second call and f's call wait in the global queue, in that order
    accounts = {1: "a-1", 2: "b", 3: "c", 4: "d", 5: "e", 6: "a-1", 7: "f"}
    for n, account in accounts.items():
        put(store, "one-call", n, now=at(n / 10), account=account)
    running = {n: claim(store, at(1)) for n in range(1, 6)}
    assert [c.run_id if c else None for c in running.values()] == [
        run_of("one-call", n) for n in range(1, 6)
    ]
    assert claim(store, at(1)) is None
    global_key = flow_key("concurrency", "global", TENANT_A, "one-call", "call", "provider")
    a1_key = flow_key("concurrency", "tenant", TENANT_A, "one-call", "call", "a-1")
    assert [(w["flow_key"], w["run_id"]) for w in waiters(store)] == [
        (global_key, run_of("one-call", 6)),
        (global_key, run_of("one-call", 7)),
    ]

    # When: b's call ends (its global slot handed to a-1's second call), and a worker
    # claims: a-1's second call cannot have a-1's slot (a-1's first still runs)
    done = running[2]
    assert done is not None
    record_success(store, done, 1, at(2))
    looked.clear()
    claimed = claim(store, at(2))

    # Then: it handed the global slot on to f's call, which the same claim then ran;
    # a-1's second call waits in a-1's queue, and only a-1's key was looked at
    assert claimed is not None and claimed.run_id == run_of("one-call", 7)
    assert [(w["flow_key"], w["run_id"]) for w in waiters(store)] == [
        (a1_key, run_of("one-call", 6))
    ]
    assert looked == [a1_key]

    # And: when a-1's first call ends, its second runs; never more than the limits
    first = running[1]
    assert first is not None
    record_success(store, first, 1, at(3))
    after = claim(store, at(3))
    assert after is not None and after.run_id == run_of("one-call", 6)
    held = [s for s in _slots(store) if s["holder"] and not s["holder"].startswith("handed:")]
    assert len(held) == 5 + 5  # the five global slots, and those of a-1, c, d, e and f
    assert waiters(store) == []


def test_an_attempt_leaving_a_queue_where_its_handover_was_lost_asks_a_look_at_that_key(
    store: Store, looked: list[str]
) -> None:
    """Work that reads woken in a key's queue but adopts no slot there (the slot handed
    to it went to another claim once its handover had ended) counts as promised in every
    look at that key until it leaves the queue. Leaving it to wait for another key, it
    asks a look at that key too, so a free slot held back for it goes to the next."""
    # Given: five accounts' calls hold the five global slots (a-1's first among them);
    # a-1's second call reads woken in a-1's queue, though a-1's slot is not handed to
    # it (a-1's first call holds it)
    for n, account in {1: "a-1", 2: "b", 3: "c", 4: "d", 5: "e", 6: "a-1"}.items():
        put(store, "one-call", n, now=at(n / 10), account=account)
    for _ in range(5):
        assert claim(store, at(1)) is not None
    assert claim(store, at(1)) is None
    a1_key = flow_key("concurrency", "tenant", TENANT_A, "one-call", "call", "a-1")
    store.conn.execute(
        "UPDATE flow_waiters SET flow_key = %s, woken_at = %s WHERE run_id = %s",
        (a1_key, at(1), run_of("one-call", 6)),
    )
    store.conn.execute(
        "UPDATE task_queue SET next_attempt_at = %s WHERE run_id = %s",
        (at(1), run_of("one-call", 6)),
    )

    # When: a worker claims it: no global slot is free, so it waits for one
    looked.clear()
    assert claim(store, at(2)) is None

    # Then: it waits in the global queue only, and a-1's key was looked at besides
    global_key = flow_key("concurrency", "global", TENANT_A, "one-call", "call", "provider")
    assert [(w["flow_key"], w["woken_at"]) for w in waiters(store)] == [(global_key, None)]
    assert sorted(looked) == sorted([global_key, a1_key])
