"""The step builder: the `s` in `steps=lambda s: [...]`, one method per step kind, each
checking its static arguments when the workflow is defined."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any

from ..durations import canonical_duration, is_duration, parse_duration
from ..errors import DefinitionArgumentError, WorkflowDefinitionError
from ..flow.constructs import step_limits
from ..match import validate_event_match
from ..refs import contains_refs
from ..suggest import did_you_mean, listing
from .callbacks import CallbackSteps
from .completion import Completion
from .conditions import ConditionSteps
from .dsl import (
    MAX_MAP_CONCURRENCY,
    MAX_TASK_TIMEOUT,
    Branch,
    BranchResult,
    CallWorkflow,
    Compute,
    ForEach,
    MailSend,
    Map,
    Parallel,
    Resolver,
    Retry,
    Return,
    Step,
    StepContext,
    Task,
    Wait,
    WaitForEvent,
    WebhookSend,
)
from .parallel_args import build_parallel
from .retry import BackoffKind, JitterKind, RetryPolicy, check_backoff
from .step_lists import as_steps


class StepBuilder(CallbackSteps, ConditionSteps):
    """The `s` in `steps=lambda s: [...]`: one method per step kind (the callback steps
    are in definition/callbacks.py, wait_for_condition in definition/conditions.py)."""

    def __init__(self, awaits: Mapping[str, str]) -> None:
        self._awaits = dict(awaits)
        self._created_callbacks = set()

    def _undeclared(self, event: object) -> str:
        """What to say about a wait for an event the workflow does not declare."""
        if not self._awaits:
            return (
                f"{event!r} is not declared in awaits, and the workflow declares none: add "
                f"awaits={{'name': 'event.type'}} to define_workflow"
            )
        names = sorted(self._awaits)
        types = sorted(set(self._awaits.values()))
        hint = ""
        if isinstance(event, str):  # the names first: they are what the workflow calls them
            hint = did_you_mean(event, names) or did_you_mean(event, types)
        return (
            f"{event!r} is not declared in awaits{hint} (names: {listing(names)}; or an "
            f"event type: {listing(types)})" + ("" if hint else "; add it to awaits={...}")
        )

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
        """Suspend for a duration (`for_`: "PT10M", "10m") or until an instant (`until`)."""
        if (for_ is None) == (until is None):
            raise WorkflowDefinitionError("wait: give exactly one of for_= or until=")
        return Wait(for_=_duration(for_), until=until)

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
        started; a duration accepts those stored that long before the wait step was
        reached ("PT0S": only events after it).
        The matched event's payload (None on timeout) is stored under `result_key`
        (default: the event type).
        """
        event_type = self._awaits.get(event, event)
        if event_type not in self._awaits.values():
            raise DefinitionArgumentError("wait_for_event", "event", self._undeclared(event))
        if isinstance(match, Mapping) and not contains_refs(match):
            validate_event_match(match)
        return WaitForEvent(
            event=event_type,
            match=match,
            timeout=_duration_or_instant(timeout),
            lookback=_duration(lookback),
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
        check_backoff("retry", backoff, jitter, base, cap)
        return Retry(
            times=times,
            backoff=backoff,
            base=canonical_duration(base),
            cap=canonical_duration(cap),
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
        result_key: str | None = None,
        retry: RetryPolicy | None = None,
        catch: bool = False,
        concurrency: Any = None,
        throttle: Any = None,
    ) -> MailSend:
        """Send a mail after the pass commits.

        Without `result_key` the run goes on at once (fire and forget; the delivery's
        outcome is still recorded). With it, the mail is a task: the run waits for the
        delivery and finds `{"messageId": ...}` under `result_key`; a failed delivery
        fails the run (reason task_failed) unless `catch=True`. Mail is delivered at
        most once: a send cut off by a crash is not repeated but reported ambiguous.

        Args:
            key: store `{"requestId": ...}` under this key (fire and forget).
            retry: attempts and backoff for failures the provider reports.
            concurrency: `Concurrency(...)` (or a list of up to two): at most so many
                sends in flight at once per key (with `result_key` only).
            throttle: `Throttle(...)`: at most so many sends per period per key (with
                `result_key` only).
        """
        _check_delivery("mail_send", key, result_key, retry, catch)
        limits, rate = _limits("mail_send", result_key, concurrency, throttle)
        return MailSend(
            to=to,
            subject=subject,
            body=body,
            from_=from_,
            key=key,
            result_key=result_key,
            retry=retry,
            catch=catch,
            concurrency=limits,
            throttle=rate,
        )

    def webhook_send(
        self,
        url: Resolver,
        body: Resolver = None,
        method: Resolver = "POST",
        headers: Resolver = None,
        auth: Resolver = None,
        key: str | None = None,
        result_key: str | None = None,
        retry: RetryPolicy | None = None,
        catch: bool = False,
        concurrency: Any = None,
        throttle: Any = None,
    ) -> WebhookSend:
        """Call an HTTPS endpoint after the pass commits (Idempotency-Key: the request id).

        Without `result_key` the run goes on at once (fire and forget; the outcome is
        still recorded). With it, the call is a task: the run waits and finds
        `{"status": <int>, "body": <JSON or text, at most 64 KB>}` under `result_key`.
        5xx, 429 and network errors are retried by `retry`; other statuses and a
        refused destination fail the task at once (`catch=True` lets the run go on with
        `{"failed": true, "error": ..., "attempts": n}`). `concurrency=` and `throttle=`
        (with `result_key` only) bound the calls in flight and their rate per key.
        """
        if isinstance(method, str) and method not in ("POST", "PUT", "PATCH"):
            raise WorkflowDefinitionError(
                f"webhook_send: method must be POST, PUT or PATCH, not {method!r}"
            )
        _check_delivery("webhook_send", key, result_key, retry, catch)
        limits, rate = _limits("webhook_send", result_key, concurrency, throttle)
        return WebhookSend(
            url=url,
            method=method,
            headers=headers,
            body=body,
            auth=auth,
            key=key,
            result_key=result_key,
            retry=retry,
            catch=catch,
            concurrency=limits,
            throttle=rate,
        )

    def task(
        self,
        key: str,
        fn: Callable[[StepContext], Any],
        retry: RetryPolicy | None = None,
        timeout: str = "PT30S",
        catch: bool = False,
        concurrency: Any = None,
        throttle: Any = None,
    ) -> Task:
        """Run `fn(ctx)` on a worker, outside the pass's transaction, and store its JSON
        result under `key` for the steps after it.

        The run suspends here; a worker runs the task at least once per attempt (with
        `ctx.workflow.retry_attempt` the attempt, 1-based, and `ctx.workflow.task_key` a
        key stable across attempts to hand to the service called), records the outcome
        on the run's stream, and the run resumes at once.

        Args:
            key: the result key (unique in the workflow).
            fn: a function of ctx; what it returns must be JSON (at most 256 KB).
            retry: attempts and backoff (default RetryPolicy(): 3 attempts, exponential
                from 1 s, capped at 5 min, no jitter); `non_retryable` classes fail at once.
            timeout: the duration bounding one attempt ("PT30S", "30s"; at most 14 min).
            catch: on final failure go on with `{"failed": true, "error": "<Class>",
                "attempts": n}` under `key` instead of failing the run (reason task_failed;
                result_not_storable when its result is not JSON or over 256 KB).
            concurrency: `Concurrency(limit, key=..., scope=...)` (or a list of up to two:
                per tenant and global): at most `limit` attempts in flight at once per
                key; the others wait, woken as a slot frees.
            throttle: `Throttle(limit, period, key=..., burst=...)`: at most `limit`
                attempts per `period` per key, in arrival order.
        """
        if not isinstance(key, str) or not key:
            raise WorkflowDefinitionError("task: key must be a non-empty string")
        if not callable(fn):
            raise WorkflowDefinitionError(f"task({key!r}): fn must be a function of ctx")
        if retry is not None and not isinstance(retry, RetryPolicy):
            raise WorkflowDefinitionError(f"task({key!r}): retry must be a RetryPolicy")
        if not isinstance(timeout, str):
            raise WorkflowDefinitionError(f"task({key!r}): timeout must be a duration string")
        limit = parse_duration(timeout)
        if not timedelta(0) < limit <= MAX_TASK_TIMEOUT:
            raise WorkflowDefinitionError(
                f"task({key!r}): timeout {timeout!r} must be longer than zero and at most PT14M"
            )
        if not isinstance(catch, bool):
            raise WorkflowDefinitionError(f"task({key!r}): catch must be True or False")
        limits, rate = step_limits(f"task({key!r})", concurrency, throttle)
        return Task(
            key=key,
            fn=fn,
            retry=retry or RetryPolicy(),
            timeout=canonical_duration(timeout),
            catch=catch,
            concurrency=limits,
            throttle=rate,
        )

    def call_workflow(
        self,
        name: str,
        input: Resolver = None,
        key: Resolver = None,
        result_key: str | None = None,
        catch: bool = False,
    ) -> CallWorkflow:
        """Start workflow `name` as a child run (same tenant) and wait until it settles.

        Args:
            name: the child workflow (any registered workflow; `on_call()` for one that
                only workflows start).
            input: the child's `ctx.event.payload` (a JSON object; resolvable).
            key: the child's idempotency key (resolvable): its run id derives from
                `name` and `key`, so a repeated pass never starts two. Default: this run
                and step, so each call starts its own child.
            result_key: where the child's return value lands.
            catch: a failed or cancelled child lets the run go on with
                `{"failed": true, "reason": ..., "runId": ...}` under `result_key`
                instead of failing it (reason child_failed).
        """
        _check_child("call_workflow", name, result_key, catch)
        return CallWorkflow(workflow=name, input=input, key=key, result_key=result_key, catch=catch)

    def start_workflow(
        self, name: str, input: Resolver = None, key: Resolver = None
    ) -> CallWorkflow:
        """Start workflow `name` as a child run and go on at once (fire and forget; the
        start is recorded on both runs, and the child outlives this run)."""
        _check_child("start_workflow", name, None, False)
        return CallWorkflow(
            workflow=name, input=input, key=key, result_key=None, catch=False, wait=False
        )

    def map(
        self,
        over: Resolver,
        workflow: str,
        key: Resolver = None,
        concurrency: int = 10,
        result_key: str | None = None,
        catch: bool = False,
        completion: Completion | None = None,
    ) -> Map:
        """Run workflow `workflow` once per item of `over` as child runs, at most
        `concurrency` at once; their return values land, in item order, as a list under
        `result_key`.

        Each item is its child's `ctx.event.payload` (an item that is not a JSON object
        arrives as `{"item": value}`); the child reads its item's index as
        `ctx.workflow.map_index`. `key` (resolvable, with `ctx.scope["item"]` and
        `ctx.scope["index"]` set) names each child (default: this run, step and index).
        A failed child fails the run (reason child_failed) and stops the map at once (no
        further child starts, those still running are cancelled), unless `catch=True`:
        then its slot holds `{"failed": true, "reason": ..., "runId": ...}`.

        With `completion=Completion(...)` the step yields a batch result under
        `result_key` instead, and ends as the policy says (see Completion); `catch=True`
        then lets the run go on when a tolerance is exceeded.
        """
        _check_child("map", workflow, result_key, catch)
        _check_completion(f"map({workflow!r})", completion)
        if (
            isinstance(concurrency, bool)
            or not isinstance(concurrency, int)
            or not 1 <= concurrency <= MAX_MAP_CONCURRENCY
        ):
            raise WorkflowDefinitionError(
                f"map({workflow!r}): concurrency must be an integer from 1 to "
                f"{MAX_MAP_CONCURRENCY}, not {concurrency!r}"
            )
        return Map(
            over=over,
            workflow=workflow,
            key=key,
            concurrency=concurrency,
            result_key=result_key,
            catch=catch,
            completion=completion,
        )

    def parallel(
        self,
        *tasks: Step,
        branches: Sequence[Sequence[Step]] | None = None,
        max_concurrency: int | None = None,
        result_key: str | None = None,
        completion: Completion | None = None,
        catch: bool = False,
    ) -> Parallel:
        """Run several tasks, or several branches of steps, at once; the run goes on when
        all have settled.

        Tasks (`s.task(...)`, or `mail_send`/`webhook_send` with a `result_key`): each
        result lands under its own key; `result_key` also gets the list of them, in
        order. A task that fails for good and does not catch fails the run at once (the
        other tasks are stopped: they do not run again).

        `branches=[[steps...], [steps...]]`: each branch is a step list that may wait,
        call tasks or workflows and retry; it runs as a child run of an internal
        workflow (see the docs: "Parallel branches"), at most `max_concurrency` at once
        (default: all). It sees the run's `ctx.event` and the results stored before the
        parallel in `ctx.steps` (its own results stay in the branch). Its result is the
        value of its `s.branch_result(value)` step, else the value stored by its last
        top-level step that stores one (None when none does); `result_key` gets them in
        branch order. The first branch that fails fails the run (reason child_failed)
        and stops the others. `s.parallel()` with nothing completes with `[]`.

        With `completion=Completion(...)` the step yields a batch result under
        `result_key` instead and ends as the policy says (see Completion): the tasks or
        branches still waiting are stopped (a task attempt already running finishes
        unheard; a running branch is cancelled). `catch=True` (only with `completion`)
        lets the run go on when a tolerance is exceeded.
        """
        return build_parallel(tasks, branches, max_concurrency, result_key, completion, catch)

    def branch_result(self, value: Resolver = None) -> BranchResult:
        """End the parallel's branch this step is in, with `value` (resolvable) as the
        branch's result. Only inside `s.parallel(branches=[...])`."""
        return BranchResult(value=value)

    def return_(self, value: Resolver = None) -> Return:
        """End the run. `{"isSuccess": False, ...}` ends it as failed (reason returned_failure)."""
        return Return(value=value)


def _limits(where: str, result_key: object, concurrency: object, throttle: object) -> Any:
    if result_key is None and (concurrency is not None or throttle is not None):
        raise WorkflowDefinitionError(
            f"{where}: concurrency= and throttle= need result_key= (a fire-and-forget "
            "delivery is not a task)"
        )
    return step_limits(where, concurrency, throttle)


def _duration(value: Resolver) -> Resolver:
    """A static duration as the definition stores it (ISO-8601, see canonical_duration);
    anything else (a resolver, None, a timedelta) as given.

    Raises:
        InvalidDuration: a string that is not a duration.
    """
    return canonical_duration(value) if isinstance(value, str) else value


def _duration_or_instant(value: Resolver) -> Resolver:
    """A static timeout: a duration as the definition stores it, an instant as given."""
    return _duration(value) if isinstance(value, str) and is_duration(value) else value


def _check_child(where: str, name: object, result_key: object, catch: object) -> None:
    if not isinstance(name, str) or not name.strip():
        raise WorkflowDefinitionError(f"{where}: the workflow name must be a non-empty string")
    if result_key is not None and (not isinstance(result_key, str) or not result_key):
        raise WorkflowDefinitionError(f"{where}({name!r}): result_key must be a non-empty string")
    if not isinstance(catch, bool):
        raise WorkflowDefinitionError(f"{where}({name!r}): catch must be True or False")


def _check_completion(where: str, completion: object) -> None:
    if completion is not None and not isinstance(completion, Completion):
        raise WorkflowDefinitionError(
            f"{where}: completion must be a Completion(...), not {type(completion).__name__}"
        )


def _check_delivery(
    where: str, key: object, result_key: object, retry: object, catch: object
) -> None:
    if result_key is not None and (not isinstance(result_key, str) or not result_key):
        raise WorkflowDefinitionError(f"{where}: result_key must be a non-empty string")
    if result_key is not None and key is not None:
        raise WorkflowDefinitionError(
            f"{where}: give key= (fire and forget) or result_key= (wait for the outcome)"
        )
    if retry is not None and not isinstance(retry, RetryPolicy):
        raise WorkflowDefinitionError(f"{where}: retry must be a RetryPolicy")
    if not isinstance(catch, bool):
        raise WorkflowDefinitionError(f"{where}: catch must be True or False")
    if catch and result_key is None:
        raise WorkflowDefinitionError(
            f"{where}: catch=True needs result_key= (a fire-and-forget delivery has no "
            "outcome for the run to catch)"
        )
