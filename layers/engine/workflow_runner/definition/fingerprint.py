"""A definition's fingerprint: what a run is pinned to (invariant 7).

The algorithm is part of the storage contract: every waiting run recorded the
fingerprint of the definition it started on, and resumes only on a registered
definition with the same one. Changing what is hashed fails every run in flight on
the next deploy (tests/compat pins the fingerprints of recorded runs).
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import io
import json
import tokenize
from collections.abc import Callable, Mapping
from typing import Any

from ..refs import Ref
from .completion import Completion
from .dsl import STEP_TYPES, CallTrigger, EventTrigger, WorkflowDefinition
from .retry import RetryPolicy


def _source_of(fn: Callable[..., Any]) -> str:
    """Whitespace-normalised source of a callable; its bytecode shape when no source exists."""
    try:
        lines = inspect.getsource(fn).splitlines()
        return "\n".join(line.strip() for line in lines if line.strip())
    except (OSError, TypeError):
        code = getattr(fn, "__code__", None)
        if code is None:
            return repr(type(fn))
        return f"{code.co_name}:{code.co_code.hex()}:{code.co_consts!r}"


# Flow control's arguments (limits) are left out of the builder's source, as out of the
# steps and the definition, so that a changed limit keeps the hash: those of task, mail
# and webhook steps, and those of define_workflow (a lambda's source holds the line it
# starts on, which may be inside the define_workflow call).
_STEP_LIMITS = frozenset({"concurrency", "throttle"})
_WORKFLOW_LIMITS = frozenset(
    {
        "concurrency",
        "throttle",
        "rate_limit",
        "debounce",
        "singleton",
        "batch",
        "priority",
        "cancel_on",
    }
)
_LIMITED_CALLS = {
    "task": _STEP_LIMITS,
    "webhook_send": _STEP_LIMITS,
    "mail_send": _STEP_LIMITS,
    "define_workflow": _WORKFLOW_LIMITS,
}


def without_limits(source: str) -> str:
    """`source` without the flow-control arguments of task, mail and webhook step calls
    and of define_workflow (each with its comma); unchanged when it has none."""
    if not any(word in source for word in _WORKFLOW_LIMITS):
        return source
    lines = source.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    tokens: list[tokenize.TokenInfo] = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            tokens.append(token)
    except (tokenize.TokenError, SyntaxError, IndentationError):
        pass  # a fragment (a lambda's lines): the tokens before the end are enough
    cuts: list[tuple[int, int]] = []
    # The open limited calls, (depth, their keywords); the fragment's own level counts
    # as inside define_workflow (a lambda given as its steps= on a line of its own).
    calls: list[tuple[int, frozenset[str]]] = [(0, _WORKFLOW_LIMITS)]
    depth = 0
    for i, token in enumerate(tokens):
        if token.type == tokenize.OP and token.string in "([{":
            depth += 1
            name = tokens[i - 1].string if i else ""
            if token.string == "(" and name in _LIMITED_CALLS:
                calls.append((depth, _LIMITED_CALLS[name]))
        elif token.type == tokenize.OP and token.string in ")]}":
            if calls and calls[-1][0] == depth:
                calls.pop()
            depth -= 1
        elif (
            calls
            and calls[-1][0] == depth
            and token.type == tokenize.NAME
            and token.string in calls[-1][1]
            and i + 1 < len(tokens)
            and tokens[i + 1].string == "="
        ):
            cuts.append(_argument_span(tokens, i, depth, starts))
    for begin, end in reversed(cuts):
        source = source[:begin] + source[end:]
    return source


def _argument_span(
    tokens: list[tokenize.TokenInfo], at: int, depth: int, starts: list[int]
) -> tuple[int, int]:
    """The text span of the keyword argument starting at token `at` inside a call at
    `depth`: from the comma before it (or, first in the call, to the comma after it)."""

    def offset(position: tuple[int, int]) -> int:
        return starts[position[0] - 1] + position[1]

    level = depth
    end = len(tokens) - 1
    for j in range(at, len(tokens)):
        string = tokens[j].string
        if tokens[j].type == tokenize.OP and string in "([{":
            level += 1
        elif tokens[j].type == tokenize.OP and string in ")]}":
            if level == depth:
                end = j
                break
            level -= 1
        elif level == depth and string == ",":
            end = j
            break
    previous = at - 1
    while previous >= 0 and tokens[previous].type in (tokenize.NL, tokenize.COMMENT):
        previous -= 1
    if previous >= 0 and tokens[previous].string == ",":
        return offset(tokens[previous].start), offset(tokens[end].start)
    if tokens[end].string == ",":
        following = end + 1
        while following < len(tokens) - 1 and tokens[following].type in (
            tokenize.NL,
            tokenize.COMMENT,
        ):
            following += 1
        stop = tokens[following].start if following < len(tokens) else tokens[end].end
        return offset(tokens[at].start), offset(stop)
    return offset(tokens[at].start), offset(tokens[end].start)


def _describe(value: Any) -> Any:
    if isinstance(value, STEP_TYPES):
        return {
            f.name: _describe(getattr(value, f.name))
            for f in dataclasses.fields(value)
            # A field added after release 0.1 counts only once it is used; a step's
            # limits never count (changing a limit must not fail a run in flight).
            if not (f.metadata.get("added_later") and getattr(value, f.name) == f.default)
            and not f.metadata.get("limits")
        }
    if isinstance(value, RetryPolicy):
        return value.fingerprint_json()
    if isinstance(value, Completion):
        return value.to_json()
    if isinstance(value, Ref):
        # Before `callable`: a reference is a resolver, hashed by its path text.
        return {"ref": value.text}
    if isinstance(value, tuple):
        return [_describe(item) for item in value]
    if isinstance(value, Mapping):
        return {str(k): _describe(v) for k, v in value.items()}
    if callable(value):
        return {"source": _source_of(value)}
    return value


def compute_fingerprint(definition: WorkflowDefinition, builder: Callable[..., Any] | None) -> str:
    """sha256 over name, version, trigger, awaits, the builder's source and the step tree."""
    trigger: dict[str, Any]
    if isinstance(definition.trigger, EventTrigger):
        trigger = {"kind": "event", "eventType": definition.trigger.event_type}
        if definition.trigger.filter is not None:
            trigger["filter"] = _source_of(definition.trigger.filter)
    elif isinstance(definition.trigger, CallTrigger):
        trigger = {"kind": "call"}
    else:
        # Not the catch-up policy: it decides which instants start, not how a run
        # behaves, so changing it must not fail the runs in flight.
        trigger = {"kind": "cron", "schedule": definition.trigger.schedule}
    document = {
        "name": definition.name,
        "version": definition.version,
        "trigger": trigger,
        "awaits": dict(sorted(definition.awaits.items())),
        "builder": without_limits(_source_of(builder)) if builder is not None else None,
        "steps": _describe(definition.steps),
    }
    text = json.dumps(document, sort_keys=True, separators=(",", ":"), default=repr)
    return hashlib.sha256(text.encode()).hexdigest()
