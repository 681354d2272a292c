"""EventBridge envelopes: validate an incoming event and turn it into a DomainEvent.

Choices made here (documented in docs/deploying/by-hand.md and docs/reference/limits.md as well):

- ``detail`` must be a JSON object. EventBridge always hands targets an object; a
  string (``"{\\"a\\": 1}"``) means a producer double-encoded its payload, and
  guessing would hide that bug, so it is rejected with a message saying so.
- The tenant id is read from ``detail`` at a dotted path (default ``tenantId``,
  setting ``TENANT_ID_PATH``) and must be a UUID; it is normalised to lower case.
- Events whose ``source`` is the engine's own (``workflow-runner``) are refused, so
  a misconfigured rule can never feed the engine its own output.
- The whole envelope may be at most 256 KB (the EventBridge entry limit).
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .definition import DomainEvent
from .errors import InvalidInput
from .json_input import MAX_DEPTH
from .storable import MAX_NESTING, reject_unstorable

MAX_EVENT_BYTES = 256 * 1024
# The event object is the first of an event's MAX_DEPTH levels: its detail has the rest.
MAX_DETAIL_DEPTH = MAX_DEPTH - 1
ENGINE_SOURCE = "workflow-runner"
DEFAULT_TENANT_ID_PATH = "tenantId"


class EventBridgeEvent(BaseModel):
    """The fields of an EventBridge event the engine reads (``account`` is optional:
    moto and some replays omit it)."""

    model_config = ConfigDict(populate_by_name=True, extra="ignore")

    id: str = Field(min_length=1, max_length=256)
    detail_type: str = Field(alias="detail-type", min_length=1, max_length=256)
    source: str = Field(min_length=1, max_length=256)
    time: datetime | None = None
    account: str | None = None
    region: str | None = None
    detail: dict[str, Any]

    @field_validator("detail", mode="before")
    @classmethod
    def _detail_is_object(cls, value: Any) -> Any:
        if isinstance(value, str):
            raise ValueError(
                "must be a JSON object, got a string (is the payload JSON-encoded twice?)"
            )
        return value

    @field_validator("time")
    @classmethod
    def _time_is_aware(cls, value: datetime | None) -> datetime | None:
        if value is not None and value.tzinfo is None:
            raise ValueError("must carry a time zone (EventBridge sends UTC with 'Z')")
        return value


def _describe(error: ValidationError) -> str:
    parts = []
    for item in error.errors():
        where = ".".join(str(p) for p in item["loc"]) or "event"
        parts.append(f"{where}: {item['msg']}")
    return "; ".join(parts)


def parse_envelope(raw: Any) -> EventBridgeEvent:
    """Validate the structure of an EventBridge event (no tenant check yet).

    Raises:
        InvalidInput: not an object, over 256 KB, a required field missing or of the
            wrong type, or the engine's own source; the message names the field.
    """
    if not isinstance(raw, dict):
        raise InvalidInput(f"EventBridge event must be a JSON object, got {type(raw).__name__}")
    try:
        size = len(json.dumps(raw, separators=(",", ":"), default=str).encode())
    except (TypeError, ValueError) as error:
        raise InvalidInput(f"EventBridge event is not serialisable as JSON: {error}") from error
    except RecursionError as error:
        too_deep = f"EventBridge event is nested deeper than {MAX_NESTING} levels"
        raise InvalidInput(too_deep) from error
    if size > MAX_EVENT_BYTES:
        raise InvalidInput(
            f"EventBridge event is {size} bytes, over the {MAX_EVENT_BYTES}-byte limit"
        )
    reject_unstorable(raw, "event")
    try:
        event = EventBridgeEvent.model_validate(raw)
    except ValidationError as error:
        raise InvalidInput(f"invalid EventBridge event: {_describe(error)}") from error
    if event.source == ENGINE_SOURCE:
        raise InvalidInput(
            f"event {event.id}: source {ENGINE_SOURCE!r} is the engine's own; "
            "check the rule's source filter"
        )
    return event


def tenant_at(detail: dict[str, Any], path: str) -> str:
    """The tenant id (a UUID, lower case) at a dotted path inside ``detail``.

    Raises:
        InvalidInput: the path is missing, or the value is not a UUID string.
    """
    value: Any = detail
    walked: list[str] = []
    for segment in path.split("."):
        walked.append(segment)
        if not isinstance(value, dict) or segment not in value:
            raise InvalidInput(f"detail.{'.'.join(walked)}: missing (the tenant id is required)")
        value = value[segment]
    if not isinstance(value, str):
        raise InvalidInput(f"detail.{path}: tenant id must be a UUID string")
    try:
        return str(uuid.UUID(value))
    except ValueError as error:
        raise InvalidInput(f"detail.{path}: tenant id {value[:64]!r} is not a UUID") from error


def to_domain_event(event: EventBridgeEvent, tenant_id_path: str) -> DomainEvent:
    """The engine's view of a validated envelope.

    Raises:
        InvalidInput: the tenant id is missing or not a UUID.
    """
    return DomainEvent(
        id=event.id,
        type=event.detail_type,
        payload=event.detail,
        tenant_id=tenant_at(event.detail, tenant_id_path),
        time=event.time,
        source=event.source,
    )


def domain_event_from_eventbridge(
    raw: Any, tenant_id_path: str = DEFAULT_TENANT_ID_PATH
) -> DomainEvent:
    """Validate an EventBridge event (a dict) and return it as a DomainEvent.

    Raises:
        InvalidInput: see parse_envelope and tenant_at.
    """
    return to_domain_event(parse_envelope(raw), tenant_id_path)
