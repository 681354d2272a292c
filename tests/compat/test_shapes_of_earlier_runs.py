"""Runs an earlier release started, before shapes were recorded (issue 32, item 5): they
have no row in workflow_definitions. The first deploy of this release registers the
definitions its code has (the Migrate custom resource; locally the first pass on them):
a run whose definition is among them gets its shape that way and resumes by shape on a
later copy edit. A run whose definition was gone before that stays pinned exactly: it
fails loud, saying its shape was never recorded."""

from __future__ import annotations

from datetime import timedelta

from workflow_runner import ManualClock, define_workflow, on_event
from workflow_runner.definition import WorkflowDefinition, WorkflowRegistry
from workflow_runner.engine.pinning import register
from workflow_runner.store import Store

from tests.support import TENANT_A, resume_due, stream, trigger


def _flow(subject: str) -> WorkflowDefinition:
    return define_workflow(
        name="earlier",
        trigger=on_event("earlier.go"),
        idempotency_key=lambda event: event.payload["id"],
        steps=lambda s: [
            s.wait(for_="P1D"),
            s.mail_send(to="ops@example.com", subject=subject, body="-"),
        ],
        register=False,
    )


def _registry(definition: WorkflowDefinition) -> WorkflowRegistry:
    registry = WorkflowRegistry()
    registry.register(definition)
    return registry


def _started_by_an_earlier_release(store: Store, clock: ManualClock) -> str:
    """A waiting run as the release before this one leaves it: its stream and pending row,
    no definition row (that release had no such table)."""
    result = trigger(store, _registry(_flow("Hi")), "earlier.go", {"id": "e1"}, clock.now())
    store.conn.execute("DELETE FROM workflow_definitions")
    return result.started[0].run_id


def test_the_upgrade_registers_the_definitions_its_code_has_and_their_runs_resume_by_shape(
    store: Store, clock: ManualClock
) -> None:
    run_id = _started_by_an_earlier_release(store, clock)
    register(store, [_flow("Hi")], clock.now())  # the upgrade's deploy: same workflows
    edited = _registry(_flow("Hello"))
    [result] = resume_due(store, edited, clock.now() + timedelta(days=1))
    assert result.outcome == "completed"
    assert stream(store, run_id, TENANT_A)[-2].type == "workflow.step.resumed"


def test_a_run_whose_definition_was_gone_before_the_upgrade_fails_loud_saying_so(
    store: Store, clock: ManualClock
) -> None:
    run_id = _started_by_an_earlier_release(store, clock)
    edited = _registry(_flow("Hello"))  # the upgrade and the edit in one deploy
    [result] = resume_due(store, edited, clock.now() + timedelta(days=1))
    assert (result.outcome, result.reason) == ("failed", "workflow_definition_changed")
    failed = stream(store, run_id, TENANT_A)[-1].payload
    assert "its shape was never recorded" in failed["error"]
