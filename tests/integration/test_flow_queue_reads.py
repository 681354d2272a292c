"""A release's hand-over and a key's safety timer read the head of the key's queue, not
the queue (migration 0019 and the hand-over's bound): on the generic plans a warm
function runs, with or without statistics on the table, a queue of thousands costs a
release a few index probes. Before, a queue that filled within a minute (no statistics
yet) was read and sorted whole by every release, under the key's slot locks: 5 ms a
release at 2,500 attempts queued, about a third of one hot key's attempt rate. A look
reads as far for gone work as it could wake, a stretch at a time (500 rows a look
before: 7 ms, every release of the key waiting behind it)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from psycopg import sql
from workflow_runner.errors import StoreError
from workflow_runner.flow.wake import _drop_dead_front
from workflow_runner.store import Store
from workflow_runner.store.queries import query

from tests.support import TENANT_A, positional_query

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
QUEUED = 3_000


def _queue(store: Store, n: int, key: str = "k") -> None:
    """`n` held resumes of `key`, oldest first, none woken."""
    store.conn.execute(
        "INSERT INTO flow_waiters (flow_key, tenant_id, work, run_id, step_index,"
        " workflow_name, queued_at, rank_at)"
        " SELECT %(key)s, %(tenant)s, 'pass', gen_random_uuid(), 0, 'w',"
        " %(t0)s + g * interval '1 ms', %(t0)s + g * interval '1 ms'"
        " FROM generate_series(1, %(n)s) g",
        {"key": key, "tenant": TENANT_A, "t0": T0, "n": n},
    )


def _generic_run(store: Store, name: str, params: dict[str, Any]) -> dict[str, Any]:
    """EXPLAIN ANALYZE of the named query run on its generic plan (the plan a prepared
    statement gets once it goes generic), in a transaction rolled back after."""
    text, names = positional_query(name)
    text = text.replace("%%", "%")
    conn = store.conn
    with conn.transaction(force_rollback=True):
        conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        conn.execute(f"PREPARE under_test AS {text}".encode())
        values = sql.SQL(", ").join(sql.Literal(params[n]) for n in names).as_string(conn)
        row = conn.execute(
            f"EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE under_test({values})".encode()
        ).fetchone()
        conn.execute("DEALLOCATE under_test")
    assert row is not None
    plan = row["QUERY PLAN"]
    return dict((json.loads(plan) if isinstance(plan, str) else plan)[0]["Plan"])


def _most_rows(node: dict[str, Any]) -> int:
    """The most rows any node of a plan produced (over all its loops)."""
    own = int(node.get("Actual Rows", 0) * node.get("Actual Loops", 1))
    return max([own, *(_most_rows(child) for child in node.get("Plans", []))])


def _hand_over(wake: int, look: bool) -> dict[str, Any]:
    return {
        "key": "k",
        "slots": "{" + ",".join(str(n) for n in range(1, wake + 1)) + "}",
        "wake": wake,
        "until": T0 + timedelta(minutes=5),
        "now": T0 + timedelta(minutes=1),
        "look": look,
    }


@pytest.mark.parametrize("analyzed", [False, True], ids=["fresh table", "analyzed"])
def test_a_release_reads_the_head_of_a_long_queue_not_the_queue(
    store: Store, analyzed: bool
) -> None:
    _queue(store, QUEUED)
    _queue(store, 500, key="other")
    if analyzed:
        store.conn.execute("ANALYZE flow_waiters")

    for wake in (1, 2, 3):
        bound = 1 << (wake - 1).bit_length()
        plan = _generic_run(store, f"flow_hand_over@{bound}", _hand_over(wake, look=False))
        assert _most_rows(plan) <= bound, (wake, json.dumps(plan)[:3000])


@pytest.mark.parametrize("analyzed", [False, True], ids=["fresh table", "analyzed"])
def test_a_keys_safety_timer_reads_the_first_of_its_queue(store: Store, analyzed: bool) -> None:
    _queue(store, QUEUED)
    if analyzed:
        store.conn.execute("ANALYZE flow_waiters")

    plan = _generic_run(store, "flow_time_head", {"key": "k", "at": T0 + timedelta(minutes=1)})
    assert _most_rows(plan) <= 1, json.dumps(plan)[:3000]


def test_a_look_wakes_no_more_than_asked_of_the_rows_its_bound_locks(store: Store) -> None:
    # Given: a key's queue of held resumes, one of them woken and still to take its slot
    _queue(store, 10)
    store.conn.execute(
        "UPDATE flow_waiters SET woken_at = %s WHERE seq = (SELECT min(seq) FROM flow_waiters)",
        [T0],
    )

    # When: a look with three free slots runs on a bound of four
    rows = store.conn.execute(query("flow_hand_over@4"), _hand_over(3, look=True)).fetchall()

    # Then: two passes are promised (three free, one already promised), the oldest first
    queued = store.conn.execute(
        "SELECT woken_at IS NOT NULL AS woken FROM flow_waiters ORDER BY rank_at, seq"
    ).fetchall()
    assert len(rows) == 2
    assert [r["woken"] for r in queued] == [True, True, True] + [False] * 7


def test_a_bound_goes_only_to_a_query_that_reads_one() -> None:
    assert "LIMIT 64 /* bound */\n" in query("flow_hand_over")  # runnable as written
    assert "LIMIT 8\n" in query("flow_hand_over@8")
    assert "/* bound */" not in query("flow_hand_over@8")
    with pytest.raises(StoreError, match="takes no bound"):
        query("flow_time_head@2")


def _held(store: Store, ranks: list[float], live: bool) -> None:
    """Held resumes of key "k", one per rank (seconds after T0), in arrival order; live
    ones have a waiting run, gone ones no run at all."""
    for rank in ranks:
        run_id = store.conn.execute("SELECT gen_random_uuid()::text AS id").fetchone()
        assert run_id is not None
        if live:
            store.conn.execute(
                "INSERT INTO workflow_runs (tenant_id, run_id, workflow_name, status, version,"
                " definition_fingerprint, trigger_event_type, started_at, updated_at)"
                " VALUES (%s, %s, 'w', 'waiting', 2, 'f', 'w.go', %s, %s)",
                [TENANT_A, run_id["id"], T0, T0],
            )
        store.conn.execute(
            "INSERT INTO flow_waiters (flow_key, tenant_id, work, run_id, step_index,"
            " workflow_name, queued_at, rank_at) VALUES ('k', %s, 'pass', %s, 0, 'w', %s, %s)",
            [TENANT_A, run_id["id"], T0, T0 + timedelta(seconds=rank)],
        )


def _queued_runs_alive(store: Store) -> list[bool]:
    rows = store.conn.execute(
        "SELECT r.run_id IS NOT NULL AS alive FROM flow_waiters q"
        " LEFT JOIN workflow_runs r ON r.tenant_id = q.tenant_id AND r.run_id = q.run_id"
        " ORDER BY q.rank_at, q.seq"
    ).fetchall()
    return [bool(r["alive"]) for r in rows]


def test_a_look_drops_a_mass_of_gone_work_at_the_front_a_stretch_at_a_time(
    store: Store,
) -> None:
    # Given: a key of one slot whose first 45 held resumes are gone (their runs purged),
    # five live ones behind them
    _held(store, [float(n) for n in range(45)], live=False)
    _held(store, [float(n) for n in range(45, 50)], live=True)

    # When: a look drops gone work (stretches of 20 for one slot)
    with store.transaction():
        _drop_dead_front(store, "k", 1)

    # Then: every gone one went, stretch after stretch while they were mostly gone
    assert _queued_runs_alive(store) == [True] * 5


def test_a_look_drops_gone_work_in_the_order_it_wakes_work(store: Store) -> None:
    # Given: 30 live held resumes, and a gone one that arrived last but ranks first (its
    # run's priority gave it a head start)
    _held(store, [float(n) for n in range(1, 31)], live=True)
    _held(store, [0.0], live=False)

    # When: a look of a one-slot key drops gone work (a stretch of 20)
    with store.transaction():
        _drop_dead_front(store, "k", 1)

    # Then: the gone one, first by rank, went
    assert _queued_runs_alive(store) == [True] * 30


class _CountingDrops:
    """A store whose queue answers each drop with the next of `dropped`."""

    def __init__(self, dropped: list[int]) -> None:
        self.asked: list[int] = []
        self._dropped = dropped
        self.flow = self

    def drop_dead_waiters(self, key: str, limit: int) -> int:
        self.asked.append(limit)
        return self._dropped.pop(0) if self._dropped else 0


@pytest.mark.parametrize(
    ("limit", "dropped", "asked"),
    [
        (1, [0], [20]),  # a live front: one stretch
        (5, [10], [20]),  # half gone: enough live ones to wake, it stops
        (5, [11, 3], [20, 20]),  # more gone than live: the next stretch
        (1, [20] * 30, [20] * 25),  # all gone: at most 500 rows a look
        (200, [500], [500]),  # a wide key: one stretch of the most a look reads
    ],
)
def test_a_looks_stretches_follow_how_much_of_the_front_was_gone(
    limit: int, dropped: list[int], asked: list[int]
) -> None:
    store = _CountingDrops(dropped)
    _drop_dead_front(store, "k", limit)  # type: ignore[arg-type]
    assert store.asked == asked
