"""Limit keys: what a construct counts, resolved for one run or one task.

A limit's row is named by its flow key, made of the construct's kind, its scope, the
tenant (or `*` when every tenant shares it), its owner (the workflow, or the workflow
and task key of a step) and the resolved key value:

    concurrency:tenant:<tenant>:<workflow>:<key>     each tenant counts its own
    concurrency:workflow:*:<workflow>:<key>          the workflow's runs of all tenants
    concurrency:global:*:*:<key>                     everything that names the key

A key that cannot be resolved (its field is missing, its function raised) counts
under the empty key: the limit still holds, for those runs together.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any, Literal

from ..definition.dsl import DomainEvent, StepContext, WorkflowDefinition, WorkflowInfo, resolve
from ..durations import parse_duration
from ..redaction import exception_for_log
from .constructs import MAX_PRIORITY, Concurrency, FlowControl, Throttle
from .limits import LimitSpec

log = logging.getLogger("workflow_runner.flow")


def flow_key(
    kind: str, scope: str, tenant_id: str, workflow: str, step: str | None, value: str
) -> str:
    """The row name of one limit (see the module docstring)."""
    owner = f"{workflow}/{step}" if step else workflow
    if scope == "global":
        return f"{kind}:global:*:*:{value or owner}"
    if scope == "workflow":
        return f"{kind}:workflow:*:{owner}:{value}"
    return f"{kind}:tenant:{tenant_id}:{owner}:{value}"


def key_value(key: Any, resolver: Callable[[Any], Any]) -> str:
    """A construct's key resolved as text by `resolver` ("" for no key, or for one that
    cannot be read: such work counts under the empty key together)."""
    if key is None:
        return ""
    try:
        value = resolver(key)
    except Exception as error:
        log.warning(
            "a limit's key could not be resolved", extra={"detail": exception_for_log(error)}
        )
        return ""
    if value is None or isinstance(value, (dict, list)):
        return ""
    return str(value)


def in_context(ctx: StepContext) -> Callable[[Any], Any]:
    """A resolver of keys against `ctx`."""
    return lambda key: resolve(key, ctx)


def event_context(
    definition: WorkflowDefinition, event: DomainEvent, run_id: str, now: datetime
) -> StepContext:
    """What a workflow-level key is resolved against: the trigger event alone."""
    return StepContext(
        event=event,
        steps={},
        scope={},
        workflow=WorkflowInfo(
            run_id=run_id,
            workflow_name=definition.name,
            step_index=0,
            retry_attempt=1,
            definition_fingerprint=definition.fingerprint,
        ),
        now=now,
    )


def _spec(
    construct: Concurrency | Throttle,
    tenant_id: str,
    workflow: str,
    step: str | None,
    value: str,
    priority: int = 0,
) -> LimitSpec:
    kind: Literal["concurrency", "throttle"] = (
        "throttle" if isinstance(construct, Throttle) else "concurrency"
    )
    throttle = construct if isinstance(construct, Throttle) else None
    return LimitSpec(
        flow_key=flow_key(kind, construct.scope, tenant_id, workflow, step, value),
        kind=kind,
        limit=construct.limit,
        tenant_id=None if construct.scope != "tenant" else tenant_id,
        workflow_name=workflow,
        step_key=step,
        key_value=value,
        period_ms=int(parse_duration(throttle.period).total_seconds() * 1000) if throttle else 0,
        burst=throttle.burst if throttle else 1,
        priority=priority,
    )


def priority_of(flow: FlowControl | None, ctx: StepContext) -> int:
    """A run's priority= resolved against its trigger event: seconds of head start in
    the queues of its limits, clamped to -600..600 (0: none, or one that cannot be read
    as an integer)."""
    if flow is None or flow.priority is None:
        return 0
    try:
        value = resolve(flow.priority, ctx)
        number = int(value) if not isinstance(value, bool) else 0
    except Exception as error:
        log.warning("a priority could not be resolved", extra={"detail": exception_for_log(error)})
        return 0
    return max(-MAX_PRIORITY, min(MAX_PRIORITY, number))


def run_slots(
    flow: FlowControl, definition: WorkflowDefinition, ctx: StepContext
) -> list[LimitSpec]:
    """The concurrency limits a run's passes and tasks count against."""
    tenant = ctx.event.tenant_id
    priority = priority_of(flow, ctx)
    return [
        _spec(c, tenant, definition.name, None, key_value(c.key, in_context(ctx)), priority)
        for c in flow.concurrency
    ]


def start_throttle(
    flow: FlowControl, definition: WorkflowDefinition, ctx: StepContext
) -> LimitSpec | None:
    """The throttle a workflow's starts take tokens from (None: none)."""
    if flow.throttle is None:
        return None
    value = key_value(flow.throttle.key, in_context(ctx))
    return _spec(flow.throttle, ctx.event.tenant_id, definition.name, None, value)


def step_specs(
    concurrency: tuple[Concurrency, ...],
    throttle: Throttle | None,
    tenant_id: str,
    workflow: str,
    step: str,
    resolve_key: Callable[[Any], Any],
    priority: int = 0,
) -> list[LimitSpec]:
    """The limits of one task, mail or webhook step, keys resolved by the pass."""
    found = [
        _spec(c, tenant_id, workflow, step, key_value(c.key, resolve_key), priority)
        for c in concurrency
    ]
    if throttle is not None:
        value = key_value(throttle.key, resolve_key)
        found.append(_spec(throttle, tenant_id, workflow, step, value, priority))
    return found


def task_limits(
    definition: WorkflowDefinition,
    step: Any,
    step_key: str,
    ctx: StepContext,
    resolve_key: Callable[[Any], Any],
) -> list[dict[str, Any]] | None:
    """The limits a task's attempts count against, as stored on its row: the step's own
    (keys resolved by the pass, `resolve_key`) and its workflow's concurrency (keys from
    the trigger event). None when there are none (the common case costs nothing more)."""
    flow = definition.flow
    concurrency: tuple[Concurrency, ...] = getattr(step, "concurrency", ())
    throttle: Throttle | None = getattr(step, "throttle", None)
    if not concurrency and throttle is None and (flow is None or not flow.concurrency):
        return None
    tenant = ctx.event.tenant_id
    priority = priority_of(flow, ctx)
    found = step_specs(
        concurrency, throttle, tenant, definition.name, step_key, resolve_key, priority
    )
    if flow is not None:
        found += run_slots(flow, definition, ctx)
    return [spec.to_json() for spec in found] or None
