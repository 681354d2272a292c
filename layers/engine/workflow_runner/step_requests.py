"""What a pass asks of the world outside it, built from a step's resolved arguments: a
mail or webhook request, and the child runs of call_workflow, start_workflow and map.
Pure: `call(value, scope)` resolves an argument against the pass's ctx."""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Literal

from .definition.branches import family_member
from .definition.dsl import (
    CallWorkflow,
    MailSend,
    Map,
    Parallel,
    Retry,
    Task,
    WaitForEvent,
    WebhookSend,
    run_id_for,
)
from .definition.retry import backoff_seconds
from .durations import parse_duration
from .match import validate_event_match
from .pass_result import ChildJoin, ChildSpec, EventWait, InvalidArgument
from .storable import check_storable
from .stream import Path

Call = Callable[[Any, dict[str, Any]], Any]
DISPATCH_NAMESPACE = uuid.UUID("6d0c4c8e-31f5-4c59-9d59-0f6f1c1a7a52")


def seeded_id(run_id: str, seed: str, what: str, path: Path) -> str:
    """An id stable when a rolled-back pass is repeated (same seed), new for each retry
    attempt or for_each item (the path differs) and for a redrive (a new seed)."""
    where = json.dumps(path, sort_keys=True, separators=(",", ":"))
    return str(uuid.uuid5(DISPATCH_NAMESPACE, f"{run_id}|{seed}|{what}|{where}"))


def backoff_delay(step: Retry, failed_attempt: int, rng: random.Random) -> timedelta:
    """Delay before the attempt after `failed_attempt` (1-based) of a retry step."""
    seconds = backoff_seconds(
        step.backoff, step.base, step.cap, step.jitter, failed_attempt, rng.random
    )
    return timedelta(seconds=seconds)


def task_id_for(run_id: str, seed: str, path: Path) -> str:
    """A task's attempt-group id: stable when a rolled-back pass is repeated (same seed),
    new for each retry attempt or for_each item (the path differs) and for a redrive."""
    return seeded_id(run_id, seed, "task", path)


def task_key(step: Task | MailSend | WebhookSend) -> str:
    """The key a task step's outcome is stored under."""
    if isinstance(step, Task):
        return step.key
    assert step.result_key is not None
    return step.result_key


def event_wait(
    step: WaitForEvent,
    match: Any,
    lookback: Any,
    now: datetime,
    started: datetime,
    max_bytes: int,
) -> EventWait:
    """The wait a wait_for_event step asks for, from its resolved match and lookback
    (`started`: when the run started, by its trigger event's time).

    Raises:
        InvalidArgument (match or lookback).
    """
    if match is not None:
        try:
            validate_event_match(match)
            check_storable(match, "the wait's match", max_bytes)
        except Exception as error:
            raise InvalidArgument.of("match", error) from error
    if lookback is None:
        # "After the run started": an awaited event's time is not before the trigger
        # event's (EventBridge stamps both), never the receiving functions' clocks:
        # EventBridge does not order deliveries to two rules, and a retried trigger may
        # start the run minutes late. Without event times, receive times stand in.
        lookback_from = started
    else:
        try:
            # Whole seconds: event times are (EventBridge's), so an event of the
            # second the wait began counts as after it.
            lookback_from = (now - parse_duration(lookback)).replace(microsecond=0)
        except Exception as error:
            raise InvalidArgument.of("lookback", error) from error
    return EventWait(step.event, match, lookback_from, step.result_key)


