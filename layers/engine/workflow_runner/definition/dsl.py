"""The workflow definition language: triggers, the step vocabulary and define_workflow."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, TypeAlias

from ..cron import CronSchedule
from ..durations import parse_duration
from ..errors import WorkflowDefinitionError
from ..match import validate_event_match

# Frozen: changing it would re-key every existing run stream (seeds, aggregate-id.ts).
RUN_ID_NAMESPACE = uuid.UUID("1f8a6c3e-7d2b-4a91-9e3f-5c8b2a41d6f0")


def run_id_for(name: str, key: str) -> str:
    """Return the run id of workflow `name` for idempotency key `key` (uuid v5, no tenant)."""
    return str(uuid.uuid5(RUN_ID_NAMESPACE, f"{name}|{key}"))


@dataclass(frozen=True)
class DomainEvent:
    """A domain event as a workflow sees it (`ctx.event`)."""

    id: str
    type: str
    payload: Any
    tenant_id: str
    time: datetime | None = None
    source: str = ""


@dataclass(frozen=True)
class WorkflowInfo:
    """What a step knows about the run it belongs to (`ctx.workflow`)."""

    run_id: str
    workflow_name: str
    step_index: int
    retry_attempt: int
    definition_fingerprint: str


@dataclass(frozen=True)
class StepContext:
    """The argument every resolver receives."""

    event: DomainEvent
    steps: dict[str, Any]
    scope: dict[str, Any]
    workflow: WorkflowInfo
    now: datetime


Resolver: TypeAlias = Any  # a value, or a callable taking StepContext


def resolve(value: Resolver, ctx: StepContext) -> Any:
    """Return `value(ctx)` for a callable, else `value` itself."""
    return value(ctx) if callable(value) else value


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


Trigger: TypeAlias = EventTrigger | CronTrigger


def on_event(event_type: str, filter: Callable[[DomainEvent], bool] | None = None) -> EventTrigger:
    """Trigger a run for each domain event of `event_type` that passes `filter`."""
    if not isinstance(event_type, str) or not event_type.strip():
        raise WorkflowDefinitionError("on_event: event_type must be a non-empty string")
    if filter is not None and not callable(filter):
        raise WorkflowDefinitionError("on_event: filter must be a function of the event")
    return EventTrigger(event_type=event_type, filter=filter)


def on_cron(schedule: str, catchup: CatchUp = "all") -> CronTrigger:
    """Trigger a run per tenant at each instant of a 5-field UTC cron schedule.

    `catchup` decides what the due scan does with instants it reaches late (after an
    outage): "all" starts every one of them (the default), "latest" only the most
    recent, "none" only those at most a few minutes old.
    """
    CronSchedule.parse(schedule)
    if catchup not in CATCHUP_POLICIES:
        raise WorkflowDefinitionError(
            f"on_cron: catchup must be one of {', '.join(CATCHUP_POLICIES)}, not {catchup!r}"
        )
    return CronTrigger(schedule=schedule, catchup=catchup)


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


BackoffKind: TypeAlias = Literal["linear", "exponential", "fixed"]
JitterKind: TypeAlias = Literal["none", "full", "equal"]


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


@dataclass(frozen=True)
class WebhookSend:
    url: Resolver
    method: Resolver = "POST"
    headers: Resolver = None
    body: Resolver = None
    auth: Resolver = None
    key: str | None = None
    kind: str = "webhook.send"


@dataclass(frozen=True)
class Return:
    value: Resolver
    kind: str = "return"


Step: TypeAlias = (
    Compute | Branch | ForEach | Wait | WaitForEvent | Retry | MailSend | WebhookSend | Return
)

SUSPENDING_KINDS = frozenset({"wait", "wait_for_event", "retry"})


def as_steps(value: object, where: str) -> tuple[Step, ...]:
    if value is None:
        return ()
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise WorkflowDefinitionError(f"{where} must be a list of steps")
    steps = tuple(value)
    for i, step in enumerate(steps):
        if not isinstance(step, STEP_TYPES):
            raise WorkflowDefinitionError(
                f"{where}[{i}] is not a step (got {type(step).__name__}); "
                "build steps with the builder passed to steps=lambda s: [...]"
            )
    return steps


class StepBuilder:
    """The `s` in `steps=lambda s: [...]`: one method per step kind."""

    def __init__(self, awaits: Mapping[str, str]) -> None:
        self._awaits = dict(awaits)

    def compute(self, key: str, fn: Callable[[StepContext], Any]) -> Compute:
        """Run `fn(ctx)` and store its (JSON-serialisable) result under `key`."""
        if not isinstance(key, str) or not key:
            raise WorkflowDefinitionError("compute: key must be a non-empty string")
        if not callable(fn):
            raise WorkflowDefinitionError(f"compute({key!r}): fn must be a function of ctx")
        return Compute(key=key, fn=fn)

    def branch(
        self,
        if_: Resolver,
        on_true: Sequence[Step],
        on_false: Sequence[Step] | None = None,
    ) -> Branch:
        """Run `on_true` when `if_` is truthy, else `on_false`."""
        return Branch(
            if_=if_,
            on_true=as_steps(on_true, "branch.on_true"),
            on_false=as_steps(on_false, "branch.on_false"),
        )

    def for_each(self, over: Resolver, as_: str, do: Sequence[Step]) -> ForEach:
        """Run `do` once per item of `over`, in order, with `ctx.scope[as_]` set to the item."""
        if not isinstance(as_, str) or not as_:
            raise WorkflowDefinitionError("for_each: as_ must be a non-empty string")
        return ForEach(over=over, as_=as_, do=as_steps(do, "for_each.do"))

    def wait(self, for_: Resolver = None, until: Resolver = None) -> Wait:
        """Suspend for a duration (`for_`, ISO-8601) or until an instant (`until`)."""
        if (for_ is None) == (until is None):
            raise WorkflowDefinitionError("wait: give exactly one of for_= or until=")
        if isinstance(for_, str):
            parse_duration(for_)
        return Wait(for_=for_, until=until)

    def wait_for_event(
        self,
        event: str,
        match: Resolver = None,
        timeout: Resolver = "P7D",
        lookback: Resolver = None,
        result_key: str | None = None,
    ) -> WaitForEvent:
        """Suspend until an awaited event that satisfies `match` arrives, or `timeout` passes.

        `event` is an event type named in the workflow's `awaits` (or one of its keys).
        `lookback`: None (default) also accepts matching events stored since the run
        started; an ISO-8601 duration accepts those stored that long before the wait
        step was reached ("PT0S": only events after it).
        The matched event's payload (None on timeout) is stored under `result_key`
        (default: the event type).
        """
        event_type = self._awaits.get(event, event)
        if event_type not in self._awaits.values():
            raise WorkflowDefinitionError(
                f"wait_for_event: {event!r} is not declared in awaits "
                f"(declared: {sorted(self._awaits.values())}); add it to awaits={{...}}"
            )
        if isinstance(timeout, str) and timeout.startswith("P"):
            parse_duration(timeout)
        if isinstance(lookback, str):
            parse_duration(lookback)
        if isinstance(match, Mapping):
            validate_event_match(match)
        return WaitForEvent(
            event=event_type,
            match=match,
            timeout=timeout,
            lookback=lookback,
            result_key=result_key or event_type,
        )

    def retry(
        self,
        times: int,
        do: Sequence[Step],
        backoff: BackoffKind = "exponential",
        base: str = "PT10S",
        cap: str = "PT1H",
        jitter: JitterKind = "none",
    ) -> Retry:
        """Run `do`; when it raises, run it again from its first step after a backoff.

        `times` counts all attempts. Delay before attempt n+1: `base * n` (linear),
        `base * 2**(n-1)` (exponential) or `base` (fixed), at most `cap`; `jitter="full"`
        draws uniformly from [0, delay], `"equal"` from [delay/2, delay].
        """
        if isinstance(times, bool) or not isinstance(times, int) or times < 1:
            raise WorkflowDefinitionError("retry: times must be an integer >= 1")
        if backoff not in ("linear", "exponential", "fixed"):
            raise WorkflowDefinitionError(
                f"retry: backoff must be linear, exponential or fixed, not {backoff!r}"
            )
        if jitter not in ("none", "full", "equal"):
            raise WorkflowDefinitionError(
                f"retry: jitter must be none, full or equal, not {jitter!r}"
            )
        parse_duration(base)
        parse_duration(cap)
        return Retry(
            times=times,
            backoff=backoff,
            base=base,
            cap=cap,
            jitter=jitter,
            do=as_steps(do, "retry.do"),
        )

    def mail_send(
        self,
        to: Resolver,
        subject: Resolver,
        body: Resolver,
        from_: Resolver = None,
        key: str | None = None,
    ) -> MailSend:
        """Request a mail; the step dispatcher sends it after the pass commits."""
        return MailSend(to=to, subject=subject, body=body, from_=from_, key=key)

    def webhook_send(
        self,
        url: Resolver,
        body: Resolver = None,
        method: Resolver = "POST",
        headers: Resolver = None,
        auth: Resolver = None,
        key: str | None = None,
    ) -> WebhookSend:
        """Request an HTTPS call; the step dispatcher delivers it after the pass commits."""
        if isinstance(method, str) and method not in ("POST", "PUT", "PATCH"):
            raise WorkflowDefinitionError(
                f"webhook_send: method must be POST, PUT or PATCH, not {method!r}"
            )
        return WebhookSend(url=url, method=method, headers=headers, body=body, auth=auth, key=key)

    def return_(self, value: Resolver = None) -> Return:
        """End the run. `{"isSuccess": False, ...}` ends it as failed (reason returned_failure)."""
        return Return(value=value)


STEP_TYPES = (Compute, Branch, ForEach, Wait, WaitForEvent, Retry, MailSend, WebhookSend, Return)


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
