"""The workflow definition language: triggers, the step vocabulary and define_workflow."""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal, TypeAlias

from ..callback_tokens import NO_CALLBACK, Callback
from ..errors import WorkflowDefinitionError
from ..fast_init import fast_init
from ..flow.constructs import Concurrency, FlowControl, Throttle
from ..refs import substitute_refs
from .completion import Completion
from .retry import BackoffKind, JitterKind, RetryPolicy

# Frozen: changing it would re-key every existing run stream (seeds, aggregate-id.ts).
RUN_ID_NAMESPACE = uuid.UUID("1f8a6c3e-7d2b-4a91-9e3f-5c8b2a41d6f0")


def run_id_for(name: str, key: str) -> str:
    """Return the run id of workflow `name` for idempotency key `key` (uuid v5, no tenant)."""
    return str(uuid.uuid5(RUN_ID_NAMESPACE, f"{name}|{key}"))


@fast_init
@dataclass(frozen=True)
class DomainEvent:
    """A domain event as a workflow sees it (`ctx.event`)."""

    id: str
    type: str
    payload: Any
    tenant_id: str
    time: datetime | None = None
    source: str = ""


@fast_init
@dataclass(frozen=True)
class WorkflowInfo:
    """What a step knows about the run it belongs to (`ctx.workflow`).

    `retry_attempt` is the attempt of the innermost retry (1 outside one) or, inside a
    task's function, the task's attempt; `task_key` (in a task's function only) is the
    attempt group's idempotency key: the same for every attempt of this task.
    `map_index` is the index of the item a map started this run for, or of the branch a
    parallel's branch runs (0-based; None in a run no map or parallel started).
    """

    run_id: str
    workflow_name: str
    step_index: int
    retry_attempt: int
    definition_fingerprint: str
    task_key: str | None = None
    parent_run_id: str | None = None  # the run that started this one (call/start/map)
    map_index: int | None = None


@fast_init
@dataclass(frozen=True)
class StepContext:
    """The argument every resolver receives.

    `callback` holds the token (and URL) of the wait_for_callback the pass reaches next
    (both None where no pass runs, as in a task's function); `callbacks` the callbacks
    create_callback steps made, by name (in a task's function too).
    """

    event: DomainEvent
    steps: dict[str, Any]
    scope: dict[str, Any]
    workflow: WorkflowInfo
    now: datetime
    callback: Callback = NO_CALLBACK
    callbacks: Mapping[str, Callback] = field(default_factory=dict)
    batch_events: tuple[DomainEvent, ...] = ()  # a Batch's trigger events (see `events`)

    @property
    def events(self) -> list[DomainEvent]:
        """The run's trigger events: a batch's (`Batch`), in arrival order; otherwise
        the one trigger event (`[ctx.event]`)."""
        return list(self.batch_events) if self.batch_events else [self.event]


Resolver: TypeAlias = Any  # a value, or a callable taking StepContext


def resolve(value: Resolver, ctx: StepContext) -> Any:
    """Return `value(ctx)` for a callable (a reference too), else `value` with the
    references inside it resolved (itself when it holds none)."""
    return value(ctx) if callable(value) else substitute_refs(value, ctx)


# --- triggers ---------------------------------------------------------------


@dataclass(frozen=True)
class EventTrigger:
    event_type: str
    filter: Callable[[DomainEvent], bool] | None = None
    kind: Literal["event"] = "event"


CatchUp: TypeAlias = Literal["all", "latest", "none"]
CATCHUP_POLICIES: tuple[CatchUp, ...] = ("all", "latest", "none")


@dataclass(frozen=True)
class CronTrigger:
    schedule: str
    kind: Literal["cron"] = "cron"
    # Which missed instants the due scan starts after an outage (engine/due_scan.py).
    catchup: CatchUp = "all"


