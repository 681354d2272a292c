"""Unit tests for EventMatch validation and evaluation."""

from __future__ import annotations

import copy
import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from workflow_runner.errors import InvalidEventMatch
from workflow_runner.match import (
    MAX_DEPTH,
    MAX_NODES,
    equality_key,
    evaluate_event_match,
    matches_safely,
    payload_keys,
    validate_event_match,
)


def atom(path: list[str], kind: str, value: Any) -> dict[str, Any]:
    op = {"kind": kind, "values": value} if kind == "in" else {"kind": kind, "value": value}
    return {"kind": "atom", "path": path, "op": op}


def match(expr: dict[str, Any]) -> dict[str, Any]:
    return {"version": 1, "expr": expr}


def nested(kind: str, depth: int, leaf: dict[str, Any]) -> dict[str, Any]:
    """An expression whose innermost node (the leaf) sits at the given depth."""
    expr = leaf
    for _ in range(depth - 1):
        expr = {"kind": kind, "nodes": [expr]}
    return expr


PAYLOAD: dict[str, Any] = {
    "order": {
        "status": "paid",
        "total": 120,
        "price": 9.5,
        "gift": False,
        "coupon": None,
        "items": [{"sku": "A"}],
        "region": "EU",
    },
    "flag": True,
    "count": 1,
    "zero": 0,
    "ratio": 1.0,
    "nan": math.nan,
}

TRUE_ATOM = atom(["order", "status"], "eq", "paid")
FALSE_ATOM = atom(["order", "status"], "eq", "refunded")


# --- validation -------------------------------------------------------------------------


VALID_EXPRESSIONS = [
    match({"kind": "and", "nodes": []}),
    match({"kind": "or", "nodes": []}),
    match(TRUE_ATOM),
    match(atom(["a"], "in", [])),
    match(atom(["a"], "in", ["x", 1, 2.5, True, None])),
    match(atom([""], "eq", None)),
    match({"kind": "or", "nodes": [TRUE_ATOM, {"kind": "and", "nodes": [FALSE_ATOM]}]}),
    *(match(atom(["a", "b"], kind, 3)) for kind in ("eq", "ne", "gt", "gte", "lt", "lte")),
]


