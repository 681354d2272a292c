"""EventBridge events that arrive through an SQS intake queue.

Each EventBridge rule delivers to an SQS queue whose event source mapping polls it with
a bounded concurrency, so a burst or a database failover waits in the queue instead of
failing into a DLQ. A record's body is the EventBridge event, exactly as a rule with a
Lambda target would have passed it. TriggerProjection ingests a batch's events in one
engine transaction and EventWakeup wakes them in one engine call (`all_events`; if that
fails, one call per record), the other functions handle every record on its own
(`each_event`); a record that fails is reported
as a batch item failure, so SQS delivers it again and, after the queue's
maxReceiveCount, moves it to the intake DLQ, from which `wfr dlq redrive` sends it back.
Records that succeeded are not redelivered.

A direct invoke with a plain EventBridge event (the console, tests, the local runtime)
is handled as before: the handler receives the event itself and raises on failure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any, TypeVar

from ..envelope import MAX_EVENT_BYTES
from ..errors import InvalidInput, WorkLeft
from ..json_input import parse_json
from . import lambda_support as support
from .lambda_support import logger
from .observability import traced

# Keys a previous record of the same batch may have left on the logger.
_RECORD_KEYS = ("tenant_id", "event_id", "event_type", "run_id", "message_id")

T = TypeVar("T")


def is_sqs_batch(event: Any) -> bool:
    """True for an SQS event source batch (``{"Records": [...]}``)."""
    return isinstance(event, Mapping) and isinstance(event.get("Records"), list)


def eventbridge_event(record: Mapping[str, Any]) -> dict[str, Any]:
    """The EventBridge event carried by one SQS record.

    Raises:
        InvalidInput: the body is not a JSON object, is over MAX_EVENT_BYTES or nested
            deeper than json_input.MAX_DEPTH (logged and counted).
    """
    try:
        body = parse_json(record.get("body") or "", "SQS record body", max_bytes=MAX_EVENT_BYTES)
    except InvalidInput as error:
        raise support.reject(error, "EventBridge event") from error
    if not isinstance(body, dict):
        raise support.reject(
            InvalidInput(f"SQS record body is a {type(body).__name__}, not an event object"),
            "EventBridge event",
        )
    return body


def _message_id(record: Any) -> str:
    message_id = record.get("messageId") if isinstance(record, Mapping) else None
    if not isinstance(message_id, str) or not message_id:
        raise support.reject(InvalidInput("SQS record without a messageId"), "SQS batch")
    return message_id


def _handle_record(
    message_id: str,
    event: Callable[[], dict[str, Any]],
    handle: Callable[[dict[str, Any]], object],
    segment: str | None = "## intake record",
) -> bool:
    """Handle one record's event (in a trace subsegment unless `segment` is None);
    False when it failed (already logged and counted)."""
    logger.remove_keys(list(_RECORD_KEYS))
    logger.append_keys(message_id=message_id)
    try:
        if segment is None:
            handle(event())
        else:
            with traced(segment):
                handle(event())
        return True
    except Exception as error:
        _record_failed(error)
        return False


def _record_failed(error: Exception) -> None:
    """Log and count a record's failure (its message id is on the logger)."""
    if isinstance(error, InvalidInput):
        return  # already logged and counted by the parsers
    if isinstance(error, WorkLeft):
        # Not a fault: the record's work ran out of time with its progress committed,
        # and the redelivery continues it (logged without a traceback, not counted).
        logger.warning(str(error))
        return
    # Logged with its traceback; the record is retried, then dead-lettered.
    logger.error("intake record failed", exc_info=error)
    support.count("IntakeRecordFailed")


def each_event(
    batch: Mapping[str, Any], handle: Callable[[dict[str, Any]], object]
) -> dict[str, list[dict[str, str]]]:
    """Handle every EventBridge event of an SQS batch; report the records that failed.

    Args:
        batch: the SQS event source batch.
        handle: the function's work for one EventBridge event; raises to fail the record
            (InvalidInput for a bad event: already logged and counted by the parsers;
            WorkLeft when its time ran out with progress committed).

    Returns:
        ``{"batchItemFailures": [{"itemIdentifier": <messageId>}, ...]}``.

    Raises:
        InvalidInput: a record without a messageId (it cannot be reported on its own,
            so the whole batch fails and is retried).
    """
    records = [(_message_id(record), record) for record in batch["Records"]]
    failures = [
        {"itemIdentifier": message_id}
        for message_id, record in records
        if not _handle_record(message_id, partial(eventbridge_event, record), handle)
    ]
    logger.remove_keys(list(_RECORD_KEYS))
    return {"batchItemFailures": failures}


def all_events(
    batch: Mapping[str, Any],
    prepare: Callable[[dict[str, Any]], T | None],
    handle_all: Callable[[list[T]], Sequence[Exception | None] | None],
    handle: Callable[[dict[str, Any]], object],
) -> dict[str, list[dict[str, str]]]:
    """Handle an SQS batch's EventBridge events together (one engine call), falling
    back to one at a time if that fails; report the records that failed.

    Every record is first parsed by `prepare` (a bad one fails alone, as in
    `each_event`; None: nothing to do for it). The prepared ones go to `handle_all`
    at once (one engine call), which may return, per item, the error that fails its
    record (None: it succeeded; e.g. WorkLeft for one whose time ran out). If it
    raises, each of those records is handled again on its own by `handle` (the engine
    call is idempotent: an event the batch did handle does nothing twice), so one
    record that keeps failing is reported alone and the rest of the batch goes on.

    Raises:
        InvalidInput: a record without a messageId (the whole batch fails).
    """
    records = [(_message_id(record), record) for record in batch["Records"]]
    failures: list[dict[str, str]] = []
    prepared: list[tuple[str, dict[str, Any], T]] = []
    for message_id, record in records:
        parsed: list[tuple[dict[str, Any], T | None]] = []

        def parse(
            event: dict[str, Any], out: list[tuple[dict[str, Any], T | None]] = parsed
        ) -> None:
            out.append((event, prepare(event)))

        if not _handle_record(message_id, partial(eventbridge_event, record), parse, None):
            failures.append({"itemIdentifier": message_id})
        elif parsed[0][1] is not None:
            event, item = parsed[0]
            assert item is not None
            prepared.append((message_id, event, item))
    logger.remove_keys(list(_RECORD_KEYS))
    if len(prepared) > 1:
        try:
            with traced("## intake batch"):
                errors = handle_all([item for _, _, item in prepared])
        except Exception:
            logger.warning("intake batch failed: handling its records one by one", exc_info=True)
        else:
            outcomes = [None] * len(prepared) if errors is None else errors
            for (message_id, _, _), error in zip(prepared, outcomes, strict=True):
                if error is not None:
                    logger.append_keys(message_id=message_id)
                    _record_failed(error)
                    failures.append({"itemIdentifier": message_id})
            prepared = []
    for message_id, event, _ in prepared:
        if not _handle_record(message_id, partial(dict, event), handle):
            failures.append({"itemIdentifier": message_id})
    logger.remove_keys(list(_RECORD_KEYS))
    return {"batchItemFailures": failures}
