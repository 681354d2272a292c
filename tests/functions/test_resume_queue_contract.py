"""One contract for every ResumeQueue: SQS (moto), the in-process queue and the local
runtime's queue in the database. What ResumeRun receives must not depend on which one
the due scan, the wakeup and the projection sent to."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import boto3
import moto.sqs.models
import pytest
from moto import mock_aws
from workflow_runner.aws.inprocess import InMemoryResumeQueue
from workflow_runner.aws.models import ResumeMessage
from workflow_runner.aws.ports import SqsResumeQueue
from workflow_runner.clock import ManualClock
from workflow_runner.local.state import LocalResumeQueue, as_request
from workflow_runner.ports import ResumeQueue, ResumeRequest
from workflow_runner.store import Store

from tests.support import TENANT_A, TENANT_B

RUN = "20674095-dda5-5811-b700-b57eb304d119"
REGION = "eu-central-1"


@dataclass
class QueueUnderTest:
    """A queue and how its consumer takes what is visible now (at most ten)."""

    queue: ResumeQueue
    receive: Callable[[], list[ResumeRequest]]


def _request_of(body: str) -> ResumeRequest:
    message = ResumeMessage.model_validate(json.loads(body))
    return ResumeRequest(message.tenant_id, message.run_id, message.step_index, force=message.force)


@pytest.fixture(params=["sqs", "in-process", "local"])
def subject(
    request: pytest.FixtureRequest,
    clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[QueueUnderTest]:
    if request.param == "in-process":
        queue = InMemoryResumeQueue(clock)
        yield QueueUnderTest(queue, lambda: queue.receive(limit=10))
    elif request.param == "local":
        store: Store = request.getfixturevalue("store")
        local = LocalResumeQueue(store, clock.now)
        yield QueueUnderTest(local, lambda: [as_request(m) for m in local.receive(clock.now())])
    else:
        for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
            monkeypatch.setenv(name, "testing")
        # SQS delays run on moto's clock: make it the test's clock.
        monkeypatch.setattr(
            moto.sqs.models, "unix_time_millis", lambda: clock.now().timestamp() * 1000
        )
        monkeypatch.setattr(moto.sqs.models, "unix_time", lambda: clock.now().timestamp())
        with mock_aws():
            sqs = boto3.client("sqs", region_name=REGION)
            url = sqs.create_queue(QueueName="resume")["QueueUrl"]

            def receive() -> list[ResumeRequest]:
                reply: dict[str, Any] = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)
                messages = reply.get("Messages", [])
                for m in messages:
                    sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
                return [_request_of(m["Body"]) for m in messages]

            yield QueueUnderTest(SqsResumeQueue(sqs, url), receive)


def _drain(subject: QueueUnderTest) -> list[ResumeRequest]:
    received: list[ResumeRequest] = []
    while batch := subject.receive():
        assert len(batch) <= 10
        received += batch
    return received


def _key(r: ResumeRequest) -> tuple[str, str, int, bool]:
    return (r.tenant_id, r.run_id, r.step_index, r.force)


def test_every_accepted_request_is_received_once_with_its_fields(
    subject: QueueUnderTest,
) -> None:
    requests = [ResumeRequest(TENANT_A, RUN, i) for i in range(23)]
    requests.append(ResumeRequest(TENANT_B, RUN, 7, force=True))
    assert subject.queue.send(requests) == []
    received = _drain(subject)
    assert sorted(map(_key, received)) == sorted(map(_key, requests))
    assert _drain(subject) == []


def test_a_delayed_request_becomes_visible_after_its_delay(
    subject: QueueUnderTest, clock: ManualClock
) -> None:
    subject.queue.send([ResumeRequest(TENANT_A, RUN, 1, delay_seconds=30)])
    subject.queue.send([ResumeRequest(TENANT_A, RUN, 2, delay_seconds=0)])
    assert [r.step_index for r in _drain(subject)] == [2]
    clock.advance(timedelta(seconds=29))
    assert _drain(subject) == []
    clock.advance(timedelta(seconds=1))
    assert [r.step_index for r in _drain(subject)] == [1]


def test_delays_are_capped_at_the_sqs_maximum_of_900_seconds(
    subject: QueueUnderTest, clock: ManualClock
) -> None:
    subject.queue.send([ResumeRequest(TENANT_A, RUN, 1, delay_seconds=5000)])
    clock.advance(timedelta(seconds=899))
    assert _drain(subject) == []
    clock.advance(timedelta(seconds=1))
    assert [r.step_index for r in _drain(subject)] == [1]