@pytest.mark.parametrize("expression", VALID_EXPRESSIONS)
def test_validate_returns_a_valid_expression_unchanged(expression: dict[str, Any]) -> None:
    before = copy.deepcopy(expression)
    assert validate_event_match(expression) is expression
    assert expression == before


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ([], "EventMatch invalid at (root): expected an object, got list"),
        (None, "EventMatch invalid at (root): expected an object, got None"),
        ({"expr": TRUE_ATOM}, "EventMatch invalid at version: missing"),
        ({"version": 2, "expr": TRUE_ATOM}, "EventMatch version 2 is not supported (expected 1)"),
        (
            {"version": True, "expr": TRUE_ATOM},
            "EventMatch version True is not supported (expected 1)",
        ),
        (
            {"version": "1", "expr": TRUE_ATOM},
            'EventMatch version "1" is not supported (expected 1)',
        ),
        ({"version": 1}, 'EventMatch invalid at (root): missing key "expr"'),
        (
            {"version": 1, "expr": TRUE_ATOM, "note": "x"},
            'EventMatch invalid at (root): unknown key "note"',
        ),
        ({"version": 1, "expr": []}, "EventMatch invalid at expr: expected an object, got list"),
        (match({"nodes": []}), 'EventMatch invalid at expr: "kind" must be a string, got None'),
        (
            match({"kind": "xor", "nodes": []}),
            'EventMatch invalid at expr: unknown expression kind "xor"',
        ),
        (match({"kind": "and"}), 'EventMatch invalid at expr: missing key "nodes"'),
        (
            match({"kind": "and", "nodes": [], "extra": 1}),
            'EventMatch invalid at expr: unknown key "extra"',
        ),
        (
            match({"kind": "or", "nodes": {"a": TRUE_ATOM}}),
            "EventMatch invalid at expr.nodes: expected a list, got dict",
        ),
        (
            match(
                {
                    "kind": "and",
                    "nodes": [
                        TRUE_ATOM,
                        {"kind": "atom", "path": ["a"], "op": {"kind": "like", "value": "x%"}},
                    ],
                }
            ),
            'EventMatch invalid at expr.nodes[1].op: unknown op kind "like"',
        ),
        (
            match({"kind": "atom", "path": [], "op": {"kind": "eq", "value": 1}}),
            "EventMatch invalid at expr.path: must not be empty",
        ),
        (
            match({"kind": "atom", "path": "a.b", "op": {"kind": "eq", "value": 1}}),
            'EventMatch invalid at expr.path: expected a list of strings, got "a.b"',
        ),
        (
            match({"kind": "atom", "path": ["a", 0], "op": {"kind": "eq", "value": 1}}),
            "EventMatch invalid at expr.path[1]: expected a string, got 0",
        ),
        (
            match({"kind": "atom", "path": ["a"]}),
            'EventMatch invalid at expr: missing key "op"',
        ),
        (
            match({"kind": "atom", "path": ["a"], "op": {"kind": "eq", "value": 1}, "x": 1}),
            'EventMatch invalid at expr: unknown key "x"',
        ),
        (
            match({"kind": "atom", "path": ["a"], "op": {"kind": "eq"}}),
            'EventMatch invalid at expr.op: missing key "value"',
        ),
        (
            match({"kind": "atom", "path": ["a"], "op": {"kind": "eq", "values": [1]}}),
            'EventMatch invalid at expr.op: unknown key "values"',
        ),
        (
            match(atom(["a"], "eq", [1, 2])),
            "EventMatch invalid at expr.op.value: expected a JSON scalar, got list",
        ),
        (
            match(atom(["a"], "eq", {"b": 1})),
            "EventMatch invalid at expr.op.value: expected a JSON scalar, got dict",
        ),
        (
            match(atom(["a"], "gt", math.inf)),
            "EventMatch invalid at expr.op.value: expected a JSON scalar, got inf",
        ),
        (
            match(atom(["a"], "in", "abc")),
            'EventMatch invalid at expr.op.values: expected a list, got "abc"',
        ),
        (
            match(atom(["a"], "in", [1, [2]])),
            "EventMatch invalid at expr.op.values[1]: expected a JSON scalar, got list",
        ),
        (
            match({"kind": "atom", "path": ["a"], "op": {"kind": "in", "value": 1}}),
            'EventMatch invalid at expr.op: unknown key "value"',
        ),
        (
            match({"kind": "or", "nodes": [TRUE_ATOM, {"kind": "and", "nodes": [7]}]}),
            "EventMatch invalid at expr.nodes[1].nodes[0]: expected an object, got 7",
        ),
    ],
)
def test_validate_rejects_grammar_violations_naming_the_location(
    expression: object, message: str
) -> None:
    with pytest.raises(InvalidEventMatch) as caught:
        validate_event_match(expression)
    assert str(caught.value) == message


def test_validate_accepts_nesting_up_to_the_depth_limit() -> None:
    validate_event_match(match(nested("and", MAX_DEPTH, TRUE_ATOM)))


def test_validate_rejects_nesting_beyond_the_depth_limit() -> None:
    with pytest.raises(InvalidEventMatch, match=f"nested deeper than {MAX_DEPTH} levels"):
        validate_event_match(match(nested("or", MAX_DEPTH + 1, TRUE_ATOM)))


def test_validate_rejects_hostile_nesting_without_recursion_error() -> None:
    with pytest.raises(InvalidEventMatch, match="nested deeper"):
        validate_event_match(match(nested("and", 100_000, TRUE_ATOM)))


def test_validate_rejects_self_referencing_structures() -> None:
    loop: dict[str, Any] = {"kind": "and", "nodes": []}
    loop["nodes"].append(loop)
    with pytest.raises(InvalidEventMatch, match="nested deeper"):
        validate_event_match(match(loop))


