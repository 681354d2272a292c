"""The EventMatch builders (`workflow_runner.match`): each returns exactly the stored form,
so builders and raw dictionaries mix, and what they build evaluates as written."""

from __future__ import annotations

import pytest
from workflow_runner.errors import InvalidEventMatch
from workflow_runner.match import (
    all_of,
    any_of,
    eq,
    evaluate_event_match,
    gt,
    gte,
    in_,
    lt,
    lte,
    ne,
    validate_event_match,
)
from workflow_runner.match_builders import describe_match
from workflow_runner.refs import Event, Steps


def _atom(path: list[str], op: dict[str, object]) -> dict[str, object]:
    return {"version": 1, "expr": {"kind": "atom", "path": path, "op": op}}


@pytest.mark.parametrize(
    ("built", "kind"),
    [
        (eq("orderId", "o-1"), "eq"),
        (ne("orderId", "o-1"), "ne"),
        (gt("orderId", "o-1"), "gt"),
        (gte("orderId", "o-1"), "gte"),
        (lt("orderId", "o-1"), "lt"),
        (lte("orderId", "o-1"), "lte"),
    ],
)
def test_each_comparison_builds_the_stored_atom(built: dict[str, object], kind: str) -> None:
    assert built == _atom(["orderId"], {"kind": kind, "value": "o-1"})
    assert validate_event_match(built) is built


def test_a_dotted_path_and_a_list_path_build_the_same_atom() -> None:
    assert (
        eq("order.id", 7)
        == eq(["order", "id"], 7)
        == _atom(["order", "id"], {"kind": "eq", "value": 7})
    )
    # A key with a dot in it needs the list form.
    assert eq(["order.id"], 7)["expr"]["path"] == ["order.id"]


def test_in_builds_a_values_list() -> None:
    assert in_("status", ("paid", "settled")) == _atom(
        ["status"], {"kind": "in", "values": ["paid", "settled"]}
    )


def test_all_of_and_any_of_nest_the_expressions_of_their_arguments() -> None:
    built = all_of(eq("a", 1), any_of(gte("b", 2), lt("b", 0)))
    assert built == {
        "version": 1,
        "expr": {
            "kind": "and",
            "nodes": [
                {"kind": "atom", "path": ["a"], "op": {"kind": "eq", "value": 1}},
                {
                    "kind": "or",
                    "nodes": [
                        {"kind": "atom", "path": ["b"], "op": {"kind": "gte", "value": 2}},
                        {"kind": "atom", "path": ["b"], "op": {"kind": "lt", "value": 0}},
                    ],
                },
            ],
        },
    }
    assert evaluate_event_match(built, {"a": 1, "b": -1}) is True
    assert evaluate_event_match(built, {"a": 1, "b": 1}) is False
    assert evaluate_event_match(built, {"b": 5}) is False


def test_builders_and_raw_dictionaries_combine() -> None:
    raw = _atom(["kind"], {"kind": "eq", "value": "refund"})
    built = all_of(raw, eq("amount", 10))
    assert evaluate_event_match(built, {"kind": "refund", "amount": 10}) is True


def test_a_reference_stays_in_place_until_the_step_runs() -> None:
    built = eq("orderId", Event.payload["orderId"])
    assert built["expr"]["op"]["value"] is not None
    assert built["expr"]["op"]["value"] == Event.payload["orderId"]


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: eq("", 1), "must be non-empty keys"),
        (lambda: eq("a..b", 1), "must be non-empty keys"),
        (lambda: eq([], 1), "must be non-empty keys"),
        (lambda: eq(7, 1), "dotted text or a list of keys"),
        (lambda: in_("a", "paid"), "values must be a list"),
        (lambda: all_of(eq("a", 1), {"kind": "atom"}), "argument 2 is not an EventMatch"),
    ],
)
def test_malformed_builder_arguments_are_refused(build: object, message: str) -> None:
    with pytest.raises(InvalidEventMatch, match=message):
        build()  # type: ignore[operator]


def test_describe_match_reads_like_the_condition() -> None:
    built = all_of(eq("orderId", Event.payload["orderId"]), any_of(gte("total", 10), in_("s", [1])))
    assert describe_match(built) == (
        "orderId == event.payload.orderId and (total >= 10 or s in [1])"
    )
    assert describe_match(ne("by", None)) == "by != null"
    assert describe_match(Steps["match"]) == "steps.match"
    assert describe_match(lambda ctx: None) == "(computed)"
