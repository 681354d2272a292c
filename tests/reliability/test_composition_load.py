"""Composition under load (issue 30): worker threads and processes (projection, resume
batches, the worker's counting and starting of children) drive groups of parents that
share children — two maps over overlapping keys, two calls of a child that ends in its
first pass, a call attached to a start_workflow child, a call attached to a run an event
started, an unkeyed map — while an operator cancels some parents and, once the failing
dependency is fixed, redrives every parent that failed, all at once. Business time runs
at a minute per wall second on every worker.

At the end every run has settled: a parent completed with its children's results in
item order, or was cancelled; no parent failed for good; solo runs and start_workflow
children completed; and the join invariants hold (harness.check_joins)."""

from __future__ import annotations

import multiprocessing
import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import pytest
from workflow_runner import DomainEvent, run_id_for
from workflow_runner import engine as ops
from workflow_runner import stream as ev
from workflow_runner.engine.children import start_children
from workflow_runner.engine.joins import count_settled_children
from workflow_runner.engine.operator_actions import cancel_as_operator, redrive_as_operator
from workflow_runner.engine.redrive import RedriveRefused
from workflow_runner.engine.resume import ResumeRequestItem, resume_runs
from workflow_runner.errors import TransientStoreError
from workflow_runner.store import Store, connect

from tests.reliability import composition_scenario as scenario
from tests.reliability.harness import TENANT_A, check_invariants, check_joins, record

T0 = scenario.START
SPEED = 60.0  # business seconds per wall second


@dataclass(frozen=True)
class Load:
    groups: int
    threads: int
    processes: int
    seconds: float  # wall time the workers run

    @property
    def fixed_at(self) -> datetime:
        """The failing dependency works from then on (half-way)."""
        return T0 + timedelta(seconds=self.seconds * SPEED / 2)


def business_now(epoch: float) -> datetime:
    return T0 + timedelta(seconds=(time.time() - epoch) * SPEED)


# --- the workload ----------------------------------------------------------------------


def _part(key: str, n: int, rng: random.Random, fail_until: datetime | None = None) -> Any:
    item: dict[str, Any] = {"key": key, "n": n, "wait": f"PT{rng.randint(1, 3)}M"}
    if fail_until is not None:
        item["failUntil"] = fail_until.isoformat()
    return item


def group_events(g: int, load: Load, rng: random.Random) -> list[tuple[str, dict[str, Any]]]:
    """One group's parents, as (workflow, payload): two maps sharing keys g-2..g-4 (the
    first's g-0 fails until the fix), a start_workflow child a call attaches to, a run an
    event starts that a call attaches to, two calls of one child that ends at once, an
    unkeyed map whose second item fails until the fix."""
    flaky = load.fixed_at if g % 2 == 0 else None
    first = [_part(f"{g}-{i}", i, rng, flaky if i == 0 else None) for i in range(5)]
    second = [_part(f"{g}-{i}", i, rng) for i in range(2, 7)]
    launched = {"n": g, "wait": "PT3M"}
    batch = [{"n": i, "wait": "PT1M"} for i in range(4)]
    if flaky is not None:
        batch[1]["failUntil"] = flaky.isoformat()
    return [
        ("solo", {"id": f"s{g}"}),
        ("assemble", {"id": f"p{g}a", "items": first}),
        ("assemble", {"id": f"p{g}b", "items": second}),
        ("launch", {"id": f"l{g}", "key": f"launched-{g}", "input": launched}),
        ("call-part", {"id": f"c{g}", "key": f"launched-{g}", "input": launched}),
        ("call-solo", {"id": f"a{g}", "key": f"s{g}", "input": {}}),
        ("call-quick", {"id": f"q{g}a", "key": f"quick-{g}", "input": {"n": g}}),
        ("call-quick", {"id": f"q{g}b", "key": f"quick-{g}", "input": {"n": g}}),
        ("batch", {"id": f"b{g}", "items": batch}),
    ]


def expected_result(workflow: str, payload: dict[str, Any]) -> Any:
    """What a parent that completed returns."""
    if workflow in ("assemble", "batch"):
        return {"isSuccess": True, "parts": [{"n": i["n"] * 2} for i in payload["items"]]}
    if workflow == "call-part":
        return {"isSuccess": True, "c": {"n": payload["input"]["n"] * 2}}
    if workflow == "call-solo":
        return {"isSuccess": True, "c": {"solo": payload["key"]}}
    if workflow == "call-quick":
        return {"isSuccess": True, "c": {"n": payload["input"]["n"]}}
    if workflow == "launch":
        return {"isSuccess": True}
    return {"solo": payload["id"]}


# --- the actors --------------------------------------------------------------------------


