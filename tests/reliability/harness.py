"""The reliability suite's test bench: fault injection, a driver that plays AWS around
the real Lambda handlers, history normalisation, invariant checks and the figures file.

Faults are injected at *boundaries*: before and after every round trip a Store makes
(every store method ends in one call of its `Sql`; a pipeline of statements is one
round trip) and every port call (resume queue, mailer, HTTP, nudger). An injected
crash is a BaseException so no engine code can swallow it, the way a killed process
cannot be caught.
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

from workflow_runner import stream as ev
from workflow_runner.aws.inprocess import FakeLambdaContext, build_inprocess_runtime
from workflow_runner.clock import ManualClock
from workflow_runner.definition import WorkflowRegistry
from workflow_runner.errors import TransientStoreError
from workflow_runner.ports import HttpResponse, ResumeRequest, Runtime, set_runtime
from workflow_runner.settings import Settings
from workflow_runner.store import Sql, Store, connect
from workflow_runner.store.queries import queries

from tests.support import TENANT_A, TENANT_B, eventbridge, join_count_problems

__all__ = ["TENANT_A", "TENANT_B", "eventbridge"]

ROOT = Path(__file__).resolve().parents[2]
PUBLIC_ADDRESS = "93.184.215.14"  # a public address: nothing is ever connected to it

# --- figures for docs/RELIABILITY.md ---------------------------------------------------


def record(**counts: float) -> None:
    """Add to the run's figures (a JSON line per call, when WFR_RELIABILITY_STATS is set).

    Appending one short line is atomic enough for pytest-xdist workers sharing the file.
    """
    path = os.environ.get("WFR_RELIABILITY_STATS")
    if not path:
        return
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps(counts, separators=(",", ":")) + "\n")


# --- fault injection -------------------------------------------------------------------


class InjectedCrash(BaseException):
    """The process 'died' at a boundary."""


@dataclass
class FaultPlan:
    """Crash at boundary number `at` (1-based) in phase `phase`, or count only.

    Args:
        at: the boundary to crash at (None: never).
        phase: "before" (the statement or call does not happen) or "after" (it
            happened; its transaction, if any, is then rolled back by the crash).
    """

    at: int | None = None
    phase: str = "before"
    count: int = 0
    fired: str | None = None  # label of the boundary that crashed
    labels: list[str] = field(default_factory=list)
    keep_labels: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def hit(self, label: str, phase: str) -> None:
        if phase != "before":
            if self.fired is None and self.at == self.count and self.phase == "after":
                self.fired = f"after {label}"
                raise InjectedCrash(self.fired)
            return
        with self.lock:
            self.count += 1
            if self.keep_labels:
                self.labels.append(label)
        if self.fired is None and self.at == self.count and self.phase == "before":
            self.fired = f"before {label}"
            raise InjectedCrash(self.fired)


def one_point_per_boundary(
    plan: FaultPlan, rng: random.Random, kind: Callable[[str], str] = lambda label: label
) -> list[tuple[int, str]]:
    """Crash points covering every kind of boundary a counted run met: for each kind
    (`kind(label)`, in the order first met) one of its boundaries, chosen by `rng`, in
    both phases."""
    by_kind: dict[str, list[int]] = {}
    for index, label in enumerate(plan.labels, start=1):
        by_kind.setdefault(kind(label), []).append(index)
    return [(rng.choice(ix), phase) for ix in by_kind.values() for phase in ("before", "after")]


@cache
def _query_names() -> dict[str, str]:
    return {text: name for name, text in queries().items()}


def faulty_sql(plan: FaultPlan) -> type[Sql]:
    """An Sql whose every round trip is a fault boundary of `plan`: a statement sent
    alone (all / one / run), or the statements `send`, `batch` and `deferred` send
    together in one pipeline (labelled with their names joined by "+"). A statement
    `deferred` holds back is no boundary of its own: it goes out with the next one."""

    class FaultySql(Sql):
        def _around(self, name: str, run: Callable[[], Any]) -> Any:
            plan.hit(f"sql:{name}", "before")
            result = run()
            plan.hit(f"sql:{name}", "after")
            return result

        def all(self, name: str, params: dict[str, Any]) -> list[dict[str, Any]]:
            if self._queue:  # goes out with what is held back, through _send
                return Sql.all(self, name, params)
            return self._around(name, lambda: Sql.all(self, name, params))  # type: ignore[no-any-return]

        def one(self, name: str, params: dict[str, Any]) -> dict[str, Any] | None:
            if self._queue:
                return Sql.one(self, name, params)
            return self._around(name, lambda: Sql.one(self, name, params))  # type: ignore[no-any-return]

        def run(self, name: str, params: dict[str, Any]) -> int:
            if self._queue is not None:  # held back: no round trip yet
                return Sql.run(self, name, params)
            return self._around(name, lambda: Sql.run(self, name, params))  # type: ignore[no-any-return]

        def _send(self, statements: Sequence[Any]) -> None:
            if not statements:
                return
            names = "+".join(_query_names().get(s.sql, "?") for s in statements)
            self._around(names, lambda: Sql._send(self, statements))

    return FaultySql


class _FaultyPort:
    """Wraps a port object: each listed method call is a fault boundary."""

    def __init__(self, inner: Any, plan: FaultPlan, name: str, methods: Sequence[str]) -> None:
        self._inner = inner
        self._plan = plan
        for method in methods:
            setattr(self, method, self._wrap(f"{name}.{method}", getattr(inner, method)))

    def _wrap(self, label: str, call: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            self._plan.hit(label, "before")
            result = call(*args, **kwargs)
            self._plan.hit(label, "after")
            return result

        return wrapped

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


# --- the Lambda handlers -----------------------------------------------------------------

_HANDLERS: dict[str, ModuleType] = {}


def handler(name: str) -> Callable[[Any, Any], Any]:
    """functions/<name>/app.py's handler (each app.py imported once, under its own name)."""
    module = _HANDLERS.get(name)
    if module is None:
        path = ROOT / "functions" / name / "app.py"
        spec = importlib.util.spec_from_file_location(f"wfr_fn_{name}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _HANDLERS[name] = module
    return module.handler  # type: ignore[no-any-return]


@dataclass
class Delivery:
    """One EventBridge input for TriggerProjection or EventWakeup."""

    target: str  # "trigger_projection" | "event_wakeup"
    event: dict[str, Any]


@dataclass
class DriverStats:
    invocations: Counter[str] = field(default_factory=Counter)
    crashes: int = 0
    redeliveries: int = 0
    duplicate_messages: int = 0


class Driver:
    """Plays AWS around the real handlers on one database and a manual clock.

    EventBridge inputs are retried after a crash (Lambda async retries); resume
    messages whose batch crashed come back after the visibility timeout (SQS); the
    scheduled functions run on every tick. A crash also loses the connection (the
    process is gone), so the next invocation connects afresh.
    """

    VISIBILITY = timedelta(seconds=180)

    def __init__(
        self,
        db_url: str,
        registry: WorkflowRegistry,
        clock: ManualClock,
        plan: FaultPlan | None = None,
        http_status: Callable[[Any], HttpResponse] | None = None,
    ) -> None:
        self.db_url = db_url
        self.registry = registry
        self.clock = clock
        self.plan = plan or FaultPlan()
        self._store: Store | None = None
        self.monitor = connect(db_url)
        self.stats = DriverStats()
        settings = Settings(
            database_url=db_url, mail_sender="noreply@example.com", resume_lease_seconds=1200
        )
        self.rt: Runtime = build_inprocess_runtime(
            self.store,
            clock,
            settings=settings,
            webhook_resolver=lambda host, port: [PUBLIC_ADDRESS],
            registry=registry,
        )
        if http_status is not None:
            self.rt.http.respond = http_status  # type: ignore[attr-defined]
        self.queue = self.rt.resume_queue
        self.mailer = self.rt.mailer
        self.http = self.rt.http
        self.rt.resume_queue = _FaultyPort(self.queue, self.plan, "sqs", ["send"])
        self.rt.mailer = _FaultyPort(self.mailer, self.plan, "ses", ["send_mail"])
        self.rt.http = _FaultyPort(self.http, self.plan, "https", ["send"])
        self.rt.nudger = _FaultyPort(
            self.rt.nudger, self.plan, "lambda", ["nudge_projection", "nudge_dispatcher"]
        )
        self.inputs: list[Delivery] = []

    # connections -------------------------------------------------------------------

    def store(self) -> Store:
        if self._store is None or self._store.closed:
            self._store = connect(self.db_url, sql_type=faulty_sql(self.plan))
        return self._store

    def _crashed(self) -> None:
        self.stats.crashes += 1
        if self._store is not None:
            self._store.close()
        self._store = None

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
        self.monitor.close()
        set_runtime(None)

    # invocations -------------------------------------------------------------------

    def invoke(self, name: str, event: Any) -> Any:
        set_runtime(self.rt)
        self.stats.invocations[name] += 1
        return handler(name)(event, FakeLambdaContext())

    def send(self, target: str, event: dict[str, Any], copies: int = 1) -> None:
        """Queue an EventBridge input (delivered `copies` times) for the next tick."""
        for _ in range(copies):
            self.inputs.append(Delivery(target, event))
        self.stats.duplicate_messages += copies - 1

    def deliver_inputs(self, rng: random.Random | None = None) -> None:
        pending = self.inputs
        self.inputs = []
        if rng is not None:
            rng.shuffle(pending)
        while pending:
            delivery = pending.pop(0)
            try:
                self.invoke(delivery.target, delivery.event)
            except (InjectedCrash, TransientStoreError):
                self._crashed()
                self.stats.redeliveries += 1
                pending.append(delivery)

    def _scheduled(self, name: str) -> None:
        try:
            self.invoke(name, {"source": "aws.events", "detail-type": "Scheduled Event"})
        except (InjectedCrash, TransientStoreError):
            self._crashed()

    def drain_queue(self, rng: random.Random | None = None, duplicate: float = 0.0) -> None:
        for _ in range(20_000):
            if len(self.queue) > 20_000:
                raise AssertionError(f"resume queue keeps growing ({len(self.queue)} messages)")
            batch = self.queue.receive(10)
            if not batch:
                return
            if rng is not None and duplicate:
                # SQS is at-least-once: some messages arrive again, in any order.
                extra = [r for r in batch if rng.random() < duplicate]
                batch = batch + extra
                self.stats.duplicate_messages += len(extra)
                rng.shuffle(batch)
            try:
                reply = self.invoke("resume_run", self.queue.sqs_event(batch))
            except (InjectedCrash, TransientStoreError):
                self._crashed()
                self._return(batch)
                continue
            failed = {f["itemIdentifier"] for f in reply.get("batchItemFailures", [])}
            back = [r for i, r in enumerate(batch) if f"m-{i}-{r.run_id}" in failed]
            self._return(back)
        raise AssertionError("the resume queue never drained (a livelock would be a finding)")

    def _return(self, requests: Sequence[ResumeRequest]) -> None:
        """Messages not acknowledged become visible again after the visibility timeout."""
        if not requests:
            return
        self.stats.redeliveries += len(requests)
        delay = int(self.VISIBILITY.total_seconds())
        for request in requests:
            self.queue.send(
                [
                    ResumeRequest(
                        request.tenant_id,
                        request.run_id,
                        request.step_index,
                        delay,
                        request.wake_at,
                        request.force,
                    )
                ]
            )

    def tick(self, rng: random.Random | None = None, duplicate: float = 0.0) -> None:
        """One round of everything AWS would run at this instant."""
        self.deliver_inputs(rng)
        self._scheduled("pending_projection")
        self._scheduled("due_scan")
        self.drain_queue(rng, duplicate)
        self._scheduled("pending_projection")
        self._scheduled("step_dispatcher")

    # time ---------------------------------------------------------------------------

    def next_instant(self) -> datetime | None:
        """The next instant anything becomes due (a timer, a lease end, a message)."""
        conn = self.monitor.conn
        row = conn.execute(
            "SELECT least("
            " (SELECT min(greatest(wake_at, coalesce(leased_until, wake_at)))"
            "    FROM workflow_run_pending),"
            " (SELECT min(greatest(next_attempt_at, coalesce(leased_until, next_attempt_at)))"
            "    FROM dispatch_outbox WHERE status = 'pending')) AS at"
        ).fetchone()
        candidates = [t for t in (row["at"] if row else None, self.queue.next_visible_at()) if t]
        return min(candidates) if candidates else None

    def run_until(
        self, end: datetime, rng: random.Random | None = None, duplicate: float = 0.0
    ) -> None:
        """Tick at every instant something is due, up to `end` (then tick at `end`).

        Cron triggers fire at 09:00 each day, so a tick is also placed there.
        """
        self.tick(rng, duplicate)
        again = True
        for _ in range(10_000):
            now = self.clock.now()
            nxt = self.next_instant()
            cron = (now + timedelta(days=1)).replace(hour=9, minute=0, second=0, microsecond=0)
            if now.hour < 9:
                cron = now.replace(hour=9, minute=0, second=0, microsecond=0)
            target = min(t for t in (nxt, cron, end) if t is not None)
            if target <= now and again:
                # Due at this very instant: what the tick's own last steps queued (the
                # projection's look-back hands a match to the queue after the tick drained
                # it). AWS runs it within milliseconds; a second later would move every
                # instant its pass sets (the next wait's timeout) a second too.
                again = False
                self.tick(rng, duplicate)
                continue
            again = True
            if target <= now:
                target = now + timedelta(seconds=1)
            if target > end:
                break
            self.clock.set(target)
            self.tick(rng, duplicate)
            if target == end:
                break
        else:  # pragma: no cover - a livelock would be a finding
            raise AssertionError("the driver did not reach the end instant")

    def busy(self) -> bool:
        """Anything left to do: an unsettled run, an undelivered request, a message."""
        row = self.monitor.conn.execute(
            "SELECT (SELECT count(*) FROM workflow_runs"
            "        WHERE status NOT IN ('completed', 'failed', 'cancelled'))"
            "     + (SELECT count(*) FROM dispatch_outbox WHERE status = 'pending') AS n"
        ).fetchone()
        return bool(self.inputs) or len(self.queue) > 0 or bool(row and row["n"])

    def recover(self, limit: int = 50, at_least: int = 3) -> None:
        """Keep ticking (as the schedules would) until nothing is left to do.

        The first few ticks always run: a crashed due scan leaves no trace to be
        busy about (a cron instant not started yet), only the next scan repairs it.
        """
        for n in range(limit):
            if n >= at_least and not self.busy():
                return
            now = self.clock.now()
            nxt = self.next_instant()
            self.clock.set(max(now + timedelta(minutes=1), nxt or now))
            self.tick()
        raise AssertionError("the driver did not settle: something is stranded")


# --- histories and invariants ----------------------------------------------------------

# Instants that depend on when a pass ran (a crash delays it), not on what it did.
_TIME_KEYS = frozenset({"wakeAt", "timeoutAt", "lookbackFrom", "retryAt", "firstCheckAt"})
# A crash costs a delivery an attempt (its lease runs out): which attempt delivered a
# request depends on the crashes, not on what was delivered.
_DISPATCH_CRASH_KEYS = _TIME_KEYS | {"attempt"}
# The same holds for a task: a crashed worker's attempt is recorded as lost, then retried.
_TASK_FACTS = frozenset({ev.TASK_ATTEMPT_FAILED, ev.TASK_COMPLETED, ev.TASK_FAILED})
LOST_ATTEMPT = "TaskLeaseExpired"


def _strip(value: Any, keys: frozenset[str] = _TIME_KEYS) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v, keys) for k, v in sorted(value.items()) if k not in keys}
    if isinstance(value, list):
        return [_strip(v, keys) for v in value]
    return value


