"""The worker behind StepDispatcher: count settled child runs into their joins and
start due ones, run due tasks and deliver due fire-and-forget requests within the
time the invocation has, and resume the runs whose task ended.

Children and tasks go first: runs wait for them. A task's final outcome is on the run
stream when `run_task` returns, so the resume request is sent at once (leased like a
woken wait); a join that is done tells its parent on the parent's stream, and the
pending projection (nudged after this invocation) enqueues the parent's resume.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from ..flow.tasks import wait_for_turn
from ..flow.wake import wake_after_commit
from ..ports import ResumeQueue, ResumeRequest
from ..store import Store
from .children import start_children
from .dispatcher import DispatchResult, dispatch_pending
from .enqueue import enqueue_due
from .joins import count_settled_children
from .tasks import TaskAttemptResult, TaskPorts, run_task


@dataclass
class WorkResult:
    """What one worker invocation did."""

    deliveries: DispatchResult = field(default_factory=DispatchResult)
    tasks: list[TaskAttemptResult] = field(default_factory=list)
    resumes_sent: int = 0
    drained: bool = True
    children_started: int = 0
    children_counted: int = 0

    def tasks_with(self, outcome: str) -> int:
        return sum(1 for t in self.tasks if t.outcome == outcome)


# Time a batch of child starts may take (their first passes run in it), seconds.
CHILDREN_MARGIN_SECONDS = 5.0


@dataclass(frozen=True)
class _Due:
    tenant_id: str
    run_id: str
    step_index: int


def work(
    store: Store,
    ports: TaskPorts,
    resume_queue: ResumeQueue,
    now: Callable[[], datetime],
    seconds_left: Callable[[], float],
    max_attempts: int = 5,
    webhook_timeout: float = 10.0,
    rng: random.Random | None = None,
    wait: Callable[[float], None] | None = None,
) -> WorkResult:
    """Run due tasks, then deliver due requests, until nothing is due or time is short.

    Args:
        store: the database.
        ports: the registry and delivery ports tasks use.
        resume_queue: where the runs whose task ended go.
        now: business time.
        seconds_left: the time the invocation has left (checked before every call).
        max_attempts: attempts of a fire-and-forget delivery without a RetryPolicy.
        webhook_timeout: bound of one fire-and-forget webhook call, seconds.
        wait: how to pause for the next throttle turn of a task within the time left
            (a deployed worker: time.sleep); None: leave it to the next invocation.
    """
    rng = rng or random.Random()
    result = WorkResult()
    while seconds_left() > CHILDREN_MARGIN_SECONDS:
        counted = count_settled_children(store, now())
        result.children_counted += counted
        started = start_children(store, ports.registry, now())
        result.children_started += started.started + started.attached + started.unknown
        if started.joins == 0 and counted == 0:
            break
    while (attempt := run_task(store, ports, now, seconds_left, rng)) is not None or (
        wait is not None and wait_for_turn(store, now, seconds_left, wait)
    ):
        if attempt is None:
            continue  # waited for a throttle's next turn
        result.tasks.append(attempt)
        # Slots the attempt gave back wake held work (flow control): resumes go out now.
        woken = wake_after_commit(store, now()) if store.flow.wakes else []
        if woken:
            enqueue_due(store, resume_queue, woken, now())
        if attempt.run_due:
            due = _Due(attempt.tenant_id, attempt.run_id, attempt.step_index)
            sent, _ = enqueue_due(store, resume_queue, [due], now())
            if not sent:
                # Not leased: its pending row is not projected yet, or already on its
                # way. A second request is harmless (the resume claims once).
                resume_queue.send([ResumeRequest(due.tenant_id, due.run_id, due.step_index)])
            result.resumes_sent += 1
    result.deliveries = dispatch_pending(
        store,
        now,
        ports.mailer,
        ports.http,
        ports.guard,
        mail_sender=ports.mail_sender,
        max_attempts=max_attempts,
        timeout=webhook_timeout,
        seconds_left=seconds_left,
        rng=rng,
    )
    result.drained = result.deliveries.drained
    return result