def _worker(db_url: str, seed: int, epoch: float, stop_at: float) -> int:
    """Project, resume due runs in batches (as ResumeRun), count and start children (as
    the worker), until the deadline; returns the passes run."""
    registry = scenario.registry()
    rng = random.Random(seed)
    store = connect(db_url)
    passes = 0
    try:
        while time.time() < stop_at:
            try:
                now = business_now(epoch)
                ops.project_pending(store, now, batch_size=200, max_batches=1)
                rows = store.pending.due(TENANT_A, now, 30)
                rng.shuffle(rows)
                batch = [ResumeRequestItem(TENANT_A, r.run_id, r.step_index) for r in rows]
                for i in range(0, len(batch), 10):  # SQS batches
                    for result in resume_runs(store, batch[i : i + 10], now, registry):
                        passes += not isinstance(result, Exception)
                counted = count_settled_children(store, business_now(epoch))
                started = start_children(store, registry, business_now(epoch))
                if not (rows or counted or started.joins):
                    time.sleep(0.02)
            except TransientStoreError:
                continue  # a deadlock victim retries, as the queue would redeliver
    finally:
        store.close()
    return passes


def _process_worker(args: tuple[str, int, float, float]) -> int:
    return _worker(*args)


@dataclass
class Operator:
    """Feeds the groups, cancels some parents and redrives the failed ones, while the
    workers run."""

    db_url: str
    load: Load
    epoch: float
    stop_at: float
    rng: random.Random  # the feeder's
    redrive_rng: random.Random = field(default_factory=lambda: random.Random(31))
    payloads: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)  # by run
    cancelled: set[str] = field(default_factory=set)  # cancels that took effect
    redrives: int = 0
    redrives_while_working: int = 0  # of them, while the workers ran
    cancels_while_working: int = 0
    refusals: Counter[str] = field(default_factory=Counter)

    def feed(self, store: Store, g: int) -> None:
        registry = scenario.registry()
        for workflow, payload in group_events(g, self.load, self.rng):
            event = DomainEvent(
                id=f"ev-{workflow}-{payload['id']}",
                type=f"{workflow}.go",
                payload=payload,
                tenant_id=TENANT_A,
                time=business_now(self.epoch),
            )
            self.payloads[run_id_for(workflow, payload["id"])] = (workflow, payload)
            for _ in range(5):
                try:
                    ops.ingest_domain_event(store, event, business_now(self.epoch), registry)
                    break
                except TransientStoreError:
                    continue

    def cancel(self, store: Store, run_id: str) -> None:
        now = business_now(self.epoch)
        if cancel_as_operator(store, TENANT_A, run_id, now, scenario.OPERATOR).happened:
            self.cancelled.add(run_id)
            self.cancels_while_working += time.time() < self.stop_at

    def redrive_failed(self, store: Store, now: datetime) -> None:
        """Redrive the parents that failed (their failed children are redriven with them)."""
        registry = scenario.registry()
        failed = [
            r.run_id
            for r in store.runs.for_tenant(TENANT_A, status="failed", limit=10_000)
            if r.run_id in self.payloads
        ]
        self.redrive_rng.shuffle(failed)
        for run_id in failed:
            try:
                redrive_as_operator(store, TENANT_A, run_id, now, scenario.OPERATOR, registry)
                self.redrives += 1
            except RedriveRefused as refused:
                self.refusals[str(refused).split(":")[0]] += 1
            except TransientStoreError:
                continue

    def feed_and_cancel(self) -> None:
        """Groups arrive over the first half; every other one loses a parent to a cancel
        a little later. Goes on after the workers' deadline until every group is fed
        and every cancel sent (the drain finishes their runs)."""
        store = connect(self.db_url)
        try:
            half = self.load.seconds / 2
            to_cancel: list[tuple[float, str]] = []
            for g in range(self.load.groups):
                while time.time() - self.epoch < half * g / self.load.groups:
                    time.sleep(0.01)
                self.feed(store, g)
                if g % 2 == 0:
                    # The first is a call of an hour-long solo run: it surely still waits.
                    victim = self.rng.choice(["p{}a", "p{}b", "c{}", "a{}", "q{}a"]) if g else "a{}"
                    run_id = run_id_for(_WORKFLOW_OF[victim[0]], victim.format(g))
                    to_cancel.append((time.time() + self.rng.uniform(0.5, 4.0), run_id))
                for due in [c for c in to_cancel if c[0] <= time.time()]:
                    to_cancel.remove(due)
                    self.cancel(store, due[1])
            for at, run_id in to_cancel:
                time.sleep(max(0.0, at - time.time()))
                self.cancel(store, run_id)
        finally:
            store.close()

    def redrive_while_working(self) -> None:
        """From the fix to the workers' deadline, redrive the parents that failed."""
        store = connect(self.db_url)
        try:
            while time.time() < self.stop_at:
                now = business_now(self.epoch)
                if now >= self.load.fixed_at:
                    before = self.redrives
                    self.redrive_failed(store, now)
                    self.redrives_while_working += self.redrives - before
                time.sleep(0.1)
        finally:
            store.close()


