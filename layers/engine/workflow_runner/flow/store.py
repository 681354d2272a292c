"""Flow control's way into the database: limit rows, slots, the queue of held work,
throttle turns and skipped triggers (the named queries of queries_flow.sql beside it).

`store.flow` is this store on the engine's connection. It also carries, between a
transaction and the work after its commit, the keys whose held work must be looked at
once the transaction committed (`wakes`), and the resumes that look woke (`woken`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from ..store.pending_rows import DueRow
from ..store.sql import Sql, array_literal
from .limits import LimitSpec
from .store_reads import FlowReads, LimitRow, RunWait, SkippedTrigger

__all__ = [
    "FlowStore",
    "FreeSlots",
    "LimitRow",
    "LockedLimit",
    "RunWait",
    "SkippedTrigger",
    "Waiter",
    "Woken",
]


@dataclass(frozen=True)
class Waiter:
    """Held work in a key's queue: a run's resume (`work` "pass") or a task's attempt
    (`work` "task:<task id>")."""

    flow_key: str
    tenant_id: str
    run_id: str
    step_index: int
    work: str
    workflow_name: str = ""
    priority: int = 0  # seconds of head start in the queue (priority=)

    @property
    def task_id(self) -> str | None:
        return self.work[5:] if self.work.startswith("task:") else None

    @property
    def handed_to(self) -> str:
        """The holder of a slot handed over to this work while it waited."""
        return f"handed:{self.tenant_id}/{self.work}"


@dataclass(frozen=True)
class Woken:
    """Held work a freed slot woke, since when it waited, and whether the slot was
    handed over to it (a task attempt) or only promised (a pass)."""

    waiter: Waiter
    queued_at: datetime
    handed: bool = False


@dataclass(frozen=True)
class FreeSlots:
    """A key's free slots counted by a look (their rows locked): how many (missing rows
    count), the rows' numbers, and when the first task lease among the others ends."""

    count: int
    slots: list[int]
    next_lease_end: datetime | None


@dataclass(frozen=True)
class LockedLimit:
    """A rate limit's, singleton's or debounce's row, locked: its recent admissions and
    the key's latest run with its status (None: no such run)."""

    recent: list[datetime]
    run_id: str | None
    run_status: str | None