def histories(store: Store) -> dict[tuple[str, str], list[tuple[str, Any]]]:
    """Every stream as (type, payload without pass-time instants), keyed by (tenant, id)."""
    rows = store.conn.execute(
        "SELECT tenant_id::text AS t, stream_id::text AS s, stream_type, type, payload "
        "FROM wf_events ORDER BY tenant_id, stream_id, version"
    ).fetchall()
    out: dict[tuple[str, str], list[tuple[str, Any]]] = {}
    for r in rows:
        if r["type"] == ev.TASK_ATTEMPT_FAILED and r["payload"].get("errorClass") == LOST_ATTEMPT:
            continue  # a crash cut the attempt off; its lease ran out and it was retried
        if r["stream_type"] == ev.DISPATCH_STREAM or r["type"] in _TASK_FACTS:
            keys = _DISPATCH_CRASH_KEYS
        else:
            keys = _TIME_KEYS
        out.setdefault((r["t"], r["s"]), []).append((r["type"], _strip(r["payload"], keys)))
    return out


def ambiguous_mail(history: list[tuple[str, Any]]) -> bool:
    """A mail request that ended ambiguous: its send was cut off by a crash, and mail is
    sent at most once (engine/dispatcher.py)."""
    final_type, final = history[-1]
    return (
        final_type == ev.DISPATCH_FAILED
        and final.get("stepKind") == "mail.send"
        and final.get("reason") == "ambiguous"
    )


