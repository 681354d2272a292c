"""What one pass of the interpreter produces: where the run stopped (a suspension), its
dispatch requests, the results it wrote, or how it ended."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from .definition.completion import FAILURE_TOLERANCE_EXCEEDED, Completion
from .errors import WorkflowRunnerError
from .fast_init import fast_init
from .storable import NotStorable
from .stream import Path


class WorkflowStepError(WorkflowRunnerError):
    """A step produced something the engine cannot accept (bad wait time, result not JSON)."""


TASK_FAILED_REASON = "task_failed"


class TaskFailedError(WorkflowStepError):
    """A task failed for good and the workflow does not catch it; carries the class name
    the worker recorded (the task's own exception is long gone). The run fails with
    `reason: task_failed`, or `result_not_storable` when the task's result was what
    could not be kept (as a compute's is)."""

    def __init__(self, error_class: str, task_key: str, task_reason: str | None = None) -> None:
        super().__init__(f"task {task_key!r} failed ({error_class})")
        self.error_class = error_class
        self.reason = (
            NotStorable.reason if task_reason == NotStorable.reason else TASK_FAILED_REASON
        )


class ChildFailedError(WorkflowStepError):
    """A child run the workflow waited for failed or was cancelled, and the workflow
    does not catch it."""

    reason = "child_failed"

    def __init__(self, workflow: str, child_reason: str) -> None:
        super().__init__(f"child workflow {workflow!r} ended {child_reason}")
        self.error_class = "ChildFailed"


class ToleranceExceededError(WorkflowStepError):
    """A map's or parallel's items failed more than its completion policy tolerates, and
    the step does not catch it."""

    reason = FAILURE_TOLERANCE_EXCEEDED

    def __init__(self, step_kind: str, failed: int) -> None:
        super().__init__(f"{step_kind}: {failed} item(s) failed, more than tolerated")
        self.error_class = "FailureToleranceExceeded"


class InvalidArgument(WorkflowStepError):
    """A step argument's value, computed when the step ran, is not what the step takes
    (a timeout that is no duration, a match that is no EventMatch, a recipient without @).
    The run fails with `reason: invalid_argument:<argument>`: the argument's name, never
    the value (invariant 8)."""

    def __init__(self, argument: str, message: str) -> None:
        super().__init__(f"{argument}: {message}")
        self.argument = argument
        self.reason = f"invalid_argument:{argument}"

    @classmethod
    def of(cls, argument: str, error: BaseException) -> InvalidArgument:
        return cls(argument, str(error))


class CallbackNotReached(WorkflowStepError):
    """A step read `ctx.callback` but the pass suspended before any wait_for_callback
    took the token: the wait that comes later, in another pass, waits on another token,
    so the one handed out could never complete it."""

    reason = "callback_not_reached"

    def __init__(self) -> None:
        super().__init__(
            "ctx.callback was read, but the pass suspended before reaching a wait_for_callback"
        )


class CallbackFailedError(WorkflowStepError):
    """A callback's token reported a failure (`error_class`: the error name the outside
    system sent), and the wait does not catch it."""

    reason = "callback_failed"

    def __init__(self, error_class: str) -> None:
        super().__init__(f"the callback reported a failure ({error_class})")
        self.error_class = error_class


class CallbackNotCreated(WorkflowStepError, KeyError):
    """A step read or awaited a callback name no create_callback of the run has made yet
    (its create_callback sits in a branch not taken, say)."""

    reason = "callback_not_created"

    def __init__(self, name: str, known: list[str]) -> None:
        names = ", ".join(repr(n) for n in known) or "none"
        super().__init__(f"no callback {name!r} was created in this run (created: {names})")

    def __str__(self) -> str:
        return str(self.args[0])


class CallbackSecretMissing(WorkflowStepError):
    """A run started before its workflow made callbacks has no secret to derive a
    created callback's token with, so later steps could not hand it out."""

    reason = "callback_secret_missing"

    def __init__(self) -> None:
        super().__init__(
            "this run started on a definition without callbacks and has no token secret: "
            "create_callback needs a run started on a definition that has it"
        )


class CallbackAnswerErased(WorkflowStepError):
    """The answer a created callback got before its await was erased before the await."""

    reason = "awaited_event_unavailable"


class ConditionCheckFailed(WorkflowStepError):
    """A wait_for_condition's check raised (or returned neither Done nor Continue): the
    step fails at once, without another check. Carries the class of what it raised."""

    reason = "condition_check_failed"

    def __init__(self, key: str, error_class: str, attempts: int, detail: str = "") -> None:
        # The raw text (the log's only, as redaction allows) keeps the check's message.
        text = f"the check of condition {key!r} failed on check {attempts} ({error_class})"
        super().__init__(f"{text}: {detail}" if detail else text)
        self.error_class = error_class
        self.attempts = attempts


class ConditionNotMet(WorkflowStepError):
    """A wait_for_condition ran out of checks (max_attempts) or of time (timeout) before
    its check returned Done."""

    reason = "condition_not_met"

    def __init__(self, key: str, attempts: int, why: str) -> None:
        super().__init__(f"condition {key!r} not met after {attempts} check(s) ({why})")
        self.error_class = "ConditionNotMet"
        self.attempts = attempts


def describe_step_error(error: BaseException) -> str:
    """The generic text stored for a failed step; the raw message goes to the log only."""
    if isinstance(
        error,
        (
            TaskFailedError,
            ChildFailedError,
            ToleranceExceededError,
            CallbackFailedError,
            ConditionCheckFailed,
        ),
    ):
        return f"workflow step failed ({error.error_class})"
    name = type(error).__name__ if isinstance(error, Exception) else ""
    return f"workflow step failed ({name})" if name else "workflow step failed (unknown error)"


@fast_init
@dataclass(frozen=True)
class EventWait:
    """What a wait_for_event suspension waits for."""

    event_type: str
    match: dict[str, Any] | None
    lookback_from: datetime
    result_key: str


@fast_init
@dataclass(frozen=True)
class RetryWait:
    """The failed attempt of a retry and the budget it belongs to."""

    attempt: int
    max_attempts: int
    error: str


@fast_init
@dataclass(frozen=True)
class TaskWait:
    """A task the run waits for: a worker runs it and records its outcome.

    `scope` holds the for_each items around the task (its function sees them as
    `ctx.scope`); `request` is the mail or webhook request of a delivery task.
    """

    task_key: str
    task_id: str
    step_kind: str  # task | mail.send | webhook.send
    max_attempts: int
    timeout_ms: int | None
    catch: bool
    scope: dict[str, Any]
    request: dict[str, Any] | None = None
    # Its limits (flow/store.py LimitSpec as JSON, keys resolved by this pass; None: none).
    limits: list[dict[str, Any]] | None = None


@fast_init
@dataclass(frozen=True)
class CallbackWait:
    """What a wait_for_callback (or an await_callback of created callback `name`)
    suspension waits for: the hash of the token, and the heartbeat's interval and the
    instant by which the next one must come."""

    result_key: str
    token_hash: str
    name: str | None = None
    heartbeat_seconds: int | None = None
    heartbeat_at: datetime | None = None


@fast_init
@dataclass(frozen=True)
class CreatedCallback:
    """A callback a create_callback step of this pass made: its token's hash and what
    the token is derived from (`mint`, with the run's secret). `superseded`: the pass
    made the same name again later."""

    name: str
    token_hash: str
    mint: str
    path: Path
    timeout_at: datetime
    heartbeat_seconds: int | None
    superseded: bool = False


@fast_init
@dataclass(frozen=True)
class KnownCallback:
    """A created callback as a pass finds it: made by an earlier pass (or this one), with
    its answer if it has one (`event_id`; `error` for a failure; `answer` its payload,
    `answer_erased` once erased) or `closed` when the run stopped listening to it."""

    name: str
    token_hash: str
    mint: str | None
    timeout_at: datetime
    heartbeat_seconds: int | None
    last_beat: datetime
    event_id: str | None = None
    error: str | None = None
    answer: Any = None
    answer_erased: bool = False
    closed: bool = False


@fast_init
@dataclass(frozen=True)
class ConditionWait:
    """A wait_for_condition's checkpoint: `attempts` checks done, the last one's state
    (what the next check receives), when the first check ran, and the limits."""

    key: str
    attempts: int
    state: Any
    first_check_at: datetime
    max_attempts: int | None = None
    deadline: datetime | None = None


@fast_init
@dataclass(frozen=True)
class ChildSpec:
    """One child run a join starts: its idempotency key, run id and input."""

    key: str
    run_id: str
    input: Any


@fast_init
@dataclass(frozen=True)
class ChildJoin:
    """Child runs a pass asks for: `call` (one, waited for), `map` (many, at most
    `concurrency` at once, waited for) or `start` (fire and forget). The worker starts
    them after the pass commits."""

    join_id: str
    kind: Literal["call", "map", "start"]
    workflow: str
    children: tuple[ChildSpec, ...]
    concurrency: int
    result_key: str | None
    catch: bool
    path: Path
    completion: Completion | None = None  # map only


@fast_init
@dataclass(frozen=True)
class Suspension:
    """Where a pass stopped: `path`, due at `wake_at` (a wait's time, a wait_for_event's
    or wait_for_callback's timeout, a retry's next attempt; never by time for tasks and
    children; a callback wait's heartbeat may end it earlier)."""

    kind: Literal[
        "waiting",
        "waiting-for-event",
        "retry-scheduled",
        "task-scheduled",
        "tasks-scheduled",
        "children-waiting",
        "waiting-for-callback",
        "waiting-for-condition",
    ]
    path: Path
    wake_at: datetime
    event: EventWait | None = None
    retry: RetryWait | None = None
    task: TaskWait | None = None
    callback: CallbackWait | None = None
    condition: ConditionWait | None = None
    tasks: tuple[TaskWait, ...] = ()  # parallel
    result_key: str | None = None  # parallel: the list of the tasks' results
    # parallel, when a redrive kept some tasks' outcomes: every task's key, in order
    result_keys: tuple[str, ...] | None = None
    join: ChildJoin | None = None
    completion: Completion | None = None  # parallel (a map's is its join's)
    catch: bool = False  # parallel with a completion policy: an exceeded tolerance goes on

    @property
    def step_index(self) -> int:
        return int(self.path[0]["i"])


@fast_init
@dataclass(frozen=True)
class DispatchRequest:
    """A fire-and-forget mail or webhook, delivered after the pass commits."""

    request_id: str
    step_kind: str
    step_index: int
    path: Path
    request: dict[str, Any]


@fast_init
@dataclass(frozen=True)
class ResumedTask:
    """The task, parallel tasks or children a resume re-enters at, and how they ended
    (None: success, or a failure the workflow catches; the values are seeded)."""

    path: Path
    failure: TaskFailedError | ChildFailedError | ToleranceExceededError | None = None


@fast_init
@dataclass(frozen=True)
class ResumedCondition:
    """The wait_for_condition a resume re-enters at (`path`) and its last checkpoint:
    the next check is check `attempts + 1`, with `state`."""

    path: Path
    attempts: int
    state: Any
    first_check_at: datetime


@fast_init
@dataclass(frozen=True)
class Reentry:
    """What a redrive keeps of the work step it runs again (at `path`): the join whose
    children it keeps (`join_id`: the step asks for the same join, which the redrive
    reopens), or the parallel's tasks whose outcome is recorded (`kept_tasks`, their keys:
    their results are seeded, only the others run again)."""

    path: Path
    join_id: str | None = None
    kept_tasks: frozenset[str] = frozenset()


@dataclass
class PassResult:
    """The outcome of a pass. `results`/`awaited_refs` hold every result after it;
    `written` the keys this pass set (what it records: each result once)."""

    outcome: Literal["suspended", "completed", "failed"]
    results: dict[str, Any]
    awaited_refs: dict[str, str | None]
    written: list[str]
    dispatches: list[DispatchRequest]
    suspension: Suspension | None = None
    starts: list[ChildJoin] = field(default_factory=list)  # start_workflow
    return_value: Any = None
    reason: str | None = None
    error: str | None = None
    error_detail: str | None = None
    failed_path: Path = field(default_factory=list)
    created_callbacks: list[CreatedCallback] = field(default_factory=list)
    # Created callbacks an await found expired: (token hash, why: timeout | heartbeat).
    closed_callbacks: list[tuple[str, str]] = field(default_factory=list)

    def results_delta(self) -> dict[str, Any]:
        """Values this pass wrote (awaited payloads stay references)."""
        return {k: self.results[k] for k in self.written if k not in self.awaited_refs}

    def awaited_refs_delta(self) -> dict[str, str | None]:
        """Awaited references this pass wrote (key -> inbox event id, None: timed out)."""
        return {k: self.awaited_refs[k] for k in self.written if k in self.awaited_refs}