@dataclass(frozen=True)
class CallTrigger:
    """Started only by other workflows (call_workflow, start_workflow, map)."""

    kind: Literal["call"] = "call"


Trigger: TypeAlias = EventTrigger | CronTrigger | CallTrigger


def on_event(event_type: str, filter: Callable[[DomainEvent], bool] | None = None) -> EventTrigger:
    """Trigger a run for each domain event of `event_type` that passes `filter`."""
    if not isinstance(event_type, str) or not event_type.strip():
        raise WorkflowDefinitionError("on_event: event_type must be a non-empty string")
    if filter is not None and not callable(filter):
        raise WorkflowDefinitionError("on_event: filter must be a function of the event")
    return EventTrigger(event_type=event_type, filter=filter)


def on_cron(schedule: str, catchup: CatchUp = "all") -> CronTrigger:
    """Trigger a run per tenant at each instant of a 5-field UTC cron schedule (checked
    by define_workflow, which names the workflow in the error).

    `catchup` decides what the due scan does with instants it reaches late (after an
    outage): "all" starts every one of them (the default), "latest" only the most
    recent, "none" only those at most a few minutes old.
    """
    return CronTrigger(schedule=schedule, catchup=catchup)


def on_call() -> CallTrigger:
    """A workflow that only other workflows start: its input is `ctx.event.payload`."""
    return CallTrigger()


# --- steps ------------------------------------------------------------------


@dataclass(frozen=True)
class Compute:
    key: str
    fn: Callable[[StepContext], Any]
    kind: str = "compute"


@dataclass(frozen=True)
class Branch:
    if_: Resolver
    on_true: tuple[Step, ...]
    on_false: tuple[Step, ...]
    kind: str = "branch"


@dataclass(frozen=True)
class ForEach:
    over: Resolver
    as_: str
    do: tuple[Step, ...]
    kind: str = "for_each"


@dataclass(frozen=True)
class Wait:
    for_: Resolver = None
    until: Resolver = None
    kind: str = "wait"


@dataclass(frozen=True)
class WaitForEvent:
    event: str
    match: Resolver
    timeout: Resolver
    lookback: Resolver
    result_key: str
    kind: str = "wait_for_event"


# Fields added to a step after release 0.1 carry this metadata: the fingerprint leaves
# them out while they hold their default, so definitions written before keep theirs.
ADDED_LATER: Mapping[str, bool] = {"added_later": True}
# A step's limits (flow control): part of the definition, never of its fingerprint or
# shape, so changing a limit fails no run in flight.
LIMITS: Mapping[str, bool] = {"limits": True}


@dataclass(frozen=True)
class Retry:
    times: int
    backoff: BackoffKind
    base: str
    cap: str
    jitter: JitterKind
    do: tuple[Step, ...]
    kind: str = "retry"


@dataclass(frozen=True)
class MailSend:
    to: Resolver
    subject: Resolver
    body: Resolver
    from_: Resolver = None
    key: str | None = None
    kind: str = "mail.send"
    result_key: str | None = field(default=None, metadata=ADDED_LATER)
    retry: RetryPolicy | None = field(default=None, metadata=ADDED_LATER)
    catch: bool = field(default=False, metadata=ADDED_LATER)
    concurrency: tuple[Concurrency, ...] = field(default=(), metadata=LIMITS)
    throttle: Throttle | None = field(default=None, metadata=LIMITS)


@dataclass(frozen=True)
class WebhookSend:
    url: Resolver
    method: Resolver = "POST"
    headers: Resolver = None
    body: Resolver = None
    auth: Resolver = None
    key: str | None = None
    kind: str = "webhook.send"
    result_key: str | None = field(default=None, metadata=ADDED_LATER)
    retry: RetryPolicy | None = field(default=None, metadata=ADDED_LATER)
    catch: bool = field(default=False, metadata=ADDED_LATER)
    concurrency: tuple[Concurrency, ...] = field(default=(), metadata=LIMITS)
    throttle: Throttle | None = field(default=None, metadata=LIMITS)