def check_invariants(store: Store, registry: WorkflowRegistry) -> list[str]:
    """Doctor-style checks; returns the problems found (empty: all hold).

    Uses `workflow_runner.engine.doctor` (what `wfr doctor` runs) for stranded runs and stale
    pending rows, and checks what it does not: one `resumed` per suspension, every
    stream's versions gap-free, the summary table agreeing with the streams, one outbox
    row per dispatch stream.
    """
    from workflow_runner.engine.doctor import check_settled_pending, check_unsettled_runs

    problems: list[str] = []
    for check in (check_unsettled_runs(store, None), check_settled_pending(store, None)):
        if check.status != "ok":
            problems.append(f"doctor: {check.summary}: {check.items[:5]}")
    conn = store.conn
    for r in conn.execute(
        "SELECT tenant_id, stream_id, (payload->>'suspensionVersion')::int AS sv, count(*) AS n "
        "FROM wf_events WHERE type = %s GROUP BY 1, 2, 3 HAVING count(*) > 1",
        (ev.STEP_RESUMED,),
    ).fetchall():
        problems.append(f"suspension resumed {r['n']} times: {r}")
    for r in conn.execute(
        "SELECT tenant_id, stream_id, count(*) AS n, max(version) AS v FROM wf_events "
        "GROUP BY 1, 2 HAVING count(*) <> max(version)"
    ).fetchall():
        problems.append(f"stream versions have gaps: {r}")
    for r in conn.execute(
        "SELECT r.tenant_id, r.run_id, r.status, r.version FROM workflow_runs r "
        "WHERE r.version <> (SELECT max(version) FROM wf_events e "
        "  WHERE e.tenant_id = r.tenant_id AND e.stream_id = r.run_id)"
    ).fetchall():
        problems.append(f"run summary behind its stream: {r}")
    for r in conn.execute(
        "SELECT e.tenant_id, e.stream_id FROM wf_events e WHERE e.type = %s AND NOT EXISTS "
        "(SELECT 1 FROM dispatch_outbox o WHERE o.tenant_id = e.tenant_id "
        " AND o.request_id = e.stream_id)",
        (ev.DISPATCH_REQUESTED,),
    ).fetchall():
        problems.append(f"dispatch requested without an outbox row: {r}")
    return problems


