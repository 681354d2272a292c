"""Runs a workflow's step tree for one pass: from a start or resume point to the next
suspension, a return, the end, or a failure. Pure: no I/O; the caller persists."""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from .definition.dsl import (
    Branch,
    Compute,
    DomainEvent,
    ForEach,
    MailSend,
    Retry,
    Return,
    Step,
    StepContext,
    Wait,
    WaitForEvent,
    WebhookSend,
    WorkflowDefinition,
    WorkflowInfo,
    resolve,
)
from .durations import parse_duration, resolve_wake_at
from .errors import WorkflowRunnerError
from .match import validate_event_match
from .stream import Frame, Path

DISPATCH_NAMESPACE = uuid.UUID("6d0c4c8e-31f5-4c59-9d59-0f6f1c1a7a52")


class WorkflowStepError(WorkflowRunnerError):
    """A step produced something the engine cannot accept (bad wait time, result not JSON)."""


def describe_step_error(error: BaseException) -> str:
    """The generic text stored for a failed step; the raw message goes to the log only."""
    name = type(error).__name__ if isinstance(error, Exception) else ""
    return f"workflow step failed ({name})" if name else "workflow step failed (unknown error)"


@dataclass(frozen=True)
class EventWait:
    """What a wait_for_event suspension waits for."""

    event_type: str
    match: dict[str, Any] | None
    lookback_from: datetime
    result_key: str
    consumed_event_ids: list[str]


@dataclass(frozen=True)
class RetryWait:
    """The failed attempt of a retry and the budget it belongs to."""

    attempt: int
    max_attempts: int
    error: str


@dataclass(frozen=True)
class Suspension:
    """Where a pass stopped: `path`, due at `wake_at` (a wait's time, a wait_for_event's
    timeout, a retry's next attempt)."""

    kind: Literal["waiting", "waiting-for-event", "retry-scheduled"]
    path: Path
    wake_at: datetime
    event: EventWait | None = None
    retry: RetryWait | None = None

    @property
    def step_index(self) -> int:
        return int(self.path[0]["i"])


@dataclass(frozen=True)
class DispatchRequest:
    request_id: str
    step_kind: str
    step_index: int
    path: Path
    request: dict[str, Any]


@dataclass
class PassResult:
    outcome: Literal["suspended", "completed", "failed"]
    results: dict[str, Any]
    awaited_refs: dict[str, str | None]
    dispatches: list[DispatchRequest]
    suspension: Suspension | None = None
    return_value: Any = None
    reason: str | None = None
    error: str | None = None
    error_detail: str | None = None
    failed_path: Path = field(default_factory=list)

    def persisted_results(self) -> dict[str, Any]:
        """Results to carry on the suspension event: awaited payloads stay references."""
        return {k: v for k, v in self.results.items() if k not in self.awaited_refs}


class _Suspend(Exception):
    def __init__(self, suspension: Suspension) -> None:
        self.suspension = suspension


class _Returned(Exception):
    def __init__(self, value: Any) -> None:
        self.value = value


class _StepFailed(Exception):
    def __init__(self, error: BaseException, path: Path) -> None:
        self.error = error
        self.path = path


def step_at(steps: Sequence[Step], path: Path) -> Step:
    """Return the step a path points to.

    Raises:
        WorkflowStepError: the path does not fit this step tree.
    """
    current: Sequence[Step] = steps
    step: Step | None = None
    for depth, frame in enumerate(path):
        index = frame.get("i")
        if not isinstance(index, int) or not 0 <= index < len(current):
            raise WorkflowStepError(f"path {path} does not fit the workflow's steps")
        step = current[index]
        if depth == len(path) - 1:
            break
        if isinstance(step, Branch):
            current = step.on_true if frame.get("arm") == "true" else step.on_false
        elif isinstance(step, (ForEach, Retry)):
            current = step.do
        else:
            raise WorkflowStepError(f"path {path} enters a step that has no sub-steps")
    if step is None:
        raise WorkflowStepError("empty path")
    return step


