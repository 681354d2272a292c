"""Declarative references: built from `Event`/`Steps`/`Scope` or text, resolved against a
step's ctx (or an event), and loud where a silent wrong answer would otherwise follow."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from workflow_runner import DomainEvent, StepContext, WorkflowInfo
from workflow_runner.errors import WorkflowDefinitionError
from workflow_runner.refs import (
    Event,
    Scope,
    Steps,
    UnresolvedReference,
    contains_refs,
    ref,
    substitute_refs,
)

EVENT = DomainEvent(
    id="e-1",
    type="order.placed",
    payload={"orderId": "o-1", "lines": [{"sku": "A"}, {"sku": "B"}], "n": 3},
    tenant_id="t-1",
    time=datetime(2030, 1, 1, 9, 0, tzinfo=UTC),
)
CTX = StepContext(
    event=EVENT,
    steps={"approval": {"by": "ada"}, "none": None},
    scope={"item": {"sku": "A"}},
    workflow=WorkflowInfo("run-1", "wf", 0, 1, "f" * 64),
    now=datetime(2030, 1, 1, 9, 0, tzinfo=UTC),
)


@pytest.mark.parametrize(
    ("reference", "text", "value"),
    [
        (Event.payload["orderId"], "event.payload.orderId", "o-1"),
        (Event.payload["lines"][1]["sku"], "event.payload.lines[1].sku", "B"),
        (Event.id, "event.id", "e-1"),
        (Event.tenant_id, "event.tenant_id", "t-1"),
        (Event.time, "event.time", "2030-01-01T09:00:00.000000Z"),
        (Steps["approval"]["by"], "steps.approval.by", "ada"),
        (Steps["none"], "steps.none", None),
        (Scope["item"]["sku"], "scope.item.sku", "A"),
        (ref("workflow.run_id"), "workflow.run_id", "run-1"),
    ],
)
def test_a_reference_resolves_against_the_step_context(
    reference: object, text: str, value: object
) -> None:
    assert reference.text == text  # type: ignore[attr-defined]
    assert ref(text) == reference
    assert reference(CTX) == value  # type: ignore[operator]


def test_keys_that_are_not_names_print_quoted() -> None:
    reference = Steps["order.approved"]["by"]
    assert reference.text == "steps['order.approved'].by"
    assert (
        reference(StepContext(EVENT, {"order.approved": {"by": "x"}}, {}, CTX.workflow, CTX.now))
        == "x"
    )


def test_an_event_reference_resolves_against_the_event_itself() -> None:
    assert Event.payload["orderId"](EVENT) == "o-1"
    with pytest.raises(UnresolvedReference, match="only event references"):
        Steps["approval"](EVENT)


@pytest.mark.parametrize(
    ("reference", "message"),
    [
        (Event.payload["missing"], "no 'missing' in event.payload"),
        (Event.payload["lines"][5], r"no \[5\] in event.payload.lines"),
        (Event.payload["n"]["x"], "event.payload.n is int"),
        (Steps["later"], "no 'later' in steps"),
    ],
)
def test_a_reference_that_leads_nowhere_names_the_path(reference: object, message: str) -> None:
    with pytest.raises(UnresolvedReference, match=message):
        reference(CTX)  # type: ignore[operator]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "expected a path"),
        ("evnt.payload.x", "unknown root 'evnt'"),
        ("event.body.x", "event has the fields"),
        ("event", "event has the fields"),
        ("steps..x", "expected dotted names"),
        ("steps.x[y]", "expected dotted names"),
        (".steps", "expected dotted names"),
    ],
)
def test_malformed_reference_text_is_a_definition_error(text: str, message: str) -> None:
    with pytest.raises(WorkflowDefinitionError, match=message):
        ref(text)


def test_a_reference_refuses_to_be_compared_or_tested_at_definition_time() -> None:
    with pytest.raises(TypeError, match="cannot be compared"):
        _ = Steps["total"] == 0
    with pytest.raises(TypeError, match="no truth value"):
        bool(Steps["approved"])
    with pytest.raises(WorkflowDefinitionError, match=r"use Event.payload\['x'\]"):
        Event["x"]  # type: ignore[index]


def test_substitution_replaces_references_inside_values_and_keeps_the_rest() -> None:
    static = {"a": [1, {"b": 2}]}
    assert substitute_refs(static, CTX) is static  # nothing to replace: no copy
    body = {"orderId": Event.payload["orderId"], "by": [Steps["approval"]["by"], "x"], "k": 1}
    assert contains_refs(body) and not contains_refs(static)
    assert substitute_refs(body, CTX) == {"orderId": "o-1", "by": ["ada", "x"], "k": 1}
