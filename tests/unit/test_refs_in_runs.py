"""References and builders inside runs: resolved by the interpreter before a value is
checked and stored, and a value a run computes that a step cannot take fails the run
with a reason naming the argument (never the value)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from workflow_runner import DomainEvent, Event, Scope, Steps, define_workflow, on_event, ref
from workflow_runner.definition.dsl import WorkflowDefinition
from workflow_runner.interpreter import Interpreter
from workflow_runner.match import all_of, eq, in_

NOW = datetime(2030, 1, 1, 9, 0, tzinfo=UTC)
EVENT = DomainEvent(
    id="e1",
    type="order.placed",
    payload={"orderId": "o-1", "email": "ada@example.com", "lines": [{"sku": "A"}, {"sku": "B"}]},
    tenant_id="t",
)


def _wf(steps: Any, **kwargs: Any) -> WorkflowDefinition:
    kwargs.setdefault("awaits", {"approved": "order.approved"})
    return define_workflow(
        name="refs", trigger=on_event("order.placed"), steps=steps, register=False, **kwargs
    )


def _run(wf: WorkflowDefinition, results: dict[str, Any] | None = None, path: Any = None) -> Any:
    return Interpreter(wf, EVENT, "run-1", NOW, results=results, dispatch_seed="s").run(path)


def test_references_in_a_match_are_resolved_before_it_is_stored() -> None:
    wf = _wf(
        lambda s: [
            s.wait_for_event(
                "approved",
                match=all_of(eq("orderId", Event.payload["orderId"]), in_("sku", ["A", "B"])),
                timeout="P3D",
            )
        ]
    )
    result = _run(wf)
    assert result.suspension.event.match == {
        "version": 1,
        "expr": {
            "kind": "and",
            "nodes": [
                {"kind": "atom", "path": ["orderId"], "op": {"kind": "eq", "value": "o-1"}},
                {"kind": "atom", "path": ["sku"], "op": {"kind": "in", "values": ["A", "B"]}},
            ],
        },
    }


def test_references_feed_deliveries_branches_loops_and_the_return_value() -> None:
    wf = _wf(
        lambda s: [
            s.compute("first", Event.payload["lines"][0]["sku"]),
            s.for_each(
                over=Event.payload["lines"],
                as_="line",
                do=[
                    s.webhook_send(
                        url="https://hooks.example.com/line",
                        headers={"x-order": Event.payload["orderId"]},
                        body={"sku": Scope["line"]["sku"], "first": Steps["first"]},
                    )
                ],
            ),
            s.mail_send(to=Event.payload["email"], subject=ref("event.payload.orderId"), body="-"),
            s.branch(
                if_=Steps["first"],
                on_true=[s.return_({"isSuccess": True, "order": Event.payload["orderId"]})],
            ),
        ]
    )
    result = _run(wf)
    assert result.outcome == "completed"
    assert result.return_value == {"isSuccess": True, "order": "o-1"}
    hooks = [d.request for d in result.dispatches if d.step_kind == "webhook.send"]
    assert [h["bodyJson"] for h in hooks] == [
        '{"sku":"A","first":"A"}',
        '{"sku":"B","first":"A"}',
    ]
    assert hooks[0]["headers"] == {"x-order": "o-1"}
    [mail] = [d.request for d in result.dispatches if d.step_kind == "mail.send"]
    assert (mail["to"], mail["subject"]) == (["ada@example.com"], "o-1")


def test_an_event_reference_is_an_idempotency_key() -> None:
    wf = _wf(lambda s: [s.return_()], idempotency_key=Event.payload["orderId"])
    assert wf.key_for(EVENT) == "o-1"


@pytest.mark.parametrize(
    ("steps", "reason"),
    [
        (lambda s: [s.wait(for_=lambda ctx: "3 days")], "invalid_argument:for_"),
        (lambda s: [s.wait(until=lambda ctx: 17)], "invalid_argument:until"),
        (
            lambda s: [s.wait_for_event("approved", timeout=lambda ctx: "3 days")],
            "invalid_argument:timeout",
        ),
        (
            lambda s: [s.wait_for_event("approved", lookback=lambda ctx: "an hour")],
            "invalid_argument:lookback",
        ),
        (
            lambda s: [s.wait_for_event("approved", match=lambda ctx: {"orderId": "o-1"})],
            "invalid_argument:match",
        ),
        (
            lambda s: [s.mail_send(to=lambda ctx: "nobody", subject="s", body="b")],
            "invalid_argument:to",
        ),
        (lambda s: [s.webhook_send(url=lambda ctx: None)], "invalid_argument:url"),
        (
            lambda s: [s.webhook_send(url="https://h.example.com", method=lambda ctx: "GET")],
            "invalid_argument:method",
        ),
        (
            lambda s: [s.webhook_send(url="https://h.example.com", headers=lambda ctx: {"a": 1})],
            "invalid_argument:headers",
        ),
        (
            lambda s: [s.for_each(over=Event.payload["email"], as_="x", do=[])],
            "invalid_argument:over",
        ),
    ],
)
def test_a_value_a_run_computes_that_the_step_cannot_take_names_the_argument(
    steps: Any, reason: str
) -> None:
    result = _run(_wf(steps))
    assert (result.outcome, result.reason) == ("failed", reason)
    assert result.error == "workflow step failed (InvalidArgument)"
    assert "ada@example.com" not in reason


def test_a_reference_the_run_cannot_follow_fails_it_naming_the_path() -> None:
    wf = _wf(lambda s: [s.mail_send(to=Event.payload["mail"], subject="s", body="b")])
    result = _run(wf)
    assert result.reason == "unresolved_reference:event.payload.mail"
    assert result.error == "workflow step failed (UnresolvedReference)"
    assert "no 'mail' in event.payload" in result.error_detail


def test_a_reference_is_part_of_the_fingerprint_by_its_path() -> None:
    def fingerprint(reference: Any) -> str:
        return _wf(
            lambda s: [s.compute("a", lambda ctx: 1), s.return_({"id": reference})]
        ).fingerprint

    assert fingerprint(Event.payload["orderId"]) == fingerprint(ref("event.payload.orderId"))
    assert fingerprint(Event.payload["orderId"]) != fingerprint(Event.payload["order"])
    assert fingerprint(Steps["a"]) != fingerprint(Steps["a"]["b"])