@dataclass
class FlowStore(FlowReads):
    """Slots, turns, queues and skips; every statement is a named query."""

    _sql: Sql
    # Keys (-> their limit) whose queue must be looked at after the commit.
    wakes: dict[str, int] = field(default_factory=dict)
    # Held resumes woken after a commit, for the caller to send to the resume queue.
    woken: list[DueRow] = field(default_factory=list)
    # (workflow, seconds) of work that waited for a limit (metric LimitWaitSeconds).
    waits: list[tuple[str, float]] = field(default_factory=list)
    # Whether this transaction gave back slots it had leased (their rows stay locked by
    # it until it ends): a claim then commits before it claims again (flow/tasks.py).
    gave_back: bool = False

    # --- slots ---------------------------------------------------------------------------

    def take_slots(
        self, wanted: dict[str, tuple[int, int]], now: datetime, waiting: bool = False
    ) -> tuple[dict[str, int], set[str]]:
        """Lock up to `count` free slots of each key (key -> (limit, count)) for the
        transaction; the slots got per key, and the keys with queued work. `waiting`:
        wait for locked slots instead of skipping them (woken passes holding none)."""
        keys = sorted(wanted)
        rows = self._sql.all(
            "flow_take_slots_waiting" if waiting else "flow_take_slots",
            {
                "keys": array_literal(keys),
                "limits": array_literal([wanted[k][0] for k in keys]),
                "counts": array_literal([wanted[k][1] for k in keys]),
                "now": now,
            },
        )
        got = {k: 0 for k in keys}
        queued: set[str] = set()
        for row in rows:
            if row["slot"] is not None:
                got[row["flow_key"]] += 1
            if row["queued"]:
                queued.add(row["flow_key"])
        return got, queued

    def lease_slots(
        self, limits: dict[str, int], holder: str, until: datetime, now: datetime
    ) -> set[str]:
        """Lease one free slot of each key (key -> limit) to `holder` until `until`; the
        keys that had one. Slots whose rows other transactions hold are skipped."""
        keys = sorted(limits)
        rows = self._sql.all(
            "flow_lease_slots",
            {
                "keys": array_literal(keys),
                "limits": array_literal([limits[k] for k in keys]),
                "holder": holder,
                "until": until,
                "now": now,
            },
        )
        return {r["flow_key"] for r in rows}

    def release_slots(self, holder: str) -> dict[str, tuple[list[int], bool]]:
        """Give back `holder`'s slots: per key, the slots freed (their row locks held
        until the commit) and whether held work waits for it."""
        freed: dict[str, tuple[list[int], bool]] = {}
        for row in self._sql.all("flow_release_slots", {"holder": holder}):
            slots, _ = freed.get(row["flow_key"], ([], False))
            freed[row["flow_key"]] = ([*slots, row["slot"]], bool(row["queued"]))
        return freed

    def ensure_slots(self, specs: Sequence[LimitSpec], now: datetime) -> None:
        """Create the rows and slots of concurrency keys (a grown limit gets its new
        slots); the row's limit follows the value given."""
        ordered = sorted(specs, key=lambda s: s.flow_key)
        self._sql.run(
            "flow_ensure_slots",
            {
                "keys": [s.flow_key for s in ordered],
                "limits": [s.limit for s in ordered],
                "tenant_ids": [s.tenant_id for s in ordered],
                "workflows": [s.workflow_name for s in ordered],
                "steps": [s.step_key for s in ordered],
                "values": [s.key_value for s in ordered],
                "now": now,
            },
        )

    def count_free(self, key: str, limit: int, now: datetime) -> FreeSlots:
        """Lock a key's slots (waiting for passes holding one) and count the free ones."""
        row = self._sql.one("flow_count_free", {"key": key, "limit": limit, "now": now})
        assert row is not None
        return FreeSlots(max(0, int(row["free"])), list(row["free_slots"]), row["next_lease_end"])

    # --- the queue of held work ------------------------------------------------------------

    def queue_state(self, items: Sequence[Waiter]) -> list[tuple[bool, bool | None]]:
        """Per item: (its key has queued work, its own place: None not queued, False
        waiting, True woken)."""
        return _queue_state(items, self._sql.all("flow_queue_state", _queue_params(items)))

    def queue_state_adopting(
        self, items: Sequence[Waiter], holder: str, until: datetime
    ) -> tuple[list[tuple[bool, bool | None]], set[str]]:
        """`queue_state`, and the slots a release or a look handed over to the items'
        work leased to `holder` until `until` (flow_adopt_slots; the keys it had one
        of), in one round trip. For a task attempt whose row the caller holds: no
        handover to it can happen meanwhile (flow_hand_over skips rows others hold), so
        a slot handed to its work is its own exactly when its place reads woken."""
        state, adopted = self._sql.batch(
            [
                ("flow_queue_state", _queue_params(items)),
                ("flow_adopt_slots", _adopt_params(items, holder, until)),
            ]
        )
        return _queue_state(items, state), {r["flow_key"] for r in adopted}

    def queue(self, items: Sequence[Waiter], now: datetime) -> None:
        """Put held work at the end of its key's queue (woken work back to its place)."""
        self._sql.run(
            "flow_queue_work",
            {
                "keys": [w.flow_key for w in items],
                "tenant_ids": [w.tenant_id for w in items],
                "works": [w.work for w in items],
                "run_ids": [w.run_id for w in items],
                "step_indexes": [w.step_index for w in items],
                "workflows": [w.workflow_name for w in items],
                "queued_at": [now] * len(items),
                "ranks": [now - timedelta(seconds=w.priority) for w in items],
            },
        )

    def admitted(self, items: Sequence[Waiter]) -> None:
        """Work that took its slot leaves its queue."""
        self._sql.run(
            "flow_admitted",
            {
                "keys": array_literal([w.flow_key for w in items]),
                "tenant_ids": array_literal([w.tenant_id for w in items]),
                "run_ids": array_literal([w.run_id for w in items]),
                "works": array_literal([w.work for w in items]),
            },
        )

    def park_pending(self, rows: Sequence[tuple[str, str, int]], never: datetime) -> None:
        """Held resumes' pending rows, (tenant, run, step) each, wait with no wake time."""
        self._sql.run(
            "flow_park_pending",
            {
                "tenant_ids": array_literal([t for t, _, _ in rows]),
                "run_ids": array_literal([r for _, r, _ in rows]),
                "step_indexes": array_literal([i for _, _, i in rows]),
                "never": never,
            },
        )

    def park_task(
        self,
        tenant_id: str,
        task_id: str,
        attempt: int,
        until: datetime,
        ticket: datetime | None,
    ) -> None:
        """A claimed attempt held back: pending again, uncounted, due at `until`."""
        self._sql.run(
            "flow_park_task",
            {
                "tenant_id": tenant_id,
                "task_id": task_id,
                "attempt": attempt,
                "until": until,
                "ticket": ticket,
            },
        )

    def next_turn(self, now: datetime) -> datetime | None:
        """The earliest throttle turn a waiting task attempt holds, after `now`."""
        row = self._sql.one("flow_next_turn", {"now": now})
        return None if row is None else row["turn"]

    def use_ticket(self, tenant_id: str, task_id: str) -> None:
        """A task's reserved throttle turn is used by the attempt claimed now."""
        self._sql.run("flow_use_ticket", {"tenant_id": tenant_id, "task_id": task_id})

    def drop_dead_waiters(self, key: str, limit: int) -> int:
        """Remove queued work that is gone, among the first `limit` of a key's queue (in
        the order it is woken); how many went."""
        return self._sql.run("flow_drop_dead_waiters", {"key": key, "limit": limit})

    def hand_over(
        self,
        key: str,
        slots: Sequence[int],
        wake: int,
        until: datetime,
        now: datetime,
        look: bool,
    ) -> list[Woken]:
        """Wake up to `wake` of a key's oldest queued work for the free `slots` (their
        row locks held): attempts get a slot handed over until `until` and are due now,
        passes (only in a `look`) are promised one. See flow_hand_over."""
        # The bound the plan reads (see flow_hand_over): the next power of two, so a
        # handful of prepared statements serve every size of wake.
        bound = 1 << (wake - 1).bit_length() if wake > 0 else 0
        rows = self._sql.all(
            f"flow_hand_over@{bound}",
            {
                "key": key,
                "slots": array_literal(list(slots)),
                "wake": wake,
                "until": until,
                "now": now,
                "look": look,
            },
        )
        return [Woken(_waiter(key, r), r["queued_at"], bool(r["handed"])) for r in rows]

    def time_head(self, key: str, at: datetime) -> None:
        """The safety timer of a key's first held work not woken: due at `at` at the
        latest (see flow_time_head)."""
        self._sql.run("flow_time_head", {"key": key, "at": at})

    def due_pending(self, rows: Sequence[Waiter], at: datetime) -> list[DueRow]:
        """Held resumes due at `at` (lease free); the rows that exist."""
        if not rows:
            return []
        found = self._sql.all(
            "flow_due_pending",
            {
                "tenant_ids": array_literal([w.tenant_id for w in rows]),
                "run_ids": array_literal([w.run_id for w in rows]),
                "step_indexes": array_literal([w.step_index for w in rows]),
                "at": at,
            },
        )
        return [DueRow(r["tenant_id"], r["run_id"], r["step_index"], r["wake_at"]) for r in found]

    # --- throttles, rate limits, singletons, debounces -----------------------------------

    def reserve_turn(self, spec: LimitSpec, now: datetime) -> datetime:
        """Reserve the next turn of a throttle key (its row locked until commit)."""
        row = self._sql.one(
            "flow_reserve_turn",
            {
                "key": spec.flow_key,
                "tenant_id": spec.tenant_id,
                "workflow": spec.workflow_name,
                "step": spec.step_key,
                "value": spec.key_value,
                "limit": spec.limit,
                "period_ms": spec.period_ms,
                "burst": spec.burst,
                "interval": timedelta(milliseconds=spec.period_ms) / spec.limit,
                "now": now,
            },
        )
        assert row is not None
        turn: datetime = row["turn"]
        return turn

    def lock_limit(self, spec: LimitSpec, kind: str, now: datetime) -> LockedLimit:
        """A rate limit's, singleton's or debounce's row (created on first use), locked
        until the transaction ends."""
        self._sql.run(
            "flow_lock_limit",
            {
                "key": spec.flow_key,
                "kind": kind,
                "tenant_id": spec.tenant_id,
                "workflow": spec.workflow_name,
                "value": spec.key_value,
                "limit": spec.limit,
                "period_ms": spec.period_ms,
                "now": now,
            },
        )
        row = self._sql.one("flow_read_locked", {"key": spec.flow_key, "tenant_id": spec.tenant_id})
        assert row is not None
        return LockedLimit(list(row["recent"] or []), row["run_id"], row["run_status"])

    def set_state(
        self, spec: LimitSpec, recent: Sequence[datetime], run_id: str | None, now: datetime
    ) -> None:
        """Record a locked row's admissions and latest run."""
        self._sql.run(
            "flow_set_state",
            {
                "key": spec.flow_key,
                "recent": list(recent),
                "run_id": run_id,
                "limit": spec.limit,
                "period_ms": spec.period_ms,
                "now": now,
            },
        )

    def record_skip(self, skipped: SkippedTrigger) -> None:
        """Record a trigger that started nothing (once per event and workflow)."""
        self._sql.run(
            "flow_record_skip",
            {
                "tenant_id": skipped.tenant_id,
                "event_id": skipped.event_id,
                "workflow": skipped.workflow_name,
                "reason": skipped.reason,
                "key": skipped.flow_key,
                "detail": skipped.detail,
                "run_id": skipped.run_id,
                "now": skipped.skipped_at,
            },
        )

    # --- cancel_on ---------------------------------------------------------------------------

    def add_cancel_keys(
        self,
        tenant_id: str,
        workflow: str,
        run_id: str,
        keys: Sequence[tuple[str, str]],
        now: datetime,
    ) -> None:
        """What may cancel a run starting now: (event type, match value) pairs."""
        self._sql.run(
            "flow_add_cancel_keys",
            {
                "tenant_id": tenant_id,
                "workflow": workflow,
                "run_id": run_id,
                "types": [t for t, _ in keys],
                "values": [v for _, v in keys],
                "now": now,
            },
        )

    def take_cancel_keys(
        self,
        tenant_id: str,
        event_type: str,
        value: str,
        workflow: str,
        since: datetime | None,
    ) -> list[str]:
        """The runs of `workflow` an `event_type` event with `value` names (started at
        or after `since`), their rows deleted."""
        rows = self._sql.all(
            "flow_take_cancel_keys",
            {
                "tenant_id": tenant_id,
                "event_type": event_type,
                "value": value,
                "workflow": workflow,
                "since": since,
            },
        )
        return [r["run_id"] for r in rows]


