"""`wfr dlq redrive` on SQS (moto): dead-lettered events and resume requests go back to
the queue they came from, unchanged and with their ids, and the intake handler then
takes them exactly once."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from cli_support import Result
from moto import mock_aws
from workflow_runner.aws.dlq import redrive, redrive_body
from workflow_runner.cli import main

from tests.functions.helpers import load_event

REGION = "eu-central-1"


@pytest.fixture
def sqs(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "testing")
    with mock_aws():
        yield boto3.client("sqs", region_name=REGION)


def queue_with_dlq(sqs: Any, name: str) -> tuple[str, str]:
    dlq = sqs.create_queue(QueueName=f"{name}-dlq")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    policy = json.dumps({"deadLetterTargetArn": arn, "maxReceiveCount": "5"})
    source = sqs.create_queue(QueueName=name, Attributes={"RedrivePolicy": policy})["QueueUrl"]
    return source, dlq


def bodies(sqs: Any, url: str) -> list[str]:
    found = []
    while True:
        reply = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=300)
        if not reply.get("Messages"):
            return found
        found += [m["Body"] for m in reply["Messages"]]


def counts(sqs: Any, url: str) -> tuple[int, int]:
    attrs = sqs.get_queue_attributes(
        QueueUrl=url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return int(attrs["ApproximateNumberOfMessages"]), int(
        attrs["ApproximateNumberOfMessagesNotVisible"]
    )


def wfr(*argv: str) -> Result:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err, environ={})
    return Result(code, out.getvalue(), err.getvalue())


EVENT = json.dumps(load_event("trigger-projection-user-signed-up.json"))
# What a Lambda on-failure destination wrote before the intake queues existed.
ON_FAILURE_RECORD = json.dumps(
    {
        "version": "1.0",
        "requestContext": {"condition": "RetriesExhausted", "approximateInvokeCount": 3},
        "requestPayload": load_event("trigger-projection-order-placed.json"),
        "responseContext": {"statusCode": 200, "functionError": "Unhandled"},
    }
)


def test_redrive_sends_events_back_to_their_source_queue_unchanged(sqs: Any) -> None:
    intake, dlq = queue_with_dlq(sqs, "trigger")
    sqs.send_message(QueueUrl=dlq, MessageBody=EVENT)
    sqs.send_message(QueueUrl=dlq, MessageBody=ON_FAILURE_RECORD)
    result = wfr("dlq", "redrive", "--queue-url", dlq)
    assert result.code == 0, result.err
    assert result.out.strip() == f"moved 2 message(s) to {intake}"
    moved = sorted(json.loads(b)["id"] for b in bodies(sqs, intake))
    # The EventBridge ids survive: the inbox dedupes a redelivery of an event it has.
    assert moved == sorted(
        [
            load_event("trigger-projection-user-signed-up.json")["id"],
            load_event("trigger-projection-order-placed.json")["id"],
        ]
    )
    assert counts(sqs, dlq) == (0, 0)


def test_unreadable_messages_are_left_and_reported(sqs: Any) -> None:
    intake, dlq = queue_with_dlq(sqs, "trigger")
    sqs.send_message(QueueUrl=dlq, MessageBody="not json {")
    sqs.send_message(QueueUrl=dlq, MessageBody=EVENT)
    result = wfr("dlq", "redrive", "--queue-url", dlq, "--json")
    assert result.code == 1
    report = result.json()
    assert report["moved"] == 1 and report["destination"] == intake
    (left,) = report["left"]
    assert left["reason"] == "not a JSON object"
    assert counts(sqs, dlq) == (0, 1)  # still there, hidden for the rest of this redrive
    assert len(bodies(sqs, intake)) == 1


def test_dry_run_moves_nothing(sqs: Any) -> None:
    intake, dlq = queue_with_dlq(sqs, "trigger")
    for _ in range(3):
        sqs.send_message(QueueUrl=dlq, MessageBody=EVENT)
    result = wfr("dlq", "redrive", "--queue-url", dlq, "--dry-run")
    assert (result.code, result.out.strip()) == (0, f"would move 3 message(s) to {intake}")
    assert counts(sqs, dlq) == (3, 0)
    assert bodies(sqs, intake) == []


def test_max_limits_how_many_move(sqs: Any) -> None:
    intake, dlq = queue_with_dlq(sqs, "resume")
    request = json.dumps(
        {"tenantId": "6f1c2b1e-8d3a-4e5f-9a7b-0c1d2e3f4a5b", "runId": "r", "stepIndex": 1}
    )
    for _ in range(12):
        sqs.send_message(QueueUrl=dlq, MessageBody=request)
    assert redrive(sqs, dlq, limit=11).moved == 11
    assert counts(sqs, dlq)[0] == 1
    assert set(bodies(sqs, intake)) == {request}


def test_a_dlq_shared_by_two_queues_needs_a_destination(sqs: Any) -> None:
    first, dlq = queue_with_dlq(sqs, "a")
    arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    sqs.create_queue(
        QueueName="b",
        Attributes={
            "RedrivePolicy": json.dumps({"deadLetterTargetArn": arn, "maxReceiveCount": "5"})
        },
    )
    sqs.send_message(QueueUrl=dlq, MessageBody=EVENT)
    refused = wfr("dlq", "redrive", "--queue-url", dlq)
    assert refused.code == 2 and "name the destination with --to" in refused.err
    assert counts(sqs, dlq) == (1, 0)
    assert wfr("dlq", "redrive", "--queue-url", dlq, "--to", first).code == 0
    assert len(bodies(sqs, first)) == 1


def test_bad_max_is_a_usage_error(sqs: Any) -> None:
    assert wfr("dlq", "redrive", "--queue-url", "https://x", "--max", "0").code == 2


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (EVENT, EVENT),
        (
            '{"tenantId": "t", "runId": "r", "stepIndex": 1}',
            '{"tenantId": "t", "runId": "r", "stepIndex": 1}',
        ),
        ("[1, 2]", None),
        ("", None),
        ("[" * 100_000, None),  # listed as unreadable, not a RecursionError out of wfr
    ],
)
def test_redrive_body(body: str, expected: str | None) -> None:
    assert redrive_body(body) == expected
    assert json.loads(redrive_body(ON_FAILURE_RECORD) or "") == load_event(
        "trigger-projection-order-placed.json"
    )
