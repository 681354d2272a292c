"""The pending projection's lag (ProjectionLagSeconds / ProjectionLagEvents) is read
after every catch-up, so reading it must stay cheap while the projection keeps up:
the count stops early until the oldest unapplied event is a few seconds old."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from workflow_runner.engine.projection import PENDING_PROJECTION
from workflow_runner.store import NewEvent, Store

from tests.support import TENANT_A

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def _unapplied(store: Store, n: int, at: datetime) -> None:
    with store.transaction():
        store.checkpoints.lock(PENDING_PROJECTION, at)  # the checkpoint before every event
    for i in range(n):
        stream = str(uuid.uuid4())
        assert store.streams.append(
            TENANT_A, stream, "workflow-run", 0, [NewEvent("x", {"i": i})], at
        )
    # Another stream type's events are not the pending projection's business.
    store.streams.append(TENANT_A, str(uuid.uuid4()), "step-dispatch", 0, [NewEvent("d", {})], at)


def test_lag_counts_only_a_few_while_the_oldest_event_is_fresh(store: Store) -> None:
    _unapplied(store, 5, NOW)
    lag = store.checkpoints.lag(PENDING_PROJECTION, NOW + timedelta(seconds=1), quick_cap=3)
    assert (lag.behind, lag.oldest) == (3, NOW)


def test_lag_counts_up_to_the_cap_once_the_oldest_event_is_old(store: Store) -> None:
    _unapplied(store, 5, NOW)
    later = NOW + timedelta(seconds=6)
    assert store.checkpoints.lag(PENDING_PROJECTION, later, quick_cap=3).behind == 5
    assert store.checkpoints.lag(PENDING_PROJECTION, later, cap=4, quick_cap=3).behind == 4


def test_no_lag_without_unapplied_run_events(store: Store) -> None:
    _unapplied(store, 0, NOW)
    lag = store.checkpoints.lag(PENDING_PROJECTION, NOW + timedelta(hours=1))
    assert (lag.behind, lag.oldest) == (0, None)
