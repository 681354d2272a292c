"""An in-process copy of the deployed pipeline for the benchmarks.

Trigger ingestion, the pending projection, the due scan, a delayed resume queue and
the resume workers run as threads of one process, each thread with its own database
connection, calling the same engine operations the Lambda handlers call. The delayed
queue honours `delay_seconds` in whole seconds, as SQS does, so timer lateness is
measured with the deployed design's rounding; the workers hold requests that arrive
up to `hold` seconds early until due, as ResumeRun does (RESUME_HOLD_SECONDS).
"""

from __future__ import annotations

import collections
import heapq
import itertools
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from workflow_runner import DomainEvent, SystemClock, WorkflowRegistry, heap
from workflow_runner.clock import Clock
from workflow_runner.engine import (
    CatchUpPacer,
    IngestResult,
    ResumeRequestItem,
    ResumeResult,
    ingest_domain_events,
    project_pending,
    wake_and_enqueue_many,
)
from workflow_runner.engine.children import start_children
from workflow_runner.engine.due_scan import due_scan
from workflow_runner.engine.enqueue import SuspensionRef, enqueue_due
from workflow_runner.engine.joins import count_settled_children
from workflow_runner.engine.resume_batch import Hold, resume_batch
from workflow_runner.engine.tasks import TaskPorts
from workflow_runner.engine.worker import work
from workflow_runner.errors import TransientStoreError
from workflow_runner.ports import ResumeRequest
from workflow_runner.store import Store, connect
from workflow_runner.webhook_guard import WebhookGuard

Job = Callable[[Store], None]

# A store call that fails transiently is tried again this many times (Lambda would retry).
_ATTEMPTS = 5


@dataclass(frozen=True)
class Batches:
    """The template's batch sizes the pipeline runs with: IntakeBatchSize (trigger and
    awaited events one ingest or wake job takes) and ResumeBatchSize (requests one
    resume job takes). Above 10 each needs its batching window, which a lone item then
    waits; the pipeline does not model that wait (a burst fills batches at once)."""

    intake: int = 10
    resume: int = 10

    def label(self) -> str:
        return f"IntakeBatchSize {self.intake}, ResumeBatchSize {self.resume}"

    def figures(self) -> dict[str, int]:
        """How a workload's figures name the shape they were measured in."""
        return {"intake_batch": self.intake, "resume_batch": self.resume}


# The template's defaults, and the burst-throughput settings the sleep and event-wait
# workloads also measure (both windows >= 1 s): batches of 50 and the largest the
# template allows (IntakeBatchSize and ResumeBatchSize 100).
DEFAULT_BATCHES = Batches()
THROUGHPUT_BATCHES = Batches(intake=50, resume=50)
LARGEST_BATCHES = Batches(intake=100, resume=100)
BURST_BATCHES = (THROUGHPUT_BATCHES, LARGEST_BATCHES)

# PendingProjection's horizon as the template deploys it (DUE_SCAN_HORIZON_SECONDS):
# new suspensions due within it are sent at once, delayed to their second.
DEPLOYED_DUE_SOON_HORIZON = 60


@dataclass
class _Waiting:
    """Items waiting for a batch job, and how many jobs are queued for them."""

    items: collections.deque[Any] = field(default_factory=collections.deque)
    jobs: int = 0


@dataclass
class PipelineStats:
    """What the pipeline did, for checks after a workload."""

    ingested: int = 0
    resumes: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    projected: int = 0
    scans: int = 0
    sent: int = 0
    retried: int = 0
    children_started: int = 0
    task_attempts: int = 0
    errors: list[str] = field(default_factory=list)

    def count(self, outcome: str) -> None:
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1


