from matching import paid_and_large, vip_or_dach
from workflow_runner.match import eq, evaluate_event_match


def test_a_builder_returns_the_stored_event_match():
    assert paid_and_large == {
        "version": 1,
        "expr": {
            "kind": "and",
            "nodes": [
                {
                    "kind": "atom",
                    "path": ["order", "status"],
                    "op": {"kind": "eq", "value": "paid"},
                },
                {
                    "kind": "atom",
                    "path": ["order", "total"],
                    "op": {"kind": "gte", "value": 100},
                },
            ],
        },
    }


def test_a_missing_field_is_not_null_and_true_is_not_one():
    assert evaluate_event_match(vip_or_dach, {"country": "AT"})
    assert not evaluate_event_match(vip_or_dach, {"country": "FR", "vip": None})
    assert evaluate_event_match(vip_or_dach, {"country": "FR"})  # no vip field: not null
    assert not evaluate_event_match(eq("count", 1), {"count": True})