def _queue_params(items: Sequence[Waiter]) -> dict[str, Any]:
    return {
        "keys": array_literal([w.flow_key for w in items]),
        "tenant_ids": array_literal([w.tenant_id for w in items]),
        "run_ids": array_literal([w.run_id for w in items]),
        "works": array_literal([w.work for w in items]),
    }


def _queue_state(
    items: Sequence[Waiter], rows: list[dict[str, Any]]
) -> list[tuple[bool, bool | None]]:
    state: list[tuple[bool, bool | None]] = [(False, None)] * len(items)
    for row in rows:
        state[row["n"] - 1] = (bool(row["queued"]), row["mine"])
    return state


def _adopt_params(items: Sequence[Waiter], holder: str, until: datetime) -> dict[str, Any]:
    ordered = sorted(items, key=lambda w: w.flow_key)  # slot rows locked in key order
    return {
        "keys": array_literal([w.flow_key for w in ordered]),
        "handed": array_literal([w.handed_to for w in ordered]),
        "holder": holder,
        "until": until,
    }


def _waiter(key: str, row: dict[str, Any]) -> Waiter:
    return Waiter(
        key,
        row["tenant_id"],
        row["run_id"],
        row["step_index"],
        row["work"],
        row.get("workflow_name") or "",
    )