_WORKFLOW_OF = {"p": "assemble", "c": "call-part", "a": "call-solo", "q": "call-quick"}


# --- the run -----------------------------------------------------------------------------


def _drain(store: Store, operator: Operator) -> None:
    """Let what is left run to its end on one worker, a day later (every timer due, the
    dependency fixed), redriving what failed, as an operator would after the fix."""
    registry = scenario.registry()
    later = T0 + timedelta(days=1)
    for _ in range(100):
        ops.project_pending(store, later)
        rows = store.pending.due(TENANT_A, later, 1000)
        batch = [ResumeRequestItem(TENANT_A, r.run_id, r.step_index) for r in rows]
        moved = len(rows)
        moved += count_settled_children(store, later)
        started = start_children(store, registry, later)
        moved += started.started + started.attached + started.unknown
        for i in range(0, len(batch), 10):
            resume_runs(store, batch[i : i + 10], later, registry)
        if not moved:
            before = operator.redrives
            operator.redrive_failed(store, later)
            if operator.redrives == before:
                ops.project_pending(store, later)
                return
    raise AssertionError("the runs did not come to rest")


def _run(db_url: str, load: Load) -> None:
    epoch = time.time()
    stop_at = epoch + load.seconds
    operator = Operator(db_url, load, epoch, stop_at, random.Random(30))
    actors = [
        threading.Thread(target=operator.feed_and_cancel),
        threading.Thread(target=operator.redrive_while_working),
    ]
    actors += [
        threading.Thread(target=_worker, args=(db_url, i, epoch, stop_at))
        for i in range(load.threads)
    ]
    for actor in actors:
        actor.start()
    if load.processes:
        ctx = multiprocessing.get_context("spawn")
        with ctx.Pool(load.processes) as pool:
            pool.map(
                _process_worker,
                [(db_url, 100 + i, epoch, stop_at) for i in range(load.processes)],
            )
    for actor in actors:
        actor.join()
    store = connect(db_url)
    try:
        _drain(store, operator)
        later = T0 + timedelta(days=1)
        registry = scenario.registry()
        assert check_invariants(store, registry) == []
        assert check_joins(store, registry, later) == []
        runs = {r.run_id: r for r in store.runs.for_tenant(TENANT_A, limit=100_000)}
        results = {
            r["run"]: r["result"]
            for r in store.conn.execute(
                "SELECT stream_id::text AS run, payload->'result' AS result FROM wf_events "
                "WHERE type = %s",
                (ev.RUN_COMPLETED,),
            ).fetchall()
        }
        assert len(operator.payloads) == load.groups * 9
        for run_id, (workflow, payload) in operator.payloads.items():
            want = "cancelled" if run_id in operator.cancelled else "completed"
            assert runs[run_id].status == want, (workflow, payload["id"], runs[run_id].status)
            if want == "completed":
                assert results[run_id] == expected_result(workflow, payload), (workflow, payload)
        for g in range(load.groups):
            for independent in (run_id_for("solo", f"s{g}"), run_id_for("part", f"launched-{g}")):
                assert runs[independent].status == "completed", independent
        shared = store.conn.execute(
            "SELECT count(*) AS n FROM (SELECT c.child_run_id FROM run_children c "
            "  JOIN wf_events s ON s.tenant_id = c.tenant_id AND s.stream_id = c.child_run_id "
            "  AND s.type = 'workflow.run-started' "
            "  GROUP BY c.tenant_id, c.child_run_id, s.payload "
            "  HAVING count(DISTINCT c.join_id) > 1 OR NOT s.payload ? 'parentRunId') x"
        ).fetchone()
        assert shared is not None and shared["n"] >= 5 * load.groups
        assert operator.redrives_while_working > 0, operator.redrives
        assert operator.cancels_while_working > 0, operator.cancelled
        record(
            runs_driven=len(runs),
            concurrent_workers=load.threads + load.processes + 1,
            shared_children_under_load=shared["n"],
            redrives_under_load=operator.redrives_while_working,
            cancels_under_load=operator.cancels_while_working,
        )
    finally:
        store.close()


def test_workers_drive_shared_children_through_cancels_and_redrives(db_url: str) -> None:
    _run(db_url, Load(groups=6, threads=2, processes=1, seconds=12.0))


@pytest.mark.soak
def test_many_parents_sharing_children_under_many_workers(db_url: str) -> None:
    _run(db_url, Load(groups=60, threads=3, processes=2, seconds=90.0))