# What check_joins reports, by invariant (the report's "must never happen" rows).
STARTED_TWICE = "child started twice"
NOT_COUNTED = "settled child not counted by a join"
WAITS_ON_SETTLED = "parent waits on a settled child"
CANCELLED_OWNED = "run cancelled while another owner waited"


def check_joins(store: Store, registry: WorkflowRegistry, now: datetime) -> list[str]:
    """The join protocol's invariants on a database at rest; returns the problems found,
    each starting with the invariant it breaks (empty: all hold).

    - no child run is started twice: one `run-started` per stream, and every run a
      parent started is one some join names;
    - every settled child is counted exactly once by each of its joins: no row left
      running behind a settled run or settled and not counted, and each join's
      counters say what its rows say;
    - no parent waits on a settled child: an open call or map join whose children
      all settled (or one failed, not caught) has told its parent;
    - no run another owner waited for is cancelled by a parent's end: no waiting parent
      was told of a child cancelled that way, and a run an event or a start_workflow
      started is never cancelled that way;
    - `wfr doctor`'s checks (engine.doctor.run_doctor) are all ok, but for the template's
      routes, which the driver stands in for.
    """
    from workflow_runner.engine.doctor import run_doctor
    from workflow_runner.engine.joins import PARENT_ENDED

    conn = store.conn
    problems: list[str] = []
    for r in conn.execute(
        "SELECT stream_id::text AS run, count(*) AS n FROM wf_events WHERE type = %s "
        "GROUP BY tenant_id, stream_id HAVING count(*) > 1",
        (ev.RUN_STARTED,),
    ).fetchall():
        problems.append(f"{STARTED_TWICE}: {r}")
    for r in conn.execute(
        "SELECT e.stream_id::text AS run, e.payload->>'workflowName' AS workflow "
        "FROM wf_events e WHERE e.type = %s AND e.payload ? 'parentRunId' AND NOT EXISTS "
        "(SELECT 1 FROM run_children c WHERE c.tenant_id = e.tenant_id "
        " AND c.child_run_id = e.stream_id)",
        (ev.RUN_STARTED,),
    ).fetchall():
        problems.append(f"{STARTED_TWICE}: a child run no join names: {r}")
    problems += [f"{NOT_COUNTED}: {p}" for p in join_count_problems(store)]
    for r in conn.execute(
        "SELECT j.join_id::text AS join_id, j.parent_run_id::text AS parent, j.settled, "
        "       j.failed, j.total "
        "FROM run_joins j JOIN workflow_runs p "
        "  ON p.tenant_id = j.tenant_id AND p.run_id = j.parent_run_id "
        "WHERE j.kind <> 'start' AND j.closed_at IS NULL AND j.notified_at IS NULL "
        "  AND p.status NOT IN ('completed', 'failed', 'cancelled') "
        "  AND (j.settled >= j.total OR (j.failed > 0 AND NOT j.catch))"
    ).fetchall():
        problems.append(f"{WAITS_ON_SETTLED}: {r}")
    cancelled = (
        "SELECT tenant_id, stream_id, recorded_at FROM wf_events "
        "WHERE type = %(cancelled)s AND payload->>'reason' = %(ended)s"
    )
    params = {"cancelled": ev.RUN_CANCELLED, "ended": PARENT_ENDED, "settled": ev.CHILDREN_SETTLED}
    for r in conn.execute(
        f"WITH x AS ({cancelled}) "
        "SELECT e.stream_id::text AS parent, e.payload->>'childRunId' AS child "
        "FROM wf_events e JOIN x ON x.tenant_id = e.tenant_id "
        "  AND x.stream_id::text = e.payload->>'childRunId' "
        "JOIN run_joins j ON j.tenant_id = e.tenant_id "
        "  AND j.join_id::text = e.payload->>'joinId' "
        "WHERE e.type = %(settled)s AND e.payload->>'reason' = 'cancelled' "
        "  AND j.created_at <= x.recorded_at",
        params,
    ).fetchall():
        problems.append(f"{CANCELLED_OWNED}: its parent was told: {r}")
    for r in conn.execute(
        f"WITH x AS ({cancelled}) "
        "SELECT x.stream_id::text AS run FROM x JOIN wf_events s "
        "  ON s.tenant_id = x.tenant_id AND s.stream_id = x.stream_id "
        "  AND s.type = %(started)s "
        "WHERE NOT s.payload ? 'parentRunId' OR EXISTS (SELECT 1 FROM run_children c "
        "  JOIN run_joins j ON j.tenant_id = c.tenant_id AND j.join_id = c.join_id "
        "  WHERE c.tenant_id = x.tenant_id AND c.child_run_id = x.stream_id "
        "  AND j.kind = 'start')",
        {**params, "started": ev.RUN_STARTED},
    ).fetchall():
        problems.append(f"{CANCELLED_OWNED}: an event or a start_workflow owned it: {r}")
    for check in run_doctor(store, registry, now=now).checks:
        if check.status != "ok" and not check.name.startswith("template routes"):
            problems.append(f"doctor: {check.name}: {check.summary}: {check.items[:5]}")
    return problems