def test_validate_accepts_exactly_the_node_limit() -> None:
    validate_event_match(match({"kind": "and", "nodes": [TRUE_ATOM] * (MAX_NODES - 1)}))


def test_validate_rejects_more_than_the_node_limit() -> None:
    with pytest.raises(InvalidEventMatch, match=f"more than {MAX_NODES} nodes"):
        validate_event_match(match({"kind": "and", "nodes": [TRUE_ATOM] * MAX_NODES}))


# --- evaluation -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        (atom(["order", "status"], "eq", "paid"), True),
        (atom(["order", "status"], "eq", "PAID"), False),
        (atom(["order", "status"], "ne", "paid"), False),
        (atom(["order", "status"], "ne", "open"), True),
        (atom(["order", "total"], "eq", 120), True),
        (atom(["order", "total"], "eq", 120.0), True),
        (atom(["order", "total"], "eq", "120"), False),
        (atom(["order", "coupon"], "eq", None), True),
        (atom(["order", "coupon"], "ne", None), False),
        (atom(["order", "gift"], "eq", False), True),
        (atom(["order", "region"], "in", ["US", "EU"]), True),
        (atom(["order", "region"], "in", ["US"]), False),
        (atom(["order", "region"], "in", []), False),
        (atom(["order", "total"], "in", [1.5, 120.0]), True),
        (atom(["order", "coupon"], "in", [None]), True),
    ],
)
def test_evaluate_compares_values_for_equality_and_membership(
    expr: dict[str, Any], expected: bool
) -> None:
    assert evaluate_event_match(match(expr), PAYLOAD) is expected


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        (atom(["flag"], "eq", 1), False),
        (atom(["flag"], "eq", True), True),
        (atom(["flag"], "ne", 1), True),
        (atom(["count"], "eq", True), False),
        (atom(["zero"], "eq", False), False),
        (atom(["order", "gift"], "eq", 0), False),
        (atom(["count"], "in", [True]), False),
        (atom(["flag"], "in", [1, 1.0]), False),
        (atom(["ratio"], "eq", 1), True),
    ],
)
def test_evaluate_keeps_booleans_distinct_from_numbers(
    expr: dict[str, Any], expected: bool
) -> None:
    assert evaluate_event_match(match(expr), PAYLOAD) is expected


@pytest.mark.parametrize(
    "path",
    [
        ["nope"],
        ["order", "nope"],
        ["order", "status", "length"],
        ["order", "items", "0", "sku"],
        ["order", "items", "sku"],
        ["count", "x"],
    ],
)
def test_evaluate_treats_unreachable_paths_as_missing(path: list[str]) -> None:
    assert evaluate_event_match(match(atom(path, "eq", None)), PAYLOAD) is False
    assert evaluate_event_match(match(atom(path, "ne", None)), PAYLOAD) is True
    assert evaluate_event_match(match(atom(path, "ne", "x")), PAYLOAD) is True
    assert evaluate_event_match(match(atom(path, "in", [None, "x", 0])), PAYLOAD) is False
    for kind in ("gt", "gte", "lt", "lte"):
        assert evaluate_event_match(match(atom(path, kind, 0)), PAYLOAD) is False


def test_evaluate_distinguishes_an_explicit_null_from_a_missing_key() -> None:
    expression = match(atom(["coupon"], "eq", None))
    assert evaluate_event_match(expression, {"coupon": None}) is True
    assert evaluate_event_match(expression, {}) is False


@pytest.mark.parametrize("payload", [None, [], "text", 42, [{"order": {"status": "paid"}}]])
def test_evaluate_finds_nothing_in_non_object_payloads(payload: object) -> None:
    assert evaluate_event_match(match(TRUE_ATOM), payload) is False


