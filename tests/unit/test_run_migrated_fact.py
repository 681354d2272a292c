"""`workflow.run-migrated`: an operator moved a waiting run onto another definition. The
fold moves the open suspension, keeps its version and what it received, and forgets the
move at the next suspension."""

from __future__ import annotations

from datetime import UTC, datetime

from workflow_runner import stream

NOW = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
STARTED = {
    "workflowName": "w",
    "workflowVersion": 1,
    "triggerEventType": "t",
    "triggerEventRef": {"eventId": "e"},
    "definitionFingerprint": "f1",
}
WAITING = {
    "workflowName": "w",
    "triggerEventType": "t",
    "stepIndex": 1,
    "path": [{"i": 1}],
    "definitionFingerprint": "f1",
    "eventType": "paid",
    "match": None,
    "timeoutAt": "2026-01-06T09:00:00Z",
    "lookbackFrom": "2026-01-05T09:00:00Z",
    "resultKey": "payment",
}
MOVE = stream.RunMigrated(
    suspension_version=2,
    from_fingerprint="f1",
    to_fingerprint="f2",
    to_version=2,
    from_step_index=1,
    to_step_index=2,
    from_path=[{"i": 1}],
    to_path=[{"i": 2}],
)


def _fold(*facts: stream.Fact) -> stream.RunState:
    recorded = [stream.RecordedFact(v, NOW, f) for v, f in enumerate(facts, start=1)]
    return stream.fold_run("r", "t", recorded)


def _started() -> stream.Fact:
    return stream.decode(stream.RUN_STARTED, STARTED)


def _waiting() -> stream.Fact:
    return stream.decode(stream.STEP_WAITING_FOR_EVENT, WAITING)


def test_the_payload_round_trips() -> None:
    assert MOVE.to_payload() == {
        "suspensionVersion": 2,
        "fromFingerprint": "f1",
        "toFingerprint": "f2",
        "toVersion": 2,
        "fromStepIndex": 1,
        "toStepIndex": 2,
        "fromPath": [{"i": 1}],
        "toPath": [{"i": 2}],
    }
    assert stream.decode(stream.RUN_MIGRATED, MOVE.to_payload()) == MOVE
    assert stream.type_of(MOVE) == "workflow.run-migrated"


def test_the_fold_moves_the_open_suspension_and_keeps_its_version_and_match() -> None:
    matched = stream.StepEventMatched(
        step_index=1, event_id="ev-1", event_type="paid", suspension_version=2
    )
    state = _fold(
        _started(),
        _waiting(),
        matched,
        stream.OperatorAction(action="migrate", by="x", step_index=1),
        MOVE,
    )
    assert state.suspension is not None
    assert (state.suspension.step_index, state.suspension.path) == (2, [{"i": 2}])
    assert state.suspension.definition_fingerprint == "f2"
    assert (state.fingerprint, state.suspension_version, state.version) == ("f2", 2, 5)
    assert state.matched_event_id == "ev-1"
    assert isinstance(state.suspension, stream.StepWaitingForEvent)
    assert state.suspension.result_key == "payment"
    assert state.waits_at(2) and state.waits_at(1) and not state.waits_at(0)


def test_a_move_of_another_suspension_changes_nothing() -> None:
    stale = stream.RunMigrated(**{**MOVE.__dict__, "suspension_version": 7})
    state = _fold(_started(), _waiting(), stale)
    assert state.suspension is not None and state.suspension.step_index == 1
    assert (state.fingerprint, state.moved_from) == ("f1", ())


def test_the_next_suspension_forgets_where_the_last_one_was_moved_from() -> None:
    resumed = stream.StepResumed(
        step_index=2,
        path=[{"i": 2}],
        retry_attempt=None,
        suspension_version=2,
        awaited_event_id=None,
        resumed_by="timeout",
    )
    again = stream.decode(stream.STEP_WAITING_FOR_EVENT, {**WAITING, "stepIndex": 3})
    state = _fold(_started(), _waiting(), MOVE, resumed, again)
    assert state.waits_at(3) and not state.waits_at(1) and state.moved_from == ()


def test_a_release_that_does_not_know_it_folds_the_run_where_it_waited_before() -> None:
    unknown = stream.UnknownFact("workflow.run-migrated", MOVE.to_payload())
    state = _fold(_started(), _waiting(), unknown)
    assert state.suspension is not None and state.suspension.step_index == 1
    assert state.fingerprint == "f1"