def delivered_effects(driver: Driver) -> dict[str, int]:
    """Request id -> how often the receivers got it (mail and webhooks)."""
    counts: Counter[str] = Counter(m.request_id for m in driver.mailer.sent)  # type: ignore[attr-defined]
    for request in driver.http.requests:  # type: ignore[attr-defined]
        counts[request.headers["idempotency-key"]] += 1
    return dict(counts)


def requests_per_effect(driver: Driver) -> dict[tuple[str, str, str], set[str]]:
    """(tenant, run, step path) of each delivered request -> the request ids it went out as."""
    delivered = set(delivered_effects(driver))
    rows = driver.monitor.conn.execute(
        "SELECT tenant_id::text AS t, stream_id::text AS id, payload FROM wf_events "
        "WHERE type = %s",
        (ev.DISPATCH_REQUESTED,),
    ).fetchall()
    out: dict[tuple[str, str, str], set[str]] = {}
    for r in rows:
        if r["id"] in delivered:
            p = r["payload"]
            key = (r["t"], p["runId"], json.dumps(p["path"], sort_keys=True))
            out.setdefault(key, set()).add(r["id"])
    return out


def table_texts(store: Store) -> dict[str, list[str]]:
    """Every row of every table of the public schema, as text (for leak searches)."""
    conn = store.conn
    tables = [
        r["tablename"]
        for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
        ).fetchall()
    ]
    out: dict[str, list[str]] = {}
    for table in tables:
        rows = conn.execute(f'SELECT t::text AS row FROM "{table}" t').fetchall()
        out[table] = [r["row"] for r in rows]
    return out


def find_text(store: Store, needle: str) -> list[str]:
    """Tables (and a row excerpt) whose text contains `needle`."""
    hits = []
    for table, rows in table_texts(store).items():
        for row in rows:
            if needle in row:
                hits.append(f"{table}: {row[:200]}")
    return hits