@dataclass(frozen=True)
class Task:
    key: str
    fn: Callable[[StepContext], Any]
    retry: RetryPolicy
    timeout: str
    catch: bool = False
    kind: str = "task"
    concurrency: tuple[Concurrency, ...] = field(default=(), metadata=LIMITS)
    throttle: Throttle | None = field(default=None, metadata=LIMITS)


@dataclass(frozen=True)
class WaitForCallback:
    """Suspend until an outside system answers the callback, or `timeout` passes (or,
    with `heartbeat`, that long passes without a heartbeat)."""

    result_key: str
    timeout: Resolver = "P7D"
    kind: str = "wait_for_callback"
    heartbeat: str | None = field(default=None, metadata=ADDED_LATER)
    catch: bool = field(default=False, metadata=ADDED_LATER)


@dataclass(frozen=True)
class CreateCallback:
    """Make callback `name`: its token is `ctx.callbacks[name].token` for every later
    step; it takes an answer until `timeout` (with `heartbeat`: while heartbeats come)."""

    name: str
    timeout: Resolver = "P7D"
    heartbeat: str | None = None
    kind: str = "create_callback"


@dataclass(frozen=True)
class AwaitCallback:
    """Suspend until created callback `name` has its answer (at once when it has one),
    and store it under `result_key`."""

    name: str
    result_key: str
    catch: bool = False
    kind: str = "await_callback"


@dataclass(frozen=True)
class CallWorkflow:
    """Start a child run and wait until it settles (`wait=False`: start_workflow)."""

    workflow: str
    input: Resolver
    key: Resolver
    result_key: str | None
    catch: bool
    wait: bool = True
    kind: str = "call_workflow"


@dataclass(frozen=True)
class Map:
    """One child run per item of `over`, at most `concurrency` at once; their results
    in item order."""

    over: Resolver
    workflow: str
    key: Resolver
    concurrency: int
    result_key: str | None
    catch: bool
    kind: str = "map"
    # With a policy the step yields a batch result and ends early (definition/completion.py).
    completion: Completion | None = field(default=None, metadata=ADDED_LATER)


@dataclass(frozen=True)
class Parallel:
    """Tasks (or deliveries with a result_key) run at once; the run goes on when all
    have settled. With `branches` (not None), step lists instead: each branch runs as a
    child run (definition/branches.py), at most `max_concurrency` at once."""

    steps: tuple[Step, ...]
    result_key: str | None
    kind: str = "parallel"
    completion: Completion | None = field(default=None, metadata=ADDED_LATER)
    # With a completion policy: an exceeded tolerance lets the run go on with the batch.
    catch: bool = field(default=False, metadata=ADDED_LATER)
    branches: tuple[tuple[Step, ...], ...] | None = field(default=None, metadata=ADDED_LATER)
    max_concurrency: int | None = field(default=None, metadata=ADDED_LATER)


@dataclass(frozen=True)
class BranchResult:
    """End a parallel's branch with `value` as its result."""

    value: Resolver
    kind: str = "branch_result"


@dataclass(frozen=True)
class WaitForCondition:
    """Check a condition now and then until it holds: `check(ctx, state)` returns
    Done(value) (the value lands under `key`) or Continue(new_state); between checks
    the run waits `every` (fixed) or doubling from it (exponential), at most `cap`."""

    key: str
    check: Callable[[StepContext, Any], Any]
    initial: Resolver = None
    every: str = "PT30S"
    backoff: str = "fixed"
    cap: str | None = None
    max_attempts: int | None = None
    timeout: str | None = None
    catch: bool = False
    kind: str = "wait_for_condition"


@dataclass(frozen=True)
class Return:
    value: Resolver
    kind: str = "return"