def delivery_request(
    step: MailSend | WebhookSend, call: Call, scope: dict[str, Any], max_bytes: int
) -> dict[str, Any]:
    """The request a mail or webhook step asks for, checked before it is stored.

    Raises:
        InvalidArgument, NotStorable, or what a resolver raised.
    """
    request: dict[str, Any]
    if isinstance(step, MailSend):
        to = call(step.to, scope)
        recipients = [to] if isinstance(to, str) else list(to or [])
        if not recipients or not all(isinstance(r, str) and "@" in r for r in recipients):
            raise InvalidArgument("to", "mail_send takes an address or a list of them")
        request = {
            "to": recipients,
            "subject": str(call(step.subject, scope)),
            "body": str(call(step.body, scope)),
            "from": call(step.from_, scope),
        }
    else:
        url = call(step.url, scope)
        if not isinstance(url, str) or not url:
            raise InvalidArgument("url", "webhook_send takes a non-empty string")
        method = call(step.method, scope) or "POST"
        if method not in ("POST", "PUT", "PATCH"):
            raise InvalidArgument("method", "webhook_send takes POST, PUT or PATCH")
        headers = call(step.headers, scope) or {}
        if not isinstance(headers, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
        ):
            raise InvalidArgument("headers", "webhook_send takes strings to strings")
        body = call(step.body, scope)
        check_storable(body, "webhook body", max_bytes)
        request = {
            "url": url,
            "method": method,
            "headers": dict(headers),
            "bodyJson": json.dumps(body, separators=(",", ":")),
            "auth": call(step.auth, scope),
        }
    if step.retry is not None:
        request["retry"] = step.retry.to_json()
    check_storable(request, f"{step.kind} request", max_bytes)
    return request


def child_join(
    step: CallWorkflow | Map,
    run_id: str,
    seed: str,
    path: Path,
    call: Call,
    scope: dict[str, Any],
    max_bytes: int,
    join_id: str | None = None,
) -> ChildJoin:
    """The child runs of a call_workflow, start_workflow or map step (`join_id`: the
    join to ask for again, instead of the one the seed and path name).

    Raises:
        InvalidArgument (input, over or key), NotStorable, or what a resolver raised.
    """
    join_id = join_id or seeded_id(run_id, seed, "join", path)
    kind: Literal["call", "map", "start"]
    if isinstance(step, Map):
        kind = "map"
        items = call(step.over, scope)
        if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Sequence):
            raise InvalidArgument("over", f"map needs a list, got {type(items).__name__}")
        children = []
        for index, item in enumerate(items):
            key = _key(call(step.key, {**scope, "item": item, "index": index}), join_id, index)
            payload = dict(item) if isinstance(item, Mapping) else {"item": item}
            check_storable(payload, f"map item {index}", max_bytes)
            children.append(ChildSpec(key, run_id_for(step.workflow, key), payload))
        concurrency = step.concurrency
        completion = step.completion
    else:
        kind = "call" if step.wait else "start"
        raw = call(step.input, scope)
        if raw is not None and not isinstance(raw, Mapping):
            raise InvalidArgument(
                "input", f"a child's input is a JSON object, not {type(raw).__name__}"
            )
        payload = dict(raw or {})
        check_storable(payload, f"the input of {step.kind}({step.workflow!r})", max_bytes)
        key = _key(call(step.key, scope), join_id, None)
        children = [ChildSpec(key, run_id_for(step.workflow, key), payload)]
        concurrency = 1
        completion = None
    return ChildJoin(
        join_id=join_id,
        kind=kind,
        workflow=step.workflow,
        children=tuple(children),
        concurrency=concurrency,
        result_key=step.result_key,
        catch=step.catch,
        path=path,
        completion=completion,
    )


def _key(value: Any, join_id: str, index: int | None) -> str:
    if value is None:
        return join_id if index is None else f"{join_id}/{index}"
    if isinstance(value, bool) or not isinstance(value, (str, int)) or value == "":
        raise InvalidArgument("key", "a child's key is a non-empty string")
    return str(value)


def branches_join(
    step: Parallel,
    family: str,
    run_id: str,
    seed: str,
    path: Path,
    branch_input: dict[str, Any],
    max_bytes: int,
    join_id: str | None = None,
) -> ChildJoin:
    """The child runs of a parallel of branches: a map over its branches whose item k
    runs branch k's internal workflow (`family`, definition/branches.py) with the same
    input (the parent's event and results).

    Raises:
        NotStorable: the input is too large to store.
    """
    join_id = join_id or seeded_id(run_id, seed, "join", path)
    check_storable(branch_input, "a branch's input (the run's event and results)", max_bytes)
    children = []
    for index in range(len(step.branches or ())):
        member = family_member(family, index)
        assert member is not None
        key = _key(None, join_id, index)
        children.append(ChildSpec(key, run_id_for(member[0], key), branch_input))
    return ChildJoin(
        join_id=join_id,
        kind="map",
        workflow=family,
        children=tuple(children),
        concurrency=step.max_concurrency or max(1, len(children)),
        result_key=step.result_key,
        catch=step.catch,
        path=path,
        completion=step.completion,
    )