@pytest.mark.parametrize(
    ("path", "kind", "value", "expected"),
    [
        (["order", "total"], "gt", 100, True),
        (["order", "total"], "gt", 120, False),
        (["order", "total"], "gte", 120, True),
        (["order", "total"], "lt", 120.5, True),
        (["order", "total"], "lte", 119.99, False),
        (["order", "price"], "gte", 9.5, True),
        (["order", "status"], "gt", "open", True),
        (["order", "status"], "lt", "open", False),
        (["order", "status"], "lte", "paid", True),
        (["order", "total"], "gt", "100", False),
        (["order", "status"], "gt", 1, False),
        (["flag"], "gt", 0, False),
        (["flag"], "gte", True, False),
        (["count"], "lt", True, False),
        (["order", "coupon"], "lte", None, False),
        (["order", "items"], "gt", 0, False),
        (["nan"], "gt", 0, False),
        (["nan"], "lt", 0, False),
        (["nan"], "gte", 0, False),
        (["nan"], "lte", 0, False),
        (["nan"], "eq", 0, False),
    ],
)
def test_evaluate_orders_only_two_numbers_or_two_strings(
    path: list[str], kind: str, value: Any, expected: bool
) -> None:
    assert evaluate_event_match(match(atom(path, kind, value)), PAYLOAD) is expected


def test_evaluate_treats_nan_as_different_from_itself() -> None:
    payload = {"x": math.nan}
    assert evaluate_event_match(match(atom(["x"], "eq", math.nan)), payload) is False
    assert evaluate_event_match(match(atom(["x"], "ne", math.nan)), payload) is True


def test_evaluate_compares_large_integers_exactly() -> None:
    big = 2**53 + 1
    assert evaluate_event_match(match(atom(["n"], "eq", float(2**53))), {"n": big}) is False
    assert evaluate_event_match(match(atom(["n"], "gt", float(2**53))), {"n": big}) is True


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ({"kind": "and", "nodes": []}, True),
        ({"kind": "or", "nodes": []}, False),
        ({"kind": "and", "nodes": [TRUE_ATOM, TRUE_ATOM]}, True),
        ({"kind": "and", "nodes": [TRUE_ATOM, FALSE_ATOM]}, False),
        ({"kind": "or", "nodes": [FALSE_ATOM, TRUE_ATOM]}, True),
        ({"kind": "or", "nodes": [FALSE_ATOM, FALSE_ATOM]}, False),
        (
            {
                "kind": "or",
                "nodes": [
                    {"kind": "and", "nodes": [TRUE_ATOM, FALSE_ATOM]},
                    {"kind": "and", "nodes": [TRUE_ATOM, {"kind": "or", "nodes": [TRUE_ATOM]}]},
                ],
            },
            True,
        ),
        (
            {
                "kind": "and",
                "nodes": [
                    {"kind": "or", "nodes": []},
                    TRUE_ATOM,
                ],
            },
            False,
        ),
    ],
)
def test_evaluate_combines_nodes_with_and_or(expr: dict[str, Any], expected: bool) -> None:
    assert evaluate_event_match(match(expr), PAYLOAD) is expected


def test_evaluate_short_circuits_before_a_malformed_sibling() -> None:
    broken = {"kind": "atom", "path": ["a"], "op": {"kind": "like", "value": 1}}
    assert evaluate_event_match(match({"kind": "or", "nodes": [TRUE_ATOM, broken]}), PAYLOAD)
    assert not evaluate_event_match(match({"kind": "and", "nodes": [FALSE_ATOM, broken]}), PAYLOAD)


@pytest.mark.parametrize("kind", ["and", "or"])
def test_evaluate_handles_the_deepest_valid_nesting(kind: str) -> None:
    expression = validate_event_match(match(nested(kind, MAX_DEPTH, TRUE_ATOM)))
    assert evaluate_event_match(expression, PAYLOAD) is True


