"""Send dead-lettered messages back to the queue they came from (`wfr dlq redrive`).

The stack's dead-letter queues hold three kinds of message, all sent back unchanged:

- intake DLQs (TriggerDeadLetterQueue, WakeupDeadLetterQueue): an EventBridge event,
  either moved by SQS after maxReceiveCount failed attempts or written by the rule when
  it could not deliver to the intake queue;
- the resume DLQ: a resume request ``{"tenantId", "runId", "stepIndex"}``;
- an on-failure destination record of a Lambda async invoke (the layout before intake
  queues): the event is its ``requestPayload``.

Why back to the intake queue and not `put-events` onto the bus: EventBridge gives a
re-put event a new id, and the inbox deduplicates by id, so a re-put event that had in
fact been stored would be stored again, and start its runs again for workflows whose runs
are keyed by the event. Sent back with its id, a redelivery of an event already taken is
a no-op.

The destination is the DLQ's one source queue (SQS ListDeadLetterSourceQueues) unless
given. Messages are deleted from the DLQ only after the destination accepted them; a
message that is not JSON is left where it is and reported.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ..errors import InvalidInput
from ..json_input import parse_json

BATCH = 10  # SQS receive and send batches hold at most ten messages
# Received messages stay invisible this long while they are moved; one that is left
# (unreadable, or refused by the destination) reappears in the DLQ after it.
HOLD_SECONDS = 120


class RedriveError(InvalidInput):
    """The redrive cannot start (no or several source queues, an unknown queue)."""


@dataclass
class RedriveResult:
    """What a redrive did."""

    dlq_url: str
    destination_url: str
    dry_run: bool
    moved: int = 0
    left: list[tuple[str, str]] = field(default_factory=list)  # (message id, why)

    def as_json(self) -> dict[str, Any]:
        return {
            "dlq": self.dlq_url,
            "destination": self.destination_url,
            "dryRun": self.dry_run,
            "moved": self.moved,
            "left": [{"messageId": m, "reason": why} for m, why in self.left],
        }


def source_queue(sqs: Any, dlq_url: str) -> str:
    """The one queue whose redrive policy targets this DLQ.

    Raises:
        RedriveError: none or several (pass the destination explicitly then).
    """
    try:
        urls = sqs.list_dead_letter_source_queues(QueueUrl=dlq_url).get("queueUrls", [])
    except Exception as error:
        raise RedriveError(f"cannot read the source queues of {dlq_url}: {error}") from error
    if len(urls) != 1:
        found = ", ".join(urls) or "none"
        raise RedriveError(
            f"{dlq_url} is the dead-letter queue of {len(urls)} queues ({found}): "
            "name the destination with --to"
        )
    return str(urls[0])


def redrive_body(body: str) -> str | None:
    """The body to send back for a dead-lettered message, or None when it is unreadable.

    A Lambda on-failure record gives its requestPayload; anything else that is a JSON
    object (an EventBridge event, a resume request) goes back as it is.
    """
    try:
        # SQS bounds its size; a message too deep to decode is as unreadable as one
        # that is not JSON.
        message = parse_json(body, "dead-lettered message", max_bytes=None)
    except InvalidInput:
        return None
    if not isinstance(message, dict):
        return None
    payload = message.get("requestPayload")
    if isinstance(message.get("requestContext"), dict) and isinstance(payload, dict):
        return json.dumps(payload, separators=(",", ":"))
    return body


def _receive(sqs: Any, url: str, count: int) -> list[dict[str, Any]]:
    reply = sqs.receive_message(
        QueueUrl=url,
        MaxNumberOfMessages=count,
        VisibilityTimeout=HOLD_SECONDS,
        WaitTimeSeconds=1,
    )
    return list(reply.get("Messages", []))


def _batches(sqs: Any, url: str, limit: int | None) -> Iterator[list[dict[str, Any]]]:
    """Batches of received messages until the DLQ looks empty or `limit` is reached."""
    taken = 0
    while limit is None or taken < limit:
        count = BATCH if limit is None else min(BATCH, limit - taken)
        messages = _receive(sqs, url, count)
        if not messages:
            return
        taken += len(messages)
        yield messages


def redrive(
    sqs: Any,
    dlq_url: str,
    *,
    destination_url: str | None = None,
    limit: int | None = None,
    dry_run: bool = False,
) -> RedriveResult:
    """Move messages from a dead-letter queue back to their source queue.

    Args:
        sqs: a boto3 SQS client.
        dlq_url: the dead-letter queue.
        destination_url: where to send them (default: the DLQ's one source queue).
        limit: move at most this many (default: until the DLQ looks empty).
        dry_run: receive one batch, report what would move, and release it.

    Returns:
        What moved and what was left (message id and why).

    Raises:
        RedriveError: the destination cannot be determined.
    """
    destination = destination_url or source_queue(sqs, dlq_url)
    result = RedriveResult(dlq_url, destination, dry_run)
    for messages in _batches(sqs, dlq_url, BATCH if dry_run else limit):
        entries, receipts = [], {}
        for i, message in enumerate(messages):
            body = redrive_body(message.get("Body", ""))
            if body is None:
                result.left.append((message["MessageId"], "not a JSON object"))
                continue
            entries.append({"Id": str(i), "MessageBody": body})
            receipts[str(i)] = message
        if dry_run:
            result.moved += len(entries)
            sqs.change_message_visibility_batch(
                QueueUrl=dlq_url,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": 0}
                    for i, m in enumerate(messages)
                ],
            )
            break
        if not entries:
            continue
        reply = sqs.send_message_batch(QueueUrl=destination, Entries=entries)
        for failed in reply.get("Failed", []):
            message = receipts.pop(failed["Id"])
            result.left.append((message["MessageId"], f"refused: {failed.get('Code')}"))
        if receipts:
            sqs.delete_message_batch(
                QueueUrl=dlq_url,
                Entries=[
                    {"Id": i, "ReceiptHandle": m["ReceiptHandle"]} for i, m in receipts.items()
                ],
            )
            result.moved += len(receipts)
    return result