Step: TypeAlias = (
    Compute
    | Branch
    | ForEach
    | Wait
    | WaitForEvent
    | Retry
    | MailSend
    | WebhookSend
    | Task
    | CallWorkflow
    | Map
    | Parallel
    | Return
    | WaitForCallback
    | BranchResult
    | CreateCallback
    | AwaitCallback
    | WaitForCondition
)


def walk_steps(steps: Sequence[Step]) -> Iterator[Step]:
    """Every step of a tree, depth first: branch arms, for_each and retry bodies and a
    parallel's tasks included."""
    for step in steps:
        yield step
        if isinstance(step, Branch):
            yield from walk_steps((*step.on_true, *step.on_false))
        elif isinstance(step, (ForEach, Retry)):
            yield from walk_steps(step.do)
        elif isinstance(step, Parallel):
            yield from walk_steps(step.steps)


def has_callback_wait(steps: tuple[Step, ...]) -> bool:
    """Whether a step tree holds a wait_for_callback or create_callback (its runs get a
    token secret)."""
    return any(isinstance(step, (WaitForCallback, CreateCallback)) for step in walk_steps(steps))


SUSPENDING_KINDS = frozenset(
    {
        "wait",
        "wait_for_event",
        "retry",
        "task",
        "call_workflow",
        "map",
        "parallel",
        "wait_for_callback",
        "await_callback",
        "wait_for_condition",
    }
)
# The longest attempt a task may ask for: it must fit in the worker Lambda's run.
MAX_TASK_TIMEOUT = timedelta(minutes=14)


STEP_TYPES = (
    Compute,
    Branch,
    ForEach,
    Wait,
    WaitForEvent,
    Retry,
    MailSend,
    WebhookSend,
    Task,
    CallWorkflow,
    Map,
    Parallel,
    Return,
    WaitForCallback,
    BranchResult,
    CreateCallback,
    AwaitCallback,
    WaitForCondition,
)
# The largest `concurrency` of a map (children running at once for one map step).
MAX_MAP_CONCURRENCY = 10_000


@dataclass(frozen=True)
class WorkflowDefinition:
    """A registered workflow: name, trigger, step tree and its fingerprint."""

    name: str
    trigger: Trigger
    steps: tuple[Step, ...]
    idempotency_key: Callable[[DomainEvent], Any] | str | None
    awaits: Mapping[str, str]
    version: int
    fingerprint: str = field(default="")
    description: str = ""
    # How long its settled runs are kept (retention.py): a duration, a
    # timedelta or "forever"; None: the deployment's default (RUN_RETENTION). Not part
    # of the fingerprint: changing it must not fail the runs in flight.
    retention: str | timedelta | None = None
    # What its waiting runs resume on once it is gone (definition/shape.py): "shape" or
    # "exact". Not part of the fingerprint.
    pinning: Literal["shape", "exact"] = "shape"
    # Its flow control (flow/constructs.py; None: none, and no hot path looks further).
    # Not part of the fingerprint or the shape: changing a limit fails no run in flight.
    flow: FlowControl | None = None
    # Set on the internal workflow of a parallel's branch (definition/branches.py): a
    # BranchOf. Not part of the fingerprint (a branch's derives from its parent's).
    branch_of: Any = None

    @functools.cached_property
    def takes_callbacks(self) -> bool:  # has_callback_wait, asked at every start: walked once
        return has_callback_wait(self.steps)

    def key_for(self, event: DomainEvent) -> str | None:
        """Return the idempotency key for a trigger event (None when the workflow has none)."""
        if self.idempotency_key is None:
            return None
        if callable(self.idempotency_key):
            key = self.idempotency_key(event)
        else:
            key = self.idempotency_key
        if key is None:
            return None
        if isinstance(key, bool) or not isinstance(key, (str, int)):
            raise WorkflowDefinitionError(
                f"workflow {self.name!r}: idempotency_key returned {type(key).__name__}, "
                "expected a string"
            )
        return str(key)