def test_evaluate_refuses_nesting_beyond_the_limit_instead_of_recursing() -> None:
    with pytest.raises(InvalidEventMatch, match="nested deeper"):
        evaluate_event_match(match(nested("and", 100_000, TRUE_ATOM)), PAYLOAD)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ({"version": 2, "expr": TRUE_ATOM}, "EventMatch version 2 is not supported (expected 1)"),
        ({"expr": TRUE_ATOM}, "EventMatch invalid at version: missing"),
        ({"version": 1}, "EventMatch invalid at expr: missing"),
        (match({"kind": "not", "nodes": []}), 'expr: unknown expression kind "not"'),
        (
            match({"kind": "and", "nodes": [TRUE_ATOM, atom(["a"], "like", "x")]}),
            'expr.nodes[1].op: unknown op kind "like"',
        ),
        (match({"kind": "and", "nodes": "oops"}), "expr.nodes: expected a list"),
        (match({"kind": "atom", "path": "order", "op": {"kind": "eq", "value": 1}}), "expr.path"),
        (match({"kind": "atom", "path": [1], "op": {"kind": "eq", "value": 1}}), "expr.path"),
        (match({"kind": "atom", "path": ["a"], "op": {"kind": "eq"}}), 'missing key "value"'),
        (match({"kind": "atom", "path": ["a"], "op": {"kind": "in"}}), "expr.op.values"),
        (match({"kind": "atom", "path": ["a"]}), "expr.op: expected an object"),
    ],
)
def test_evaluate_raises_invalid_event_match_for_malformed_expressions(
    expression: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidEventMatch) as caught:
        evaluate_event_match(expression, PAYLOAD)
    assert message in str(caught.value)


# --- matches_safely ---------------------------------------------------------------------


@pytest.mark.parametrize("payload", [PAYLOAD, None, {}, []])
def test_matches_safely_treats_no_expression_as_match_all(payload: object) -> None:
    assert matches_safely(None, payload) is True


def test_matches_safely_returns_the_evaluation_result() -> None:
    assert matches_safely(match(TRUE_ATOM), PAYLOAD) is True
    assert matches_safely(match(FALSE_ATOM), PAYLOAD) is False


@pytest.mark.parametrize(
    "expression",
    [
        {"version": 99, "expr": TRUE_ATOM},
        match({"kind": "xor", "nodes": []}),
        match({"kind": "atom", "path": [["unhashable"]], "op": {"kind": "eq", "value": 1}}),
        match(nested("or", 100_000, TRUE_ATOM)),
        "not even a mapping",
    ],
)
def test_matches_safely_returns_false_for_malformed_expressions(expression: Any) -> None:
    assert matches_safely(expression, PAYLOAD) is False


# --- properties -------------------------------------------------------------------------


json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=5)
)
keys = st.sampled_from(["a", "b", "c", ""])
json_values = st.recursive(
    json_scalars | st.floats(),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(keys, children, max_size=3),
    max_leaves=15,
)

ops = st.one_of(
    st.builds(
        lambda kind, value: {"kind": kind, "value": value},
        st.sampled_from(["eq", "ne", "gt", "gte", "lt", "lte"]),
        json_scalars,
    ),
    st.builds(lambda values: {"kind": "in", "values": values}, st.lists(json_scalars, max_size=3)),
)
atoms = st.builds(
    lambda path, op: {"kind": "atom", "path": path, "op": op},
    st.lists(keys, min_size=1, max_size=3),
    ops,
)
exprs = st.recursive(
    atoms,
    lambda children: st.builds(
        lambda kind, nodes: {"kind": kind, "nodes": nodes},
        st.sampled_from(["and", "or"]),
        st.lists(children, max_size=3),
    ),
    max_leaves=20,
)


@given(exprs, json_values)
def test_evaluate_never_raises_on_validated_expressions(expr: Any, payload: Any) -> None:
    expression = validate_event_match(match(expr))
    assert evaluate_event_match(expression, payload) in (True, False)


@given(st.lists(keys, min_size=1, max_size=3), json_scalars, json_values)
def test_ne_is_always_the_negation_of_eq(path: list[str], value: Any, payload: Any) -> None:
    equal = evaluate_event_match(match(atom(path, "eq", value)), payload)
    differ = evaluate_event_match(match(atom(path, "ne", value)), payload)
    assert equal is not differ


@given(exprs, json_values)
def test_and_or_agree_with_pythons_all_and_any(expr: Any, payload: Any) -> None:
    children = expr.get("nodes", [expr])
    results = [evaluate_event_match(match(child), payload) for child in children]
    assert evaluate_event_match(match({"kind": "and", "nodes": children}), payload) is all(results)
    assert evaluate_event_match(match({"kind": "or", "nodes": children}), payload) is any(results)


