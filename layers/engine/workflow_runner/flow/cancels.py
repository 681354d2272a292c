"""cancel_on: an arriving event cancels the unsettled runs it names.

When a run of a workflow with `cancel_on=[CancelOn(...)]` starts, each CancelOn's
references are resolved against its trigger event and kept as one row per CancelOn
(`flow_cancel_keys`: the cancelling event's type and the [path, value] pairs its
payload must carry), in the transaction that starts the run. When an event is ingested,
every workflow that names its type in a CancelOn takes the rows of the values the
event's payload carries (in the ingest's transaction) and cancels their runs as an
operator's cancel does (their children with them), the reason naming the event.

An event ingested before the run it would name started cancels nothing (the run was
not there to name); a value that cannot be read (a missing field, an object) names no
run. Workflows without cancel_on run none of this.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from ..definition import DomainEvent, WorkflowDefinition, WorkflowRegistry
from ..durations import parse_duration
from ..errors import TransientStoreError
from ..redaction import exception_for_log
from ..store import Store
from .constructs import CancelOn
from .keys import event_context, in_context

log = logging.getLogger("workflow_runner.flow")


def _scalar(value: Any) -> str | None:
    """A matched value as canonical JSON (None: nothing to match on)."""
    if value is None or isinstance(value, (dict, list)):
        return None
    return json.dumps(value)


def _match_value(pairs: list[tuple[str, str]]) -> str:
    return json.dumps(sorted(pairs), separators=(",", ":"))


def _at_path(payload: Mapping[str, Any], path: str) -> Any:
    """A dotted path into a payload ("order.id"), None where it leads nowhere."""
    value: Any = payload
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def register_cancel_keys(
    store: Store, definition: WorkflowDefinition, event: DomainEvent, run_id: str, now: datetime
) -> None:
    """At a run's start (in its transaction): what may cancel it, one row per CancelOn
    whose references all resolve against the trigger event."""
    flow = definition.flow
    if flow is None or not flow.cancel_on:
        return
    resolve = in_context(event_context(definition, event, run_id, now))
    keys: list[tuple[str, str]] = []
    for cancel in flow.cancel_on:
        pairs = []
        for path, ref in cancel.match.items():
            try:
                value = _scalar(resolve(ref))
            except Exception as error:
                log.warning(
                    "a cancel_on reference could not be resolved",
                    extra={"workflow": definition.name, "detail": exception_for_log(error)},
                )
                value = None
            if value is None:
                break
            pairs.append((path, value))
        else:
            keys.append((cancel.event_type, _match_value(pairs)))
    if keys:
        store.flow.add_cancel_keys(event.tenant_id, definition.name, run_id, keys, now)


def cancelling(registry: WorkflowRegistry, event_type: str) -> list[tuple[str, CancelOn]]:
    """(workflow, CancelOn) of the latest versions that an `event_type` event cancels."""
    return [
        (wf.name, cancel)
        for wf in registry.latest_all()
        if wf.flow is not None
        for cancel in wf.flow.cancel_on
        if cancel.event_type == event_type
    ]


def cancel_matching(
    store: Store, registry: WorkflowRegistry, event: DomainEvent, now: datetime
) -> list[str]:
    """Cancel, in the caller's transaction, the unsettled runs the arriving `event`
    names through a CancelOn of their workflow; the run ids cancelled.

    Raises:
        TransientStoreError: a run kept changing under the cancel (its passes won every
            race): the ingest is rolled back and tried again, so no run is missed.
    """
    wanted = cancelling(registry, event.type)
    if not wanted:
        return []
    from ..engine.joins import cancel_in_transaction  # the engine imports this module

    cancelled: list[str] = []
    payload = event.payload if isinstance(event.payload, Mapping) else {}
    for workflow, cancel in wanted:
        pairs = []
        for path in cancel.match:
            value = _scalar(_at_path(payload, path))
            if value is None:
                break
            pairs.append((path, value))
        else:
            since = now - parse_duration(cancel.within) if cancel.within else None
            runs = store.flow.take_cancel_keys(
                event.tenant_id, event.type, _match_value(pairs), workflow, since
            )
            for run_id in runs:
                reason = f"cancel_on: event {event.id} ({event.type})"
                outcome = cancel_in_transaction(store, event.tenant_id, run_id, now, reason)
                if outcome == "contended":
                    raise TransientStoreError(f"run {run_id} kept changing under cancel_on")
                if outcome == "cancelled":
                    cancelled.append(run_id)
    return cancelled