def backoff_delay(step: Retry, failed_attempt: int, rng: random.Random) -> timedelta:
    """Delay before the attempt after `failed_attempt` (1-based)."""
    base = parse_duration(step.base).total_seconds()
    cap = parse_duration(step.cap).total_seconds()
    if step.backoff == "linear":
        delay = base * failed_attempt
    elif step.backoff == "exponential":
        delay = base * 2.0 ** min(failed_attempt - 1, 60)
    else:
        delay = base
    delay = min(cap, delay)
    if step.jitter == "full":
        delay = rng.uniform(0, delay)
    elif step.jitter == "equal":
        delay = delay / 2 + rng.uniform(0, delay / 2)
    return timedelta(seconds=delay)


def _json_value(value: Any, what: str) -> Any:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as error:
        raise WorkflowStepError(f"{what} is not JSON-serialisable: {error}") from error
    return value


class Interpreter:
    """Executes one pass of a run.

    Args:
        definition: the workflow (the exact version the run is pinned to).
        event: the run's trigger event.
        run_id: the run.
        now: business time of the pass.
        results: step results restored from the last suspension (mutated).
        awaited_refs: result keys that hold an awaited event's payload -> inbox event id.
        dispatch_seed: unique per pass and stable across retries of the same pass, so
            a pass that is rolled back and repeated requests the same dispatch ids.
    """

    def __init__(
        self,
        definition: WorkflowDefinition,
        event: DomainEvent,
        run_id: str,
        now: datetime,
        results: dict[str, Any] | None = None,
        awaited_refs: dict[str, str | None] | None = None,
        dispatch_seed: str = "",
        run_started_at: datetime | None = None,
        consumed_event_ids: Sequence[str] = (),
        rng: random.Random | None = None,
    ) -> None:
        self.definition = definition
        self.event = event
        self.run_id = run_id
        self.now = now
        self.results: dict[str, Any] = dict(results or {})
        self.awaited_refs: dict[str, str | None] = dict(awaited_refs or {})
        self.dispatch_seed = dispatch_seed
        self.run_started_at = run_started_at or now
        self.consumed_event_ids = list(consumed_event_ids)
        self.rng = rng or random.Random()
        self.dispatches: list[DispatchRequest] = []
        self._attempts: list[int] = []

    def run(self, resume_path: Path | None = None) -> PassResult:
        """Run from the start (no path) or resume at `resume_path`.

        A resume path ending at a wait or wait_for_event continues after that step
        (seed the awaited result first); one ending at a retry frame re-enters the
        retry at the attempt the frame names.
        """
        try:
            self._run_list(self.definition.steps, [], resume_path or None, {})
        except _Suspend as suspend:
            return self._result("suspended", suspension=suspend.suspension)
        except _Returned as returned:
            value = returned.value
            if isinstance(value, Mapping) and value.get("isSuccess") is False:
                return self._result(
                    "failed",
                    return_value=value,
                    reason="returned_failure",
                    error="workflow returned a failure",
                )
            return self._result("completed", return_value=value)
        except _StepFailed as failed:
            return self._result(
                "failed",
                error=describe_step_error(failed.error),
                error_detail=f"{type(failed.error).__name__}: {failed.error}",
                failed_path=failed.path,
            )
        return self._result("completed")

    def _result(
        self, outcome: Literal["suspended", "completed", "failed"], **kw: Any
    ) -> PassResult:
        return PassResult(
            outcome=outcome,
            results=self.results,
            awaited_refs=self.awaited_refs,
            dispatches=self.dispatches,
            **kw,
        )

    def _ctx(self, path: Path, scope: dict[str, Any]) -> StepContext:
        return StepContext(
            event=self.event,
            steps=self.results,
            scope=scope,
            workflow=WorkflowInfo(
                run_id=self.run_id,
                workflow_name=self.definition.name,
                step_index=int(path[0]["i"]),
                retry_attempt=self._attempts[-1] if self._attempts else 1,
                definition_fingerprint=self.definition.fingerprint,
            ),
            now=self.now,
        )

    def _run_list(
        self, steps: Sequence[Step], prefix: Path, resume: Path | None, scope: dict[str, Any]
    ) -> None:
        start = int(resume[0]["i"]) if resume else 0
        for index in range(start, len(steps)):
            self._run_step(steps[index], prefix, index, resume if index == start else None, scope)

    def _run_step(
        self, step: Step, prefix: Path, index: int, resume: Path | None, scope: dict[str, Any]
    ) -> None:
        path = [*prefix, {"i": index}]
        head = resume[0] if resume else None
        rest = resume[1:] if resume else None
        if isinstance(step, Retry):
            self._run_retry(step, prefix, index, head, rest, scope)
            return
        if isinstance(step, Branch):
            if head is not None and head.get("arm") in ("true", "false"):
                arm = str(head["arm"])
            else:
                arm = "true" if self._call(step.if_, path, scope) else "false"
            steps = step.on_true if arm == "true" else step.on_false
            self._run_list(steps, [*prefix, {"i": index, "arm": arm}], rest or None, scope)
            return
        if isinstance(step, ForEach):
            self._run_for_each(step, prefix, index, head, rest, scope)
            return
        if resume is not None and isinstance(step, (Wait, WaitForEvent)):
            # Resumed at this very step: its effect (the suspension) already happened;
            # the caller has seeded an awaited event's payload under its result key.
            return
        if isinstance(step, Compute):
            value = self._checked(self._call(step.fn, path, scope), f"compute({step.key!r})", path)
            self.results[step.key] = value
            self.awaited_refs.pop(step.key, None)
        elif isinstance(step, Wait):
            raw = step.for_ if step.for_ is not None else step.until
            wake_at = self._wake_at(self._call(raw, path, scope), path)
            raise _Suspend(Suspension("waiting", path, wake_at))
        elif isinstance(step, WaitForEvent):
            self._suspend_for_event(step, path, scope)
        elif isinstance(step, (MailSend, WebhookSend)):
            self._request_dispatch(step, path, scope)
        elif isinstance(step, Return):
            value = self._checked(self._call(step.value, path, scope), "return value", path)
            raise _Returned(value)

    def _checked(self, value: Any, what: str, path: Path) -> Any:
        try:
            return _json_value(value, what)
        except WorkflowStepError as error:
            raise _StepFailed(error, path) from error

    def _call(self, value: Any, path: Path, scope: dict[str, Any]) -> Any:
        try:
            return resolve(value, self._ctx(path, scope))
        except (_Suspend, _Returned, _StepFailed):
            raise
        except Exception as error:
            raise _StepFailed(error, path) from error

    def _wake_at(self, raw: Any, path: Path) -> datetime:
        try:
            return resolve_wake_at(raw, self.now)
        except Exception as error:
            raise _StepFailed(error, path) from error

    def _suspend_for_event(self, step: WaitForEvent, path: Path, scope: dict[str, Any]) -> None:
        match = self._call(step.match, path, scope)
        if match is not None:
            try:
                validate_event_match(match)
            except Exception as error:
                raise _StepFailed(error, path) from error
        timeout_at = self._wake_at(self._call(step.timeout, path, scope), path)
        lookback = self._call(step.lookback, path, scope)
        if lookback is None:
            # "Stored after the run started" is decided on the events' own clock: an
            # awaited event counts when its time is not before the trigger event's time
            # (EventBridge stamps both), never by comparing the clocks of the functions
            # that received them. EventBridge does not order deliveries to two rules, and
            # a retried trigger may start the run minutes after the awaited event came.
            # Without an event time (events handed to the engine directly) the trigger's
            # receive time stands in, as it does for the awaited event.
            lookback_from = self.event.time or self.run_started_at
        else:
            try:
                # Whole seconds: event times are (EventBridge's), so an event of the
                # second the wait began counts as after it.
                lookback_from = (self.now - parse_duration(lookback)).replace(microsecond=0)
            except Exception as error:
                raise _StepFailed(error, path) from error
        wait = EventWait(
            event_type=step.event,
            match=match,
            lookback_from=lookback_from,
            result_key=step.result_key,
            consumed_event_ids=list(self.consumed_event_ids),
        )
        raise _Suspend(Suspension("waiting-for-event", path, timeout_at, event=wait))

    def _run_retry(
        self,
        step: Retry,
        prefix: Path,
        index: int,
        head: Frame | None,
        rest: Path | None,
        scope: dict[str, Any],
    ) -> None:
        attempt = int(head.get("attempt", 1)) if head is not None else 1
        frame_path = [*prefix, {"i": index, "attempt": attempt}]
        self._attempts.append(attempt)
        try:
            self._run_list(step.do, frame_path, rest or None, scope)
        except _StepFailed as failed:
            if attempt >= step.times:
                raise
            wake_at = self.now + backoff_delay(step, attempt, self.rng)
            wait = RetryWait(attempt, step.times, describe_step_error(failed.error))
            retry_path = [*prefix, {"i": index, "attempt": attempt + 1}]
            raise _Suspend(Suspension("retry-scheduled", retry_path, wake_at, retry=wait)) from None
        finally:
            self._attempts.pop()

    def _run_for_each(
        self,
        step: ForEach,
        prefix: Path,
        index: int,
        head: Frame | None,
        rest: Path | None,
        scope: dict[str, Any],
    ) -> None:
        path = [*prefix, {"i": index}]
        items = self._call(step.over, path, scope)
        if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Sequence):
            raise _StepFailed(
                WorkflowStepError(f"for_each over must give a list, got {type(items).__name__}"),
                path,
            )
        first = int(head.get("item", 0)) if head is not None else 0
        for k in range(first, len(items)):
            inner_scope = {**scope, step.as_: items[k]}
            inner_resume = rest if (head is not None and k == first) else None
            self._run_list(
                step.do, [*prefix, {"i": index, "item": k}], inner_resume or None, inner_scope
            )

    def _request_dispatch(
        self, step: MailSend | WebhookSend, path: Path, scope: dict[str, Any]
    ) -> None:
        request: dict[str, Any]
        try:
            if isinstance(step, MailSend):
                to = self._call(step.to, path, scope)
                recipients = [to] if isinstance(to, str) else list(to or [])
                if not recipients or not all(isinstance(r, str) and "@" in r for r in recipients):
                    raise WorkflowStepError(
                        "mail_send: to must be an address or a list of addresses"
                    )
                request = {
                    "to": recipients,
                    "subject": str(self._call(step.subject, path, scope)),
                    "body": str(self._call(step.body, path, scope)),
                    "from": self._call(step.from_, path, scope),
                }
            else:
                url = self._call(step.url, path, scope)
                if not isinstance(url, str) or not url:
                    raise WorkflowStepError("webhook_send: url must be a non-empty string")
                method = self._call(step.method, path, scope) or "POST"
                if method not in ("POST", "PUT", "PATCH"):
                    raise WorkflowStepError("webhook_send: method must be POST, PUT or PATCH")
                headers = self._call(step.headers, path, scope) or {}
                if not isinstance(headers, Mapping) or not all(
                    isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
                ):
                    raise WorkflowStepError("webhook_send: headers must map strings to strings")
                body = _json_value(self._call(step.body, path, scope), "webhook body")
                request = {
                    "url": url,
                    "method": method,
                    "headers": dict(headers),
                    "bodyJson": json.dumps(body, separators=(",", ":")),
                    "auth": _json_value(self._call(step.auth, path, scope), "webhook auth"),
                }
        except _StepFailed:
            raise
        except Exception as error:
            raise _StepFailed(error, path) from error
        seq = len(self.dispatches)
        request_id = str(
            uuid.uuid5(DISPATCH_NAMESPACE, f"{self.run_id}|{self.dispatch_seed}|{seq}")
        )
        self.dispatches.append(
            DispatchRequest(
                request_id=request_id,
                step_kind=step.kind,
                step_index=int(path[0]["i"]),
                path=path,
                request=request,
            )
        )
        if step.key:
            self.results[step.key] = {"requestId": request_id}
            self.awaited_refs.pop(step.key, None)
