"""A deterministic interleaving harness for two engine operations on real PostgreSQL.

Each operation runs in its own thread on its own connection. Its connection stops it
at a gate before every round trip it sends (a statement, or a pipeline of them) and
before every commit, and waits until the harness lets it take the next step. A
schedule says how many steps the first operation takes before the second runs to its
end; the first then finishes. Over every split point, in both orders, each pair of
round trips of the two operations runs once in each order: the first operation's
step k before all of the second's, then after (`explore` in the tests).

A step that waits for a row lock the other operation holds cannot finish while that
operation stands at a gate: the harness sees it waiting (pg_stat_activity says Lock)
and lets the other one go on, so the order the locks impose is the order that runs.
Two operations that both wait on each other are a deadlock, which PostgreSQL breaks
(deadlock_timeout is set low on their sessions): the victim's error is what the
operation raises, and a test that says "no deadlock" checks for it.

`explore` runs every schedule of two operations, each on its own copy of a prepared
database (`Lab`), and checks each outcome.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import psycopg
from psycopg.rows import dict_row
from workflow_runner.embedded import database_url
from workflow_runner.store import Store, connect
from workflow_runner.store.queries import queries

Operation = Callable[[Store], Any]

# How long an operation may take to reach its next gate before the harness calls it
# stuck (it is neither waiting for a lock nor running).
_STEP_TIMEOUT_S = 30.0
_POLL_S = 0.002


class _GatedConnection:
    """A psycopg connection that stops at a gate before each round trip it sends and
    before it commits (the outermost transaction only)."""

    def __init__(self, conn: psycopg.Connection[dict[str, Any]], gate: Callable[[str], None]):
        self._conn = conn
        self._gate = gate
        self._pipelined = 0
        self._depth = 0

    def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
        if not self._pipelined:
            self._gate(_label(query))
        return self._conn.execute(query, params, **kwargs)

    @contextmanager
    def pipeline(self) -> Iterator[Any]:
        self._gate("pipeline")
        self._pipelined += 1
        try:
            with self._conn.pipeline() as pipeline:
                yield pipeline
        finally:
            self._pipelined -= 1

    @contextmanager
    def transaction(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
        self._depth += 1
        try:
            with self._conn.transaction(*args, **kwargs) as tx:
                yield tx
                if self._depth == 1:
                    self._gate("COMMIT")
        finally:
            self._depth -= 1

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


def _label(query: Any) -> str:
    """The query's name (the engine's statements are named), else its first words."""
    text = query if isinstance(query, str) else str(query)
    return _query_names().get(text) or " ".join(text.split())[:40]


@cache
def _query_names() -> dict[str, str]:
    return {sql: name for name, sql in queries().items()}


@dataclass
class Actor:
    """One operation on its own connection and thread, stepped gate by gate."""

    name: str
    store: Store
    pid: int
    operation: Operation
    labels: list[str] = field(default_factory=list)  # the gates it passed, in order
    result: Any = None
    error: BaseException | None = None
    done: bool = False
    _go: threading.Semaphore = field(default_factory=lambda: threading.Semaphore(0))
    _arrived: threading.Semaphore = field(default_factory=lambda: threading.Semaphore(0))
    _thread: threading.Thread | None = None
    in_flight: bool = False  # let go and not at a gate yet

    def gate(self, label: str) -> None:
        self.labels.append(label)
        self._arrived.release()
        self._go.acquire()

    def start(self) -> None:
        def body() -> None:
            self._go.acquire()
            try:
                self.result = self.operation(self.store)
            except BaseException as error:  # reported, not raised in the thread
                self.error = error
            finally:
                self.done = True
                self._arrived.release()

        self._thread = threading.Thread(target=body, name=f"actor-{self.name}", daemon=True)
        self._thread.start()

    def close(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            self._go.release()
            self._thread.join(timeout=5)
        self.store.close()


@dataclass(frozen=True)
class Schedule:
    first: int  # 0: A goes first, 1: B
    steps: int  # the steps the first takes before the other runs to its end

    def __str__(self) -> str:
        return f"{'AB'[self.first]} {self.steps} step(s), then {'BA'[self.first]}"


@dataclass
class Run:
    """What one schedule did."""

    schedule: Schedule
    trace: list[str]
    ended_first: bool  # the first actor ended within its steps
    actors: list[Actor]

    @property
    def errors(self) -> dict[str, BaseException]:
        return {a.name: a.error for a in self.actors if a.error is not None}

    def describe(self) -> str:
        return f"schedule {self.schedule}: {' '.join(self.trace)}"


class Interleaving:
    """Run two operations in the order a schedule gives (see the module's docstring)."""

    def __init__(self, url: str, first: Operation, second: Operation) -> None:
        self._url = url
        self._observer = psycopg.connect(url, autocommit=True, row_factory=dict_row)
        self.actors = [self._actor("A", first), self._actor("B", second)]

    def _actor(self, name: str, operation: Operation) -> Actor:
        store = connect(self._url)
        store.conn.execute("SET deadlock_timeout = '200ms'")
        actor = Actor(name, store, store.conn.info.backend_pid, operation)
        # The engine's stores read the connection through Sql; gate what they send.
        gated = _GatedConnection(store.conn, actor.gate)
        store._conn = gated  # type: ignore[assignment]
        store._sql.conn = gated  # type: ignore[assignment]
        return actor

    def _waits_for_lock(self, actor: Actor) -> bool:
        row = self._observer.execute(
            "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (actor.pid,)
        ).fetchone()
        return row is not None and row["wait_event_type"] == "Lock"

    def _step(self, actor: Actor) -> str:
        """Let `actor` run to its next gate: `arrived`, `done`, or `blocked` (it waits
        for a lock; it arrives later, when the other one lets the lock go)."""
        if actor.done:
            return "done"
        if not actor.in_flight:
            actor.in_flight = True
            actor._go.release()
        return self._await(actor, timeout=_STEP_TIMEOUT_S)

    def _await(self, actor: Actor, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while True:
            if actor._arrived.acquire(timeout=_POLL_S):
                actor.in_flight = False
                return "done" if actor.done else "arrived"
            if self._waits_for_lock(actor):
                return "blocked"
            if time.monotonic() > deadline:
                raise TimeoutError(f"operation {actor.name} is stuck after {actor.labels}")

    def run(self, schedule: Schedule) -> Run:
        """Actor `schedule.first` (0: A, 1: B) takes `schedule.steps` steps, then the
        other runs to its end, then the first finishes; a blocked actor hands the turn
        over. Returns the trace and whether the first ended within its steps (a longer
        split of the same order would only repeat this schedule)."""
        a, b = self.actors[schedule.first], self.actors[1 - schedule.first]
        for actor in self.actors:
            actor.start()
        trace: list[str] = []
        try:
            for _ in range(schedule.steps):
                self._advance(a, trace)
            ended_first = a.done
            self._finish(b, trace)
            self._finish(a, trace)
        finally:
            for actor in self.actors:
                actor.close()
            self._observer.close()
        return Run(schedule, trace, ended_first, self.actors)

    def _advance(self, actor: Actor, trace: list[str]) -> None:
        other = self.actors[1] if actor is self.actors[0] else self.actors[0]
        outcome = self._step(actor)
        if outcome == "blocked":
            # The lock it waits for is the other's: the other goes on until it lets go.
            while not actor.done and self._await_or_help(actor, other, trace):
                pass
        self._note(actor, trace)

    def _await_or_help(self, actor: Actor, other: Actor, trace: list[str]) -> bool:
        """While `actor` waits for a lock, step `other`; True while `actor` still waits."""
        if actor._arrived.acquire(timeout=_POLL_S):
            actor.in_flight = False
            return False
        if other.done or other.in_flight:
            # Both wait: PostgreSQL breaks the deadlock within deadlock_timeout.
            return True
        self._step(other)
        self._note(other, trace)
        return True

    def _finish(self, actor: Actor, trace: list[str]) -> None:
        while not actor.done:
            self._advance(actor, trace)

    @staticmethod
    def _note(actor: Actor, trace: list[str]) -> None:
        """Trace the round trip the actor's step sent: the gate before the one it
        stands at now (its first step only reaches its first gate)."""
        passed = actor.labels if actor.done else actor.labels[:-1]
        trace.append(f"{actor.name}:{passed[-1] if passed else 'start'}")
        if actor.done:
            trace.append(f"{actor.name}:end")


# --- a database per schedule, copied from one prepared state ----------------------------


@dataclass
class Lab:
    """Databases copied from a template on one server (the session's migrated one)."""

    admin_url: str
    template: str

    def database(self, template: str | None = None) -> str:
        name = f"wfr_i_{uuid.uuid4().hex[:16]}"
        with psycopg.connect(self.admin_url, autocommit=True) as admin:
            admin.execute(
                f'CREATE DATABASE "{name}" TEMPLATE "{template or self.template}" '
                "STRATEGY FILE_COPY"
            )
        return name

    def drop(self, name: str) -> None:
        with psycopg.connect(self.admin_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def url(self, name: str) -> str:
        return database_url(self.admin_url, name)


Check = Callable[[Store, Run], None]


def explore(
    lab: Lab,
    setup: Callable[[Store], None],
    first: Operation,
    second: Operation,
    check: Check,
) -> int:
    """Run `first` and `second` in every split order on copies of the state `setup`
    makes, and `check` each outcome. Returns the schedules run."""
    prepared = lab.database()
    try:
        store = connect(lab.url(prepared))
        try:
            setup(store)
        finally:
            store.close()
        schedules = 0
        for order in (0, 1):
            steps = 0
            while True:
                name = lab.database(prepared)
                try:
                    run = Interleaving(lab.url(name), first, second).run(Schedule(order, steps))
                    schedules += 1
                    store = connect(lab.url(name))
                    try:
                        check(store, run)
                    except AssertionError as error:
                        raise AssertionError(f"{run.describe()}\n{error}") from error
                    finally:
                        store.close()
                finally:
                    lab.drop(name)
                if run.ended_first:
                    break
                steps += 1
        return schedules
    finally:
        lab.drop(prepared)
