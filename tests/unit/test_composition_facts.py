"""The stored shapes of the composition facts, and what the timeline says of them."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from workflow_runner import stream
from workflow_runner.store import StoredEvent
from workflow_runner.timeline import describe_event

NOW = datetime(2030, 1, 1, 9, 0, tzinfo=UTC)
COMMON = {
    "workflowName": "w",
    "triggerEventType": "t",
    "stepIndex": 2,
    "path": [{"i": 2}],
    "definitionFingerprint": "f",
    "resultsDelta": {},
    "awaitedRefsDelta": {},
}
SHAPES: list[tuple[str, dict[str, Any], str]] = [
    (
        stream.CHILDREN_WAITING,
        {
            **COMMON,
            "joinId": "j",
            "joinKind": "map",
            "childWorkflow": "kid",
            "children": 40,
            "concurrency": 5,
            "catch": True,
            "resultKey": "all",
        },
        "step 2: map over 40 item(s) of kid, 5 at once",
    ),
    (
        stream.CHILDREN_WAITING,
        {
            **COMMON,
            "joinId": "j",
            "joinKind": "call",
            "childWorkflow": "kid",
            "children": 1,
            "concurrency": 1,
            "catch": False,
            "childRunId": "r1",
        },
        "step 2: called kid (run r1)",
    ),
    (
        stream.CHILDREN_SETTLED,
        {
            "joinId": "j",
            "suspensionVersion": 2,
            "stepIndex": 2,
            "settled": 3,
            "failed": 1,
            "reason": "returned_failure",
            "childRunId": "r9",
        },
        "3 child run(s) settled, 1 failed (returned_failure, run r9)",
    ),
    (
        stream.CHILDREN_REQUESTED,
        {"joinId": "j", "childWorkflow": "kid", "childRunIds": ["r1"], "stepIndex": 0, "path": []},
        "step 0: started kid (1 run(s))",
    ),
    (
        stream.TASKS_SCHEDULED,
        {
            **COMMON,
            "tasks": [
                {
                    "taskKey": "a",
                    "taskId": "t1",
                    "stepKind": "task",
                    "maxAttempts": 3,
                    "catch": False,
                },
                {
                    "taskKey": "b",
                    "taskId": "t2",
                    "stepKind": "webhook.send",
                    "maxAttempts": 5,
                    "catch": True,
                    "timeoutMs": 1000,
                },
            ],
            "resultKey": "both",
        },
        "step 2: 2 tasks at once ('a', 'b')",
    ),
]


@pytest.mark.parametrize(("type_", "payload", "text"), SHAPES)
def test_each_fact_reads_its_stored_shape_and_writes_it_back(
    type_: str, payload: dict[str, Any], text: str
) -> None:
    fact = stream.decode(type_, payload)
    assert not isinstance(fact, stream.UnknownFact)
    written = fact.to_payload()
    expected = dict(payload)
    if type_ in (stream.CHILDREN_WAITING, stream.TASKS_SCHEDULED):
        expected["results"] = written["results"]  # the marker 0.1 readers trip on
    assert written == expected
    event = StoredEvent(1, "t", "r", stream.RUN_STREAM, 2, type_, payload, {}, NOW)
    assert describe_event(event) == text


def test_a_task_outcome_without_run_due_is_due_as_before() -> None:
    stored = {"taskKey": "a", "taskId": "t", "suspensionVersion": 2, "attempt": 1, "result": 1}
    fact = stream.decode(stream.TASK_COMPLETED, stored)
    assert isinstance(fact, stream.TaskCompleted) and fact.run_due
    assert fact.to_payload() == stored


def test_a_run_started_by_a_parent_names_it() -> None:
    started = {
        "workflowName": "kid",
        "workflowVersion": 1,
        "triggerEventType": "workflow.call",
        "triggerEventRef": {"eventId": "e"},
        "definitionFingerprint": "f",
        "parentRunId": "p1",
    }
    fact = stream.decode(stream.RUN_STARTED, started)
    assert isinstance(fact, stream.RunStarted) and fact.parent_run_id == "p1"
    assert fact.to_payload() == started
