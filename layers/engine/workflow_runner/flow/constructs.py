"""The flow-control constructs a definition names: how much of a workflow's work may run
at once, how fast it may start, and which triggers start nothing.

Pure values, checked when they are built (a definition error names the construct and
the argument). They are part of a definition but not of its fingerprint or its shape:
changing a limit never fails a run in flight; the new value applies to the work
admitted after the deploy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal, TypeAlias

from ..durations import parse_duration
from ..errors import InvalidDuration, WorkflowDefinitionError
from ..refs import Ref, refs_in

Scope: TypeAlias = Literal["tenant", "workflow", "global"]
SCOPES: tuple[Scope, ...] = ("tenant", "workflow", "global")
SingletonMode: TypeAlias = Literal["skip", "cancel"]
# The largest limit a construct takes (slots are rows; a rate limit keeps its window).
MAX_LIMIT = 10_000
# A batch's events are in every pass and task of its run (ctx.events): at EventBridge's
# 256 KB per event, 100 of them stay within what a Lambda invocation can carry.
MAX_BATCH = 100
# Priority: seconds of head start among a tenant's due work (as Inngest's).
MAX_PRIORITY = 600


def _limit(where: str, value: object, name: str = "limit") -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_LIMIT:
        raise WorkflowDefinitionError(
            f"{where}: {name} must be an integer from 1 to {MAX_LIMIT}, not {value!r}"
        )
    return value


def _period(where: str, value: object, name: str = "period") -> timedelta:
    if not isinstance(value, str):
        raise WorkflowDefinitionError(
            f"{where}: {name} must be an ISO-8601 duration such as 'PT1M', not {value!r}"
        )
    try:
        period = parse_duration(value)
    except InvalidDuration as error:
        raise WorkflowDefinitionError(f"{where}: {name}: {error}") from None
    if period <= timedelta(0):
        raise WorkflowDefinitionError(f"{where}: {name} must be longer than zero, not {value!r}")
    return period


def _key(where: str, value: object, required: bool = False) -> None:
    if value is None:
        if required:
            raise WorkflowDefinitionError(f"{where}: key is required (e.g. Event.payload['id'])")
        return
    if isinstance(value, (str, int, Ref)) and not isinstance(value, bool):
        return
    if callable(value):
        return
    raise WorkflowDefinitionError(
        f"{where}: key must be a reference (Event.payload['accountId']), a function of "
        f"ctx or a string, not {type(value).__name__}"
    )


def _scope(where: str, value: object) -> None:
    if value not in SCOPES:
        raise WorkflowDefinitionError(
            f"{where}: scope must be one of {', '.join(SCOPES)}, not {value!r}"
        )


@dataclass(frozen=True)
class Concurrency:
    """At most `limit` at once per key.

    On a workflow: runs executing a pass or a task (a waiting run holds no slot); on a
    task, mail or webhook step: attempts in flight.

    Args:
        limit: how many at once.
        key: what to count per (resolvable: `Event.payload["accountId"]`); None: one
            count for the whole workflow (or step).
        scope: "tenant" (each tenant counts its own), "workflow" (the workflow's
            runs of every tenant together) or "global" (everything that names the same
            key, in any workflow and tenant: a provider's account-wide limit).
    """

    limit: int
    key: Any = None
    scope: Scope = "tenant"

    def __post_init__(self) -> None:
        _limit("Concurrency", self.limit)
        _key("Concurrency", self.key)
        _scope("Concurrency", self.scope)


@dataclass(frozen=True)
class Throttle:
    """At most `limit` starts (on a workflow) or task attempts (on a step) per `period`
    per key, as a token bucket holding `burst` tokens: excess work waits its turn, in
    arrival order, never dropped."""

    limit: int
    period: str
    key: Any = None
    burst: int = 1
    scope: Scope = "tenant"

    def __post_init__(self) -> None:
        _limit("Throttle", self.limit)
        _period("Throttle", self.period)
        _key("Throttle", self.key)
        _limit("Throttle", self.burst, "burst")
        _scope("Throttle", self.scope)

    @property
    def interval(self) -> timedelta:
        """The time one token takes to refill: `period / limit`."""
        return parse_duration(self.period) / self.limit


@dataclass(frozen=True)
class RateLimit:
    """On a workflow: a trigger beyond `limit` per `period` (a sliding window) per key
    starts nothing; it is recorded as skipped with the reason."""

    limit: int
    period: str
    key: Any = None

    def __post_init__(self) -> None:
        _limit("RateLimit", self.limit)
        _period("RateLimit", self.period)
        _key("RateLimit", self.key)


@dataclass(frozen=True)
class Debounce:
    """On a workflow: a trigger starts a run only once `period` passed without another
    trigger of the same key; the run gets the last event. `timeout` bounds the delay
    from the first trigger."""

    period: str
    key: Any
    timeout: str | None = None

    def __post_init__(self) -> None:
        period = _period("Debounce", self.period)
        _key("Debounce", self.key, required=True)
        if self.timeout is not None and _period("Debounce", self.timeout, "timeout") < period:
            raise WorkflowDefinitionError("Debounce: timeout must be at least the period")


@dataclass(frozen=True)
class Singleton:
    """On a workflow: at most one unsettled run per key. A new trigger is skipped
    (mode "skip") or cancels the unsettled run and starts (mode "cancel")."""

    key: Any
    mode: SingletonMode = "skip"

    def __post_init__(self) -> None:
        _key("Singleton", self.key, required=True)
        if self.mode not in ("skip", "cancel"):
            raise WorkflowDefinitionError(
                f"Singleton: mode must be 'skip' or 'cancel', not {self.mode!r}"
            )


@dataclass(frozen=True)
class Batch:
    """On a workflow: one run per batch of trigger events (`ctx.events`, in arrival
    order), started when `max_size` arrived or `timeout` passed since the first."""

    max_size: int
    timeout: str
    key: Any = None

    def __post_init__(self) -> None:
        _limit("Batch", self.max_size, "max_size")
        if self.max_size > MAX_BATCH:
            raise WorkflowDefinitionError(
                f"Batch: max_size must be at most {MAX_BATCH} (the batch's events are in"
                f" every pass of its run), not {self.max_size}"
            )
        _period("Batch", self.timeout, "timeout")
        _key("Batch", self.key)


@dataclass(frozen=True)
class CancelOn:
    """On a workflow: an arriving `event_type` event that matches cancels the unsettled
    runs it names. `match` maps a path in the arriving event's payload to the reference
    into the run's trigger event that must equal it (`{"orderId": Event.payload["orderId"]}`);
    `within`: only runs started at most this long before."""

    event_type: str
    match: Mapping[str, Any] = field(default_factory=dict)
    within: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.event_type, str) or not self.event_type.strip():
            raise WorkflowDefinitionError("CancelOn: event_type must be a non-empty string")
        if not isinstance(self.match, Mapping) or not self.match:
            raise WorkflowDefinitionError(
                "CancelOn: match must map a payload field of the cancelling event to the "
                "trigger's (e.g. {'orderId': Event.payload['orderId']})"
            )
        for path, value in self.match.items():
            if not isinstance(path, str) or not path:
                raise WorkflowDefinitionError("CancelOn: match keys are payload field paths")
            _key("CancelOn", value, required=True)
        if self.within is not None:
            _period("CancelOn", self.within, "within")


LimitConstruct: TypeAlias = Concurrency | Throttle


@dataclass(frozen=True)
class FlowControl:
    """Everything a workflow definition says about flow control (None on a definition
    that says nothing: its hot paths stay as they were)."""

    concurrency: tuple[Concurrency, ...] = ()
    throttle: Throttle | None = None
    rate_limit: RateLimit | None = None
    debounce: Debounce | None = None
    singleton: Singleton | None = None
    batch: Batch | None = None
    priority: Any = None
    cancel_on: tuple[CancelOn, ...] = ()

    @property
    def gates_start(self) -> bool:
        """Whether a trigger is judged before its run starts."""
        return any((self.throttle, self.rate_limit, self.debounce, self.singleton, self.batch))


def concurrency_list(where: str, value: object) -> tuple[Concurrency, ...]:
    """`concurrency=` as given (one, or a list of up to two: per tenant and global)."""
    if value is None:
        return ()
    given = list(value) if isinstance(value, Sequence) and not isinstance(value, str) else [value]
    items = [c for c in given if isinstance(c, Concurrency)]
    if not 1 <= len(given) <= 2 or len(items) != len(given):
        raise WorkflowDefinitionError(
            f"{where}: concurrency must be a Concurrency(...) or a list of up to two"
        )
    if len({c.scope for c in items}) != len(items):
        raise WorkflowDefinitionError(
            f"{where}: two Concurrency limits need different scopes (per tenant and global)"
        )
    return tuple(items)


def _one(where: str, name: str, value: object, kind: type) -> Any:
    if value is not None and not isinstance(value, kind):
        raise WorkflowDefinitionError(f"{where}: {name} must be a {kind.__name__}(...)")
    return value


def _event_key(where: str, construct: str, key: object) -> None:
    """A workflow's key is read from its trigger event only (no step has run yet)."""
    for found in refs_in(key):
        if found.root != "event":
            raise WorkflowDefinitionError(
                f"{where}: {construct} key {found.text} reads the {found.root}, but a "
                "workflow's key is read from its trigger event (Event.payload[...])"
            )


def flow_control(
    where: str,
    concurrency: object = None,
    throttle: object = None,
    rate_limit: object = None,
    debounce: object = None,
    singleton: object = None,
    batch: object = None,
    priority: object = None,
    cancel_on: object = None,
    is_event_triggered: bool = True,
) -> FlowControl | None:
    """The checked FlowControl of a definition's keywords (None when none is given).

    Raises:
        WorkflowDefinitionError: a keyword holds the wrong construct, a key reads
            something other than the trigger event, or constructs that exclude each
            other are combined (debounce and batch).
    """
    limits = concurrency_list(where, concurrency)
    found = FlowControl(
        concurrency=limits,
        throttle=_one(where, "throttle", throttle, Throttle),
        rate_limit=_one(where, "rate_limit", rate_limit, RateLimit),
        debounce=_one(where, "debounce", debounce, Debounce),
        singleton=_one(where, "singleton", singleton, Singleton),
        batch=_one(where, "batch", batch, Batch),
        priority=priority,
        cancel_on=_cancel_on(where, cancel_on),
    )
    given = (
        limits,
        found.throttle,
        found.rate_limit,
        found.debounce,
        found.singleton,
        found.batch,
        found.cancel_on,
    )
    if priority is None and not any(given):  # never ==: a reference refuses comparison
        return None
    if priority is not None:
        _priority(where, priority)
    if found.debounce is not None and found.batch is not None:
        raise WorkflowDefinitionError(f"{where}: debounce and batch cannot be combined")
    starts = (found.throttle, found.rate_limit, found.debounce, found.singleton, found.batch)
    if any(starts) and not is_event_triggered:
        raise WorkflowDefinitionError(
            f"{where}: throttle, rate_limit, debounce, singleton and batch judge trigger "
            "events: give the workflow an on_event(...) trigger"
        )
    for name, construct in (
        *(("Concurrency", c) for c in limits),
        *((type(c).__name__, c) for c in starts if c is not None),
    ):
        _event_key(where, name, getattr(construct, "key", None))
    return found


def _priority(where: str, value: object) -> None:
    if isinstance(value, bool):
        raise WorkflowDefinitionError(f"{where}: priority must be an integer or a reference")
    if isinstance(value, int):
        if not -MAX_PRIORITY <= value <= MAX_PRIORITY:
            raise WorkflowDefinitionError(
                f"{where}: priority must be from -{MAX_PRIORITY} to {MAX_PRIORITY}, not {value}"
            )
        return
    if not (isinstance(value, Ref) or callable(value)):
        raise WorkflowDefinitionError(f"{where}: priority must be an integer or a reference")
    _event_key(where, "priority", value)


def _cancel_on(where: str, value: object) -> tuple[CancelOn, ...]:
    if value is None:
        return ()
    given = list(value) if isinstance(value, Sequence) else [value]
    items = [c for c in given if isinstance(c, CancelOn)]
    if len(items) != len(given):
        raise WorkflowDefinitionError(f"{where}: cancel_on must be a list of CancelOn(...)")
    for item in items:
        for ref in item.match.values():
            _event_key(where, "CancelOn", ref)
    return tuple(items)


def step_limits(
    where: str, concurrency: object, throttle: object
) -> tuple[tuple[Concurrency, ...], Throttle | None]:
    """A step's `concurrency=` and `throttle=`, checked."""
    return concurrency_list(where, concurrency), _one(where, "throttle", throttle, Throttle)