class DelayedQueue:
    """The resume queue: holds each request for its `delay_seconds` (whole seconds, as SQS)."""

    def __init__(self, deliver: Callable[[ResumeRequest], None], early_seconds: float) -> None:
        self._deliver = deliver
        self.early_seconds = early_seconds  # the workers hold early requests this long
        self._heap: list[tuple[float, int, ResumeRequest]] = []
        self._seq = itertools.count()
        self._cv = threading.Condition()
        self._stopped = False
        self._thread = threading.Thread(target=self._loop, name="delayed-queue", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def send(self, requests: Sequence[ResumeRequest]) -> list[ResumeRequest]:
        """Enqueue; nothing fails in process, so the failed list is always empty."""
        now = time.monotonic()
        with self._cv:
            for request in requests:
                if not 0 <= request.delay_seconds <= 900:
                    raise ValueError(f"delay_seconds {request.delay_seconds} outside 0..900")
                due = now + request.delay_seconds
                heapq.heappush(self._heap, (due, next(self._seq), request))
            self._cv.notify()
        return []

    def stop(self) -> None:
        with self._cv:
            self._stopped = True
            self._cv.notify()
        self._thread.join()

    def _loop(self) -> None:
        while True:
            with self._cv:
                while not self._stopped and (not self._heap or self._heap[0][0] > time.monotonic()):
                    timeout = self._heap[0][0] - time.monotonic() if self._heap else None
                    self._cv.wait(timeout)
                if self._stopped:
                    return
                ready = []
                now = time.monotonic()
                while self._heap and self._heap[0][0] <= now:
                    ready.append(heapq.heappop(self._heap)[2])
            for request in ready:
                self._deliver(request)


def commit_times(
    resumed_at: Sequence[datetime | None],
    first: datetime,
    holds: Sequence[tuple[datetime | None, float]],
    ended: float,
) -> list[float]:
    """The wall time by which each request's pass of a resume batch had committed.

    A batch resumes what is due at once (its pass instant `first`) in one transaction,
    then each held request at the instant its hold ended, in a transaction of its own:
    every pass has committed when the next hold begins, the last ones when the batch
    returns (`ended`). Not resumed (resumed_at None): `ended`.
    """
    begins = [began for _, began in holds] + [ended]
    by_instant = {first: begins[0]}
    for j, (instant, _) in enumerate(holds):
        if instant is not None:
            by_instant[instant] = begins[j + 1]
    return [ended if at is None else by_instant.get(at, ended) for at in resumed_at]


def task_ports(registry: WorkflowRegistry) -> TaskPorts:
    """What the benchmarks' tasks reach: their functions only (no mailer, no HTTP; a
    workload's tasks send nothing)."""
    return TaskPorts(registry, mailer=None, http=None, guard=WebhookGuard([]))  # type: ignore[arg-type]


class Pipeline:
    """The deployed pipeline in one process (see the module docstring).

    Args:
        url: database to work on.
        registry: workflow definitions.
        workers: worker threads (the Lambda concurrency), each with its own connection.
        scan_interval: seconds between the starts of two due scans.
        horizon: the due scan also leases rows due within this many seconds and sends
            them delayed to their second (the deployed tick uses 60).
        due_soon_horizon: as PendingProjection deployed (DUE_SCAN_HORIZON_SECONDS, 60):
            the projector also sends the new suspensions due within this many seconds
            at once, delayed to their second (`due_soon`); None sends only wakeups.
        scan_batch: rows leased per statement.
        on_resumed: called from a worker after each resume committed.
        on_ingested: called from a worker after each ingest committed.
        on_woken: called from a worker after each awaited event's wakeup committed and
            its resumes were sent: (event, wall time the job started, wall time sent).
        on_resume_started: called from a worker as it begins a batch of resumes, with
            the batch and the wall time.
        resumes_first: free workers take waiting resumes before wakes and ingests.
        batches: the template's intake and resume batch sizes (SQS's 10 by default).
        task_ports: with `task_workers`, what the tasks reach (their functions).
        task_workers: StepDispatcher invocations at once, each a thread calling the
            worker's engine operation (`engine.worker.work`: tasks, their runs' resumes
            sent at once, children counted and started) again and again, nudged after
            passes and ingests; 0: none.
    """

    def __init__(
        self,
        url: str,
        registry: WorkflowRegistry,
        workers: int = 4,
        scan_interval: float = 0.05,
        horizon: int = 0,
        due_soon_horizon: int | None = None,
        scan_batch: int = 500,
        scan_budget: float = 45.0,
        clock: Clock | None = None,
        on_resumed: Callable[[ResumeRequest, ResumeResult, float], None] | None = None,
        on_ingested: Callable[[DomainEvent, IngestResult, float, float], None] | None = None,
        on_woken: Callable[[DomainEvent, float, float], None] | None = None,
        on_resume_started: Callable[[Sequence[ResumeRequest], float], None] | None = None,
        run_scanner: bool = True,
        run_starter: bool = False,
        hold: float = 1.0,
        resumes_first: bool = False,
        batches: Batches = DEFAULT_BATCHES,
        task_ports: TaskPorts | None = None,
        task_workers: int = 0,
    ) -> None:
        self.url = url
        self.registry = registry
        self.clock = clock or SystemClock()
        self.scan_interval = scan_interval
        self.horizon = horizon
        self.due_soon_horizon = due_soon_horizon
        self.scan_batch = scan_batch
        self.scan_budget = scan_budget
        self.on_resumed = on_resumed
        self.on_ingested = on_ingested
        self.on_woken = on_woken
        self.on_resume_started = on_resume_started
        self.stats = PipelineStats()
        self._lock = threading.Lock()
        # (lane, order, job): with `resumes_first`, a free worker takes a waiting resume
        # batch before a wake or an ingest (deployed, ResumeRun is a function of its own,
        # never queued behind EventWakeup's invocations); otherwise first in, first out.
        self._jobs: queue.PriorityQueue[tuple[int, int, Job | None]] = queue.PriorityQueue()
        self._order = itertools.count()
        self.resumes_first = resumes_first
        self.batches = batches
        self._ready = _Waiting()  # resume requests
        self._triggers = _Waiting()  # trigger events
        self._awaited = _Waiting()  # awaited events
        self._nudge = threading.Event()
        self._stop = threading.Event()
        self.hold = hold
        self.queue = DelayedQueue(self._deliver, hold)
        self._threads = [
            threading.Thread(target=self._worker, name=f"worker-{i}", daemon=True)
            for i in range(workers)
        ]
        self._threads.append(threading.Thread(target=self._projector, name="proj", daemon=True))
        if run_scanner:
            self._threads.append(threading.Thread(target=self._scanner, name="scan", daemon=True))
        self._start_nudge = threading.Event()
        if run_starter:
            # StepDispatcher's share of child runs: nudged after passes, one at a time.
            self._threads.append(threading.Thread(target=self._starter, name="start", daemon=True))
        self.task_ports = task_ports
        self._task_nudge = threading.Event()
        if task_workers and task_ports is None:
            raise ValueError("task_workers needs task_ports")
        self._threads += [
            threading.Thread(target=self._dispatcher, name=f"tasks-{i}", daemon=True)
            for i in range(task_workers)
        ]

    # --- lifecycle -------------------------------------------------------------

    def __enter__(self) -> Pipeline:
        # As a warm Lambda container after its first call (workflow_runner.heap): the
        # collector walks only what the pipeline creates, not what earlier workloads of
        # this process and its imports left alive.
        heap.settle()
        self.queue.start()
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self._stop.set()
        self._nudge.set()
        self._start_nudge.set()
        self._task_nudge.set()
        self.queue.stop()
        workers = [t for t in self._threads if t.name.startswith("worker-")]
        for _ in workers:
            self._put(None, lane=2)
        for thread in self._threads:
            thread.join(timeout=30)

    # --- inputs ------------------------------------------------------------------

    def ingest(self, event: DomainEvent) -> None:
        """Deliver a trigger event (TriggerProjection): like the intake queue, a worker
        takes every waiting trigger event up to `batches.intake` and ingests them in one
        transaction (TriggerProjection's ingest_domain_events does the same)."""
        self._arrive(self._triggers, event, self._ingest_ready, self.batches.intake)

    def wake(self, event: DomainEvent, put_at: float) -> None:
        """Deliver an awaited event (EventWakeup): like the wakeup intake queue, a worker
        takes every waiting awaited event up to `batches.intake` and wakes them in one
        engine call, which sends their resumes straight to the queue (EventWakeup's
        wake_and_enqueue_many does the same). `put_at` is when it was sent (for callers'
        latency figures)."""
        self._arrive(self._awaited, event, self._wake_ready, self.batches.intake)

    def resume(self, requests: Sequence[ResumeRequest]) -> None:
        self.queue.send(requests)

    def _put(self, job: Job | None, lane: int = 1) -> None:
        self._jobs.put((lane, next(self._order), job))

    def _arrive(self, waiting: _Waiting, item: Any, job: Job, size: int, lane: int = 1) -> None:
        """Add `item` to what waits for a batch job; queue one more job only when those
        already queued could not take it (as SQS invokes a function once per batch, not
        once per message). Jobs queued x `size` >= items waiting holds after every
        arrival and every take (_take_batch), so nothing waits without a job."""
        with self._lock:
            waiting.items.append(item)
            more = waiting.jobs * size < len(waiting.items)
            waiting.jobs += more
        if more:
            self._put(job, lane)

    def idle(self) -> bool:
        return self._jobs.unfinished_tasks == 0

    # --- threads -------------------------------------------------------------------

    def _deliver(self, request: ResumeRequest) -> None:
        # Like SQS with ResumeBatchSize: a worker takes every ready request up to the
        # batch size and resumes them in one transaction (as ResumeRun's resume_batch).
        lane = 0 if self.resumes_first else 1
        self._arrive(self._ready, request, self._resume_ready, self.batches.resume, lane)

    def _resume_ready(self, store: Store) -> None:
        self._take_batch(store, self._ready, self._resume, self.batches.resume)

    def _take_batch(
        self,
        store: Store,
        waiting: _Waiting,
        handle: Callable[[Store, Any], None],
        size: int,
    ) -> None:
        """Take up to a batch (`size`) of what is waiting and handle it; retried here,
        not by _run (a retry of this job would take other items)."""
        with self._lock:
            waiting.jobs -= 1
            items = waiting.items
            batch = [items.popleft() for _ in range(min(size, len(items)))]
        if not batch:
            return
        for attempt in range(_ATTEMPTS):
            try:
                handle(store, batch)
                return
            except TransientStoreError as error:
                with self._lock:
                    self.stats.retried += 1
                if attempt == _ATTEMPTS - 1:
                    self._error(error)

    def _worker(self) -> None:
        store = connect(self.url)
        try:
            while True:
                _, _, job = self._jobs.get()
                try:
                    if job is None:
                        return
                    self._run(store, job)
                finally:
                    self._jobs.task_done()
        finally:
            store.close()

    def _run(self, store: Store, job: Job) -> None:
        for attempt in range(_ATTEMPTS):
            try:
                job(store)
                return
            except TransientStoreError as error:
                with self._lock:
                    self.stats.retried += 1
                if attempt == _ATTEMPTS - 1:
                    self._error(error)
            except Exception as error:
                self._error(error)
                return

    def _error(self, error: BaseException) -> None:
        with self._lock:
            self.stats.errors.append(f"{type(error).__name__}: {error}")

    def _ingest_ready(self, store: Store) -> None:
        self._take_batch(store, self._triggers, self._ingest, self.batches.intake)

    def _ingest(self, store: Store, events: Sequence[DomainEvent]) -> None:
        started = time.time()
        results = ingest_domain_events(store, events, self.clock.now(), self.registry)
        finished = time.time()
        with self._lock:
            self.stats.ingested += len(events)
        self._nudge.set()
        self._start_nudge.set()
        self._task_nudge.set()
        if self.on_ingested is not None:
            for event, result in zip(events, results, strict=True):
                self.on_ingested(event, result, started, finished)

    def _wake_ready(self, store: Store) -> None:
        self._take_batch(store, self._awaited, self._wake, self.batches.intake)

    def _wake(self, store: Store, events: Sequence[DomainEvent]) -> None:
        started = time.time()
        wake_and_enqueue_many(store, self.queue, events, self.clock.now())
        self._nudge.set()
        if self.on_woken is not None:
            sent = time.time()
            for event in events:
                self.on_woken(event, started, sent)

    def _send_due(self, store: Store, runs: Sequence[SuspensionRef]) -> None:
        if runs:
            enqueue_due(store, self.queue, runs, self.clock.now())

    def _resume(self, store: Store, batch: Sequence[ResumeRequest]) -> None:
        # ResumeRun's engine call: not-due requests go back to the queue, early ones
        # within the hold are resumed when due.
        if self.on_resume_started is not None:
            self.on_resume_started(batch, time.time())
        items = [
            ResumeRequestItem(r.tenant_id, r.run_id, r.step_index, force=r.force) for r in batch
        ]
        first = self.clock.now()
        holds: list[tuple[datetime | None, float]] = []
        report = resume_batch(
            store, self.queue, self, items, first, self.registry, self._hold(holds)
        )
        committed = commit_times(report.resumed_at, first, holds, time.time())
        for request, result, at in zip(batch, report.results, committed, strict=True):
            if isinstance(result, Exception):
                self._error(result)
                continue
            with self._lock:
                self.stats.resumes += 1
                self.stats.count(result.outcome)
            if result.outcome != "not-due" and self.on_resumed is not None:
                self.on_resumed(request, result, at)
        self._nudge.set()
        self._start_nudge.set()

    def _hold(self, holds: list[tuple[datetime | None, float]]) -> Hold:
        """ResumeRun's hold; each wait is noted in `holds`: (the instant it ended at, or
        None when it did not wait; the wall time it began)."""

        def wait_until(instant: datetime) -> datetime | None:
            began = time.time()
            wait = (instant - self.clock.now()).total_seconds()
            if wait > self.hold + 0.5:
                holds.append((None, began))
                return None
            if wait > 0:
                time.sleep(wait)
            ended = self.clock.now()
            holds.append((ended, began))
            return ended

        return Hold(self.hold, wait_until)

    # Nudger: resume_batch nudges after passes; the projector and starter listen.
    def nudge_projection(self) -> None:
        self._nudge.set()

    def nudge_dispatcher(self) -> None:
        self._start_nudge.set()
        self._task_nudge.set()

    def _serve(
        self,
        nudge: threading.Event,
        step: Callable[[Store], bool],
        pace: Callable[[], None] = lambda: None,
    ) -> None:
        """Run `step` again and again on a connection of its own until the pipeline
        stops (each round after `pace`): it says whether it did work; when it did none
        the thread waits for `nudge`, 50 ms at most. A transient failure is tried again
        at once; any other is recorded and tried again after 0.1 s."""
        store = connect(self.url)
        try:
            while not self._stop.is_set():
                pace()
                nudge.clear()
                try:
                    busy = step(store)
                except TransientStoreError:
                    continue
                except Exception as error:
                    self._error(error)
                    time.sleep(0.1)
                    continue
                if not busy:
                    nudge.wait(0.05)
        finally:
            store.close()

    def _projector(self) -> None:
        def project(store: Store) -> bool:
            result = project_pending(store, self.clock.now(), horizon_seconds=self.due_soon_horizon)
            with self._lock:
                self.stats.projected += result.applied
            self._send_due(store, [*result.woken, *result.due_soon])
            return result.applied > 0

        # Paced as PendingProjection's warm container.
        self._serve(self._nudge, project, CatchUpPacer().wait)

    def _starter(self) -> None:
        def start(store: Store) -> bool:
            counted = count_settled_children(store, self.clock.now())
            started = start_children(store, self.registry, self.clock.now())
            with self._lock:
                self.stats.children_started += started.started
            if started.started or counted:
                self._nudge.set()
                return True
            return False

        self._serve(self._start_nudge, start)

    def _dispatcher(self) -> None:
        assert self.task_ports is not None
        ports = self.task_ports

        def run(store: Store) -> bool:
            done = work(store, ports, self.queue, self.clock.now, lambda: 600.0)
            with self._lock:
                self.stats.task_attempts += len(done.tasks)
                self.stats.children_started += done.children_started
            return bool(done.tasks or done.children_started or done.children_counted)

        self._serve(self._task_nudge, run)

    def _scanner(self) -> None:
        store = connect(self.url)
        try:
            while not self._stop.is_set():
                began = time.monotonic()
                try:
                    self._scan(store)
                except _Stopped:
                    break
                except TransientStoreError:
                    pass
                except Exception as error:
                    self._error(error)
                rest = self.scan_interval - (time.monotonic() - began)
                if rest > 0:
                    self._stop.wait(rest)
        finally:
            store.close()

    def _pause(self, seconds: float) -> None:
        """The due scan's pause while its tenants are held; ends the scan on stop."""
        if self._stop.wait(seconds):
            raise _Stopped

    def _scan(self, store: Store) -> None:
        result = due_scan(
            store,
            self.queue,
            self.clock.now(),
            budget_seconds=self.scan_budget,
            horizon_seconds=self.horizon,
            batch=self.scan_batch,
            registry=self.registry,
            # As the template deploys DueScan (DUE_SCAN_WAIT_FOR_ROOM): a tenant held to
            # its share is topped up within the same call, whose measured resume rate
            # sets the share. A fresh call every scan_interval never measured it and
            # held every tenant to the unmeasured share (200 rows a call: 4,000/s).
            wait_for_room=True,
            sleep=self._pause,
        )
        with self._lock:
            self.stats.scans += 1
            self.stats.sent += result.enqueued


class _Stopped(Exception):
    """The pipeline stopped during a due scan's pause for room."""


def wait_until(predicate: Callable[[], bool], timeout: float, poll: float = 0.01) -> bool:
    """Poll `predicate` until true or `timeout` seconds passed; whether it became true."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(poll)
    return predicate()
