"""`workflow.operator-action`: who asked for an action on a run (added after 0.1.0)."""

from __future__ import annotations

from datetime import UTC, datetime

from workflow_runner import stream

NOW = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
STARTED = {
    "workflowName": "w",
    "workflowVersion": 1,
    "triggerEventType": "t",
    "triggerEventRef": {"eventId": "e"},
    "definitionFingerprint": "f",
}


def test_the_payload_round_trips_and_omits_what_is_absent() -> None:
    full = stream.OperatorAction(action="resume", by="cli (ada@host)", reason="asked", step_index=1)
    assert full.to_payload() == {
        "action": "resume",
        "by": "cli (ada@host)",
        "reason": "asked",
        "stepIndex": 1,
    }
    assert stream.decode(stream.OPERATOR_ACTION, full.to_payload()) == full
    bare = stream.OperatorAction(action="cancel", by="console (ada@host)")
    assert bare.to_payload() == {"action": "cancel", "by": "console (ada@host)"}
    assert stream.type_of(bare) == "workflow.operator-action"


def test_the_fold_counts_it_but_it_changes_nothing_else() -> None:
    facts = [
        stream.RecordedFact(1, NOW, stream.decode(stream.RUN_STARTED, STARTED)),
        stream.RecordedFact(2, NOW, stream.OperatorAction(action="cancel", by="x")),
    ]
    state = stream.fold_run("r", "t", facts)
    assert (state.status, state.version, state.settled) == ("running", 2, False)
