"""EventBridge events that arrive through an SQS intake queue.

Each EventBridge rule delivers to an SQS queue whose event source mapping polls it with
a bounded concurrency, so a burst or a database failover waits in the queue instead of
failing into a DLQ. A record's body is the EventBridge event, exactly as a rule with a
Lambda target would have passed it. Every record is handled on its own (one engine
transaction each); one that fails is reported as a batch item failure, so SQS delivers
it again and, after the queue's maxReceiveCount, moves it to the intake DLQ, from which
`wfr dlq redrive` sends it back. Records that succeeded are not redelivered.

A direct invoke with a plain EventBridge event (the console, tests, the local runtime)
is handled as before: the handler receives the event itself and raises on failure.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import InvalidInput
from . import lambda_support as support
from .lambda_support import logger
from .observability import traced

# Keys a previous record of the same batch may have left on the logger.
_RECORD_KEYS = ("tenant_id", "event_id", "event_type", "run_id", "message_id")


def is_sqs_batch(event: Any) -> bool:
    """True for an SQS event source batch (``{"Records": [...]}``)."""
    return isinstance(event, Mapping) and isinstance(event.get("Records"), list)


def eventbridge_event(record: Mapping[str, Any]) -> dict[str, Any]:
    """The EventBridge event carried by one SQS record.

    Raises:
        InvalidInput: the body is not a JSON object (logged and counted).
    """
    try:
        body = json.loads(record.get("body") or "")
    except (TypeError, ValueError) as error:
        raise support.reject(
            InvalidInput(f"SQS record body is not JSON: {error}"), "EventBridge event"
        ) from error
    if not isinstance(body, dict):
        raise support.reject(
            InvalidInput(f"SQS record body is a {type(body).__name__}, not an event object"),
            "EventBridge event",
        )
    return body


def each_event(
    batch: Mapping[str, Any], handle: Callable[[dict[str, Any]], object]
) -> dict[str, list[dict[str, str]]]:
    """Handle every EventBridge event of an SQS batch; report the records that failed.

    Args:
        batch: the SQS event source batch.
        handle: the function's work for one EventBridge event; raises to fail the record
            (InvalidInput for a bad event: already logged and counted by the parsers).

    Returns:
        ``{"batchItemFailures": [{"itemIdentifier": <messageId>}, ...]}``.

    Raises:
        InvalidInput: a record without a messageId (it cannot be reported on its own,
            so the whole batch fails and is retried).
    """
    failures: list[dict[str, str]] = []
    for record in batch["Records"]:
        message_id = record.get("messageId") if isinstance(record, Mapping) else None
        if not isinstance(message_id, str) or not message_id:
            raise support.reject(InvalidInput("SQS record without a messageId"), "SQS batch")
        logger.remove_keys(list(_RECORD_KEYS))
        logger.append_keys(message_id=message_id)
        try:
            with traced("## intake record"):
                handle(eventbridge_event(record))
        except InvalidInput:
            failures.append({"itemIdentifier": message_id})
        except Exception:
            # Logged with its traceback; the record is retried, then dead-lettered.
            logger.exception("intake record failed")
            support.count("IntakeRecordFailed")
            failures.append({"itemIdentifier": message_id})
    logger.remove_keys(list(_RECORD_KEYS))
    return {"batchItemFailures": failures}
