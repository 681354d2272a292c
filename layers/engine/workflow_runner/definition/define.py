"""define_workflow: build, check, fingerprint and register a workflow."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any, cast

from ..errors import InvalidInput, WorkflowDefinitionError
from ..flow.constructs import flow_control
from .branches import BRANCH_MARK
from .builder import StepBuilder
from .checks import PlacingBuilder, check_definition
from .dsl import (
    CallTrigger,
    CronTrigger,
    DomainEvent,
    EventTrigger,
    Step,
    Trigger,
    WorkflowDefinition,
)
from .fingerprint import compute_fingerprint
from .registry import default_registry
from .retry import deferred_policy_checks
from .shape import PINNINGS
from .step_lists import as_steps


def define_workflow(
    name: str,
    trigger: Trigger,
    steps: Callable[[StepBuilder], Sequence[Step]],
    idempotency_key: Callable[[DomainEvent], Any] | str | None = None,
    awaits: Mapping[str, str] | None = None,
    version: int = 1,
    description: str = "",
    register: bool = True,
    retention: str | timedelta | None = None,
    pinning: str = "shape",
    concurrency: Any = None,
    throttle: Any = None,
    rate_limit: Any = None,
    debounce: Any = None,
    singleton: Any = None,
    batch: Any = None,
    priority: Any = None,
    cancel_on: Any = None,
) -> WorkflowDefinition:
    """Define a workflow and register it in the default registry.

    Args:
        name: unique workflow name (also part of the run id).
        trigger: `on_event(...)`, `on_cron(...)` or `on_call()` (started only by other
            workflows).
        steps: a function of the step builder returning the step list; it runs once,
            here, so the list's shape never depends on a payload (use resolvers).
        idempotency_key: function of the trigger event, a static string, or None
            (then the run id derives from the trigger event's id).
        awaits: key -> event type for every type `wait_for_event` may wait for.
        version: keep older versions registered next to newer ones and runs that
            started on them keep resuming on them; new runs start on the highest.
        retention: how long its runs are kept once settled before the purge deletes
            them: a duration ("P90D", "90d"; at least an hour) or "forever"; None
            (default) keeps the deployment's RUN_RETENTION. The latest version's
            setting applies to the runs of every version.
        description: free text kept on the definition (not part of the fingerprint).
        register: False returns the definition without adding it to the default
            registry (hand it to `WorkflowTestEnv(workflows=[...])`, for instance).
        pinning: what a waiting run started on this definition resumes on after a
            deploy changed it: "shape" (default) — a definition of the same workflow
            whose shape agrees with where the run has been and stands (a changed
            subject, URL, duration or function resumes; a changed place fails loud);
            "exact" — only this very definition (every value stays as it started).
            Not part of the fingerprint.
        concurrency: `Concurrency(limit, key=..., scope=...)`, or a list of up to two
            (per tenant and global): at most `limit` runs executing a pass or a task at
            once per key (a waiting run holds no slot).
        throttle: `Throttle(limit, period, key=..., burst=...)`: at most `limit` run
            starts per `period` per key; later triggers wait their turn, in order.
        rate_limit: `RateLimit(limit, period, key=...)`: triggers beyond `limit` per
            `period` per key start nothing (recorded as skipped, with the reason).
        debounce: `Debounce(period, key, timeout=...)`: start once `period` passed
            without another trigger of the key, with the last event.
        singleton: `Singleton(key, mode="skip"|"cancel")`: at most one unsettled run per
            key; a new trigger is skipped, or cancels that run and starts.
        batch: `Batch(max_size, timeout, key=...)`: one run per batch of triggers.
        priority: an integer from -600 to 600 (or a reference into the trigger event):
            seconds of head start among the tenant's due work.
        cancel_on: `[CancelOn(event_type, match={...}, within=...)]`: an arriving event
            that matches cancels the unsettled runs it names.
            None of these is part of the fingerprint or the shape: changing a limit
            fails no run in flight (see docs/workflows/flow-control.md).

    Raises:
        WorkflowDefinitionError: the definition is malformed; every static argument is
            checked here, and the message names the workflow, the step path (steps
            numbered from 0, as stepIndex), the argument and the bad value.
    """
    if not isinstance(name, str) or not name.strip() or "|" in name:
        raise WorkflowDefinitionError(
            "define_workflow: name must be a non-empty string without '|'"
        )
    if BRANCH_MARK in name:
        raise WorkflowDefinitionError(
            f"define_workflow: {name!r}: names containing {BRANCH_MARK!r} are reserved for "
            "the branches of s.parallel(branches=[...])"
        )
    if not isinstance(trigger, (EventTrigger, CronTrigger, CallTrigger)):
        raise WorkflowDefinitionError(
            f"workflow {name!r}: trigger must be on_event(...), on_cron(...) or on_call()"
        )
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise WorkflowDefinitionError(f"workflow {name!r}: version must be an integer >= 1")
    if pinning not in PINNINGS:
        raise WorkflowDefinitionError(
            f"workflow {name!r}: pinning must be one of {', '.join(PINNINGS)}, not {pinning!r}"
        )
    awaits_map = dict(awaits or {})
    for key, value in awaits_map.items():
        if not isinstance(key, str) or not isinstance(value, str) or not value:
            raise WorkflowDefinitionError(
                f"workflow {name!r}: awaits must map names to event types"
            )
    if not callable(steps):
        raise WorkflowDefinitionError(
            f"workflow {name!r}: steps must be a function lambda s: [...]"
        )
    # The user's function sees every StepBuilder method (refusals become placeholders).
    builder = cast(StepBuilder, PlacingBuilder(StepBuilder(awaits_map)))
    try:
        with deferred_policy_checks():  # a bad RetryPolicy is reported with its step
            built = as_steps(steps(builder), "steps")
    except (WorkflowDefinitionError, InvalidInput) as error:
        raise WorkflowDefinitionError(f"workflow {name!r}: {error}") from None
    if not built:
        raise WorkflowDefinitionError(f"workflow {name!r}: needs at least one step")
    definition = WorkflowDefinition(
        name=name,
        trigger=trigger,
        steps=built,
        idempotency_key=idempotency_key,
        awaits=awaits_map,
        version=version,
        description=description,
        retention=retention,
        pinning="exact" if pinning == "exact" else "shape",
    )
    # Rebuilt through the fields (replace), never __dict__: that also holds what a
    # cached property (WorkflowDefinition.takes_callbacks) kept.
    definition = dataclasses.replace(
        definition,
        flow=flow_control(
            f"workflow {name!r}",
            concurrency=concurrency,
            throttle=throttle,
            rate_limit=rate_limit,
            debounce=debounce,
            singleton=singleton,
            batch=batch,
            priority=priority,
            cancel_on=cancel_on,
            is_event_triggered=isinstance(trigger, EventTrigger),
        ),
    )
    check_definition(definition)
    definition = dataclasses.replace(definition, fingerprint=compute_fingerprint(definition, steps))
    if register:
        default_registry().register(definition, module=getattr(steps, "__module__", None))
    return definition
