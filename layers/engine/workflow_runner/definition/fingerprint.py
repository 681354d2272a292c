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
import json
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


def _describe(value: Any) -> Any:
    if isinstance(value, STEP_TYPES):
        return {
            f.name: _describe(getattr(value, f.name))
            for f in dataclasses.fields(value)
            # A field added after release 0.1 counts only once it is used.
            if not (f.metadata.get("added_later") and getattr(value, f.name) == f.default)
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
        "builder": _source_of(builder) if builder is not None else None,
        "steps": _describe(definition.steps),
    }
    text = json.dumps(document, sort_keys=True, separators=(",", ":"), default=repr)
    return hashlib.sha256(text.encode()).hexdigest()
