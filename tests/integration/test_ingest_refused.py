"""A trigger whose first pass the database refuses: the run fails (pass_not_storable),
the event stays stored and claimed, the event's other workflows still start."""

from __future__ import annotations

import pytest
from workflow_runner import ManualClock, on_event, run_id_for
from workflow_runner import stream as ev
from workflow_runner.definition import WorkflowRegistry
from workflow_runner.store import Store

from tests.support import refuse_pass_writes, register, stream, trigger


def _wf(registry: WorkflowRegistry, name: str) -> None:
    register(
        registry,
        name=name,
        trigger=on_event("refusal.go"),
        idempotency_key="k",
        steps=lambda s: [s.compute("x", lambda ctx: 1), s.wait(for_="PT1M")],
    )


def test_the_one_workflow_of_an_event_fails_when_its_first_pass_is_refused(
    store: Store, registry: WorkflowRegistry, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    _wf(registry, "refused-alone")
    run_id = run_id_for("refused-alone", "k")
    refuse_pass_writes(monkeypatch, run_id)

    result = trigger(store, registry, "refusal.go", {}, clock.now())

    assert [(o.outcome, o.reason) for o in result.started] == [("failed", "pass_not_storable")]
    assert [e.type for e in stream(store, run_id)] == [ev.RUN_STARTED, ev.RUN_FAILED]
    again = trigger(store, registry, "refusal.go", {}, clock.now(), event_id=result.event_id)
    assert again.stored is False  # the event was kept and claimed: no second attempt


def test_a_refused_first_pass_costs_only_its_own_workflow(
    store: Store, registry: WorkflowRegistry, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    _wf(registry, "refused-one")
    _wf(registry, "refused-other")
    refuse_pass_writes(monkeypatch, run_id_for("refused-one", "k"))

    result = trigger(store, registry, "refusal.go", {}, clock.now())

    outcomes = sorted((o.workflow_name, o.outcome, o.reason) for o in result.started)
    assert outcomes == [
        ("refused-one", "failed", "pass_not_storable"),
        ("refused-other", "suspended", None),
    ]