# --- equality keys (wakeup index) --------------------------------------------------


def _atom(path: list[str], kind: str, value: object) -> dict[str, object]:
    return {"kind": "atom", "path": path, "op": {"kind": kind, "value": value}}


def test_equality_key_of_an_eq_atom_and_of_an_and_member() -> None:
    atom = {"version": 1, "expr": _atom(["orderId"], "eq", "o1")}
    both = {
        "version": 1,
        "expr": {"kind": "and", "nodes": [_atom(["n"], "gt", 1), _atom(["a", "b"], "eq", 2)]},
    }
    assert equality_key(atom) == '[["orderId"],"o1"]'
    assert equality_key(both) == '[["a","b"],2]'


def test_no_equality_key_when_no_eq_atom_is_required() -> None:
    either = {"version": 1, "expr": {"kind": "or", "nodes": [_atom(["a"], "eq", 1)]}}
    assert equality_key(either) is None
    assert equality_key({"version": 1, "expr": _atom(["a"], "ne", 1)}) is None
    assert equality_key(None) is None


def test_payload_keys_offer_every_scalar_leaf_and_equal_numbers_share_a_key() -> None:
    keys = payload_keys(
        {"orderId": "o1", "n": 2.0, "flag": True, "nested": {"x": None}, "list": [1]}
    )
    assert keys is not None
    assert set(keys) == {
        '[["orderId"],"o1"]',
        '[["n"],2]',
        '[["flag"],true]',
        '[["nested","x"],null]',
    }
    assert equality_key({"version": 1, "expr": _atom(["n"], "eq", 2)}) in keys
    assert equality_key({"version": 1, "expr": _atom(["flag"], "eq", 1)}) not in keys


def test_stored_keys_keep_their_text_non_ascii_and_escapes_included() -> None:
    # Stored with inbox rows and waiting rows (a contract across releases): the keys
    # are the compact JSON text of [path, value], unicode as is.
    keys = payload_keys({"ü": "café ✓", "q": 'a"b\\c', "big": 2**70, "f": 0.5, "t": "\n"})
    assert keys is not None
    assert set(keys) == {
        '[["ü"],"café ✓"]',
        '[["q"],"a\\"b\\\\c"]',
        f'[["big"],{2**70}]',
        '[["f"],0.5]',
        '[["t"],"\\n"]',
    }


def _reference_keys(payload: object) -> set[str]:
    """The keys as `_key` spells them (json.dumps of [path, value]): what payload_keys,
    which writes them piece by piece, must equal."""
    out: set[str] = set()

    def walk(path: list[str], value: object) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk([*path, str(k)], v)
        elif path and (value is None or isinstance(value, str | bool | int | float)):
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            out.add(json.dumps([path, value], separators=(",", ":"), ensure_ascii=False))

    walk([], payload)
    return out


_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(),
)


@given(
    payload=st.recursive(
        st.dictionaries(st.text(), _SCALARS, max_size=4),
        lambda inner: st.dictionaries(st.text(), st.one_of(_SCALARS, inner), max_size=4),
        max_leaves=20,
    )
)
def test_payload_keys_are_the_json_text_of_path_and_value(payload: dict[str, object]) -> None:
    keys = payload_keys(payload)
    assert keys is not None
    assert set(keys) == _reference_keys(payload)


def test_payload_keys_give_up_on_huge_payloads() -> None:
    assert payload_keys({f"k{i}": i for i in range(600)}, limit=512) is None


@given(
    payload=st.dictionaries(
        st.text(max_size=3),
        st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=3)),
        max_size=5,
    )
)
def test_an_eq_match_is_true_only_if_the_payload_offers_its_key(payload: dict[str, object]) -> None:
    for k, v in payload.items():
        match = {"version": 1, "expr": _atom([k], "eq", v)}
        offered = payload_keys(payload) or []
        assert evaluate_event_match(match, payload) == (equality_key(match) in offered)
