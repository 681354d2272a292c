"""heap.settle: one collection, then everything alive leaves the collector's walks.

Each test runs in a child interpreter: freezing is process-wide and would change the
collector's behaviour for the rest of the test session."""

from __future__ import annotations

from tests.support import child_json


def test_settle_collects_garbage_then_freezes_what_is_alive() -> None:
    seen = child_json(
        """
        import gc, json, weakref
        from workflow_runner import heap

        class Node:
            pass

        kept = [Node() for _ in range(5000)]
        cycle = Node()
        cycle.me = cycle  # garbage only a collection frees
        alive = weakref.ref(cycle)
        del cycle
        walked_before = len(gc.get_objects())
        frozen = heap.settle()
        print(json.dumps({
            "walked_before": walked_before,
            "frozen": frozen,
            "walked_after": len(gc.get_objects()),
            "cycle_freed": alive() is None,
            "kept_frozen": gc.get_freeze_count() >= len(kept),
        }))
        """
    )
    assert seen["cycle_freed"]  # collected first, not frozen for good
    assert seen["kept_frozen"]
    assert seen["frozen"] >= 5000
    # What later collections walk: only objects created after the settle.
    assert seen["walked_after"] < seen["walked_before"] // 10


def test_settle_again_freezes_only_what_came_since() -> None:
    seen = child_json(
        """
        import json
        from workflow_runner import heap

        first = heap.settle()
        more = [[i] for i in range(3000)]
        second = heap.settle()
        print(json.dumps({"first": first, "second": second}))
        """
    )
    assert 3000 <= seen["second"] - seen["first"] < 3500
