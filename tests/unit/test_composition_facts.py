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
    (
        stream.CHILDREN_WAITING,
        {
            **COMMON,
            "joinId": "j",
            "joinKind": "map",
            "childWorkflow": "kid",
            "children": 10,
            "concurrency": 5,
            "catch": False,
            "resultKey": "batch",
            "completion": {"minSuccessful": 3, "toleratedFailurePct": 20},
        },
        "step 2: map over 10 item(s) of kid, 5 at once, until 3 succeed, tolerate 20% failed",
    ),
    (
        stream.CHILDREN_SETTLED,
        {
            "joinId": "j",
            "suspensionVersion": 2,
            "stepIndex": 2,
            "settled": 4,
            "failed": 1,
            "reason": "returned_failure",
            "childRunId": "r9",
            "completion": "min_successful_reached",
        },
        "4 child run(s) settled, 1 failed (returned_failure, run r9): min_successful_reached",
    ),
    (
        stream.TASKS_SCHEDULED,
        {
            **COMMON,
            "tasks": [
                {"taskKey": "a", "taskId": "t1", "stepKind": "task", "maxAttempts": 3},
                {"taskKey": "b", "taskId": "t2", "stepKind": "task", "maxAttempts": 3},
            ],
            "resultKey": "both",
            "completion": {"toleratedFailures": 1},
            "catch": True,
        },
        "step 2: 2 tasks at once ('a', 'b'), tolerate 1 failure(s)",
    ),
    (
        stream.STEP_STOPPED,
        {
            "kind": "map",
            "stepIndex": 2,
            "path": [{"i": 2}],
            "suspensionVersion": 2,
            "reason": "min_successful_reached",
            "cancelled": [3, 4],
            "joinId": "j",
            "kept": [5],
            "notStarted": 4,
        },
        "step 2: map stopped (min_successful_reached): cancelled item(s) 3, 4; "
        "left item(s) 5 to another owner; 4 never started",
    ),
    (
        stream.STEP_STOPPED,
        {
            "kind": "parallel",
            "stepIndex": 1,
            "path": [{"i": 1}],
            "suspensionVersion": 4,
            "reason": "task_failed",
            "cancelled": [1],
            "taskKeys": ["b"],
        },
        "step 1: parallel stopped (task_failed): task(s) 'b' not run again",
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
        for task in expected.get("tasks", []):
            task.setdefault("catch", False)  # always written
    assert written == expected
    event = StoredEvent(1, "t", "r", stream.RUN_STREAM, 2, type_, payload, {}, NOW)
    assert describe_event(event) == text


def test_a_task_outcome_without_run_due_is_due_as_before() -> None:
    stored = {"taskKey": "a", "taskId": "t", "suspensionVersion": 2, "attempt": 1, "result": 1}
    fact = stream.decode(stream.TASK_COMPLETED, stored)
    assert isinstance(fact, stream.TaskCompleted) and fact.run_due
    assert fact.to_payload() == stored


CHILD_STARTED = {
    "workflowName": "kid",
    "workflowVersion": 1,
    "triggerEventType": "workflow.call",
    "triggerEventRef": {"eventId": "e"},
    "definitionFingerprint": "f",
    "parentRunId": "p1",
}


def test_a_run_started_by_a_parent_names_it() -> None:
    fact = stream.decode(stream.RUN_STARTED, CHILD_STARTED)
    assert isinstance(fact, stream.RunStarted) and fact.parent_run_id == "p1"
    assert fact.map_index is None  # as every child started before map indexes
    assert fact.to_payload() == CHILD_STARTED


def test_a_run_a_map_started_knows_its_item() -> None:
    started = {**CHILD_STARTED, "mapIndex": 7}
    fact = stream.decode(stream.RUN_STARTED, started)
    assert isinstance(fact, stream.RunStarted) and fact.map_index == 7
    assert fact.to_payload() == started
    event = StoredEvent(1, "t", "r", stream.RUN_STREAM, 1, stream.RUN_STARTED, started, {}, NOW)
    assert describe_event(event) == "kid v1 on workflow.call (e), child of run p1 (map item 7)"


def test_facts_written_before_completion_policies_read_as_having_none() -> None:
    waiting = stream.decode(
        stream.CHILDREN_WAITING,
        {**COMMON, "joinId": "j", "childWorkflow": "kid", "children": 2, "concurrency": 1},
    )
    assert isinstance(waiting, stream.ChildrenWaiting) and waiting.completion is None
    settled = stream.decode(
        stream.CHILDREN_SETTLED, {"joinId": "j", "suspensionVersion": 2, "settled": 2}
    )
    assert isinstance(settled, stream.ChildrenSettled) and settled.completion is None
    parallel = stream.decode(stream.TASKS_SCHEDULED, {**COMMON, "tasks": []})
    assert isinstance(parallel, stream.TasksScheduled)
    assert (parallel.completion, parallel.catch) == (None, False)


def _parallel(completion: dict[str, Any] | None, *outcomes: stream.Fact) -> stream.RunState:
    started = stream.RunStarted(
        workflow_name="w",
        workflow_version=1,
        trigger_event_type="t",
        trigger_event_id="e",
        definition_fingerprint="f",
    )
    tasks = [
        {"taskKey": key, "taskId": f"id-{key}", "stepKind": "task", "maxAttempts": 1}
        for key in ("a", "b", "c")
    ]
    payload = {**COMMON, "tasks": tasks, "resultKey": "all"}
    if completion is not None:
        payload["completion"] = completion
    scheduled = stream.decode(stream.TASKS_SCHEDULED, payload)
    facts = [started, scheduled, *outcomes]
    return stream.fold_run(
        "r", "t", [stream.RecordedFact(v, NOW, f) for v, f in enumerate(facts, start=1)]
    )


def _done(key: str) -> stream.TaskCompleted:
    return stream.TaskCompleted(task_key=key, task_id=f"id-{key}", suspension_version=2, attempt=1)


def _failed(key: str) -> stream.TaskFailed:
    return stream.TaskFailed(
        task_key=key,
        task_id=f"id-{key}",
        suspension_version=2,
        attempts=1,
        error="workflow step failed (E)",
        error_class="E",
        reason="attempts_exhausted",
    )


def test_a_parallel_with_a_policy_is_due_when_the_policy_decides() -> None:
    policy = {"minSuccessful": 2}
    assert not _parallel(policy, _done("a"), _failed("b")).outcome_ready
    state = _parallel(policy, _done("a"), _done("c"))
    assert state.outcome_ready and state.parallel_completion == "min_successful_reached"
    stop = state.parallel_stop()
    assert stop is not None and (stop.task_keys, stop.cancelled) == (("b",), (1,))
    state.apply(stream.RecordedFact(5, NOW, stop))
    assert not state.waits_for_task("id-b")  # its late outcome is dropped


def test_a_parallel_with_a_policy_does_not_fail_fast() -> None:
    state = _parallel({"toleratedFailures": 1}, _failed("a"))
    assert not state.outcome_ready and state.parallel_stop() is None
    assert _parallel({"toleratedFailures": 1}, _failed("a"), _failed("b")).outcome_ready


def test_a_parallel_without_a_policy_stops_the_rest_at_an_uncaught_failure() -> None:
    state = _parallel(None, _failed("b"))
    assert state.outcome_ready
    stop = state.parallel_stop()
    assert stop is not None and stop.reason == "task_failed" and stop.task_keys == ("a", "c")
    assert _parallel(None, _done("a"), _done("b"), _done("c")).parallel_stop() is None
