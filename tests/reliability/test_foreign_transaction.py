"""A foreign long transaction (issue 11, item 2): another application's database on the
same server keeps a transaction open, after writing, for the whole phase (ten minutes in
`make soak`), while the sample scenario plays again and again: ten days of timers,
awaited events, retries, mail and webhooks each time. The histories equal those of a run
without it, no invariant breaks, and every run of the pending projection leaves nothing
behind it to apply, so an event waits for the projection at most one cycle (the
longest cycle is recorded). With the old horizon (the cluster's
oldest transaction) nothing was ever applied."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from workflow_runner.definition import WorkflowRegistry
from workflow_runner.embedded import database_url
from workflow_runner.engine.projection import PENDING_PROJECTION

from tests.reliability.harness import Driver, check_invariants, histories, record
from tests.reliability.scenario import play


@pytest.fixture
def foreign(pg_server_url: str) -> Iterator[psycopg.Connection[Any]]:
    name = f"foreign_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_server_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    conn = psycopg.connect(database_url(pg_server_url, name), application_name="reporting")
    conn.execute("CREATE TABLE report (n int)")
    conn.execute("INSERT INTO report VALUES (1)")  # holds a transaction id from now on
    try:
        yield conn
    finally:
        conn.close()
        with psycopg.connect(pg_server_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


class _LagWatch(Driver):
    """A driver that checks the projection's lag after every PendingProjection run, and
    times cycles. (The lag is read right after the projection, not at the end of a
    cycle: the worker that ends a cycle appends task outcomes and child-run facts that
    the next cycle's projection applies.)"""

    most = 0
    longest = 0.0

    def tick(self, *args: Any, **kwargs: Any) -> None:
        started = time.monotonic()
        super().tick(*args, **kwargs)
        _LagWatch.longest = max(_LagWatch.longest, time.monotonic() - started)

    def _scheduled(self, name: str) -> None:
        super()._scheduled(name)
        if name == "pending_projection":
            lag = self.monitor.checkpoints.lag(PENDING_PROJECTION, self.clock.now())
            _LagWatch.most = max(_LagWatch.most, lag.behind)


def _phase(
    fresh_db: Callable[[], str],
    samples: WorkflowRegistry,
    foreign: psycopg.Connection[Any],
    seconds: float,
) -> None:
    """Play the scenario until `seconds` have passed since the foreign transaction
    opened (at least once)."""
    baseline = play(fresh_db(), samples)
    try:
        expected = histories(baseline.monitor)
    finally:
        baseline.close()
    opened = time.monotonic()
    _LagWatch.most, _LagWatch.longest = 0, 0.0
    runs = plays = 0
    while plays == 0 or time.monotonic() - opened < seconds:
        plays += 1
        driver = play(fresh_db(), samples, driver_type=_LagWatch)
        try:
            assert check_invariants(driver.monitor, samples) == []
            assert histories(driver.monitor) == expected
            runs += sum(1 for k in expected if expected[k][0][0] == "workflow.run-started")
        finally:
            driver.close()
    assert foreign.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
    assert _LagWatch.most == 0  # every projection run left nothing behind
    record(
        foreign_tx_seconds=round(time.monotonic() - opened, 1),
        foreign_tx_plays=plays,
        foreign_tx_max_lag_events=_LagWatch.most,
        foreign_tx_longest_cycle_seconds=round(_LagWatch.longest, 2),
        runs_driven=runs,
    )


def test_the_scenario_plays_out_while_another_database_keeps_a_transaction_open(
    fresh_db: Callable[[], str], samples: WorkflowRegistry, foreign: psycopg.Connection[Any]
) -> None:
    _phase(fresh_db, samples, foreign, seconds=0)


@pytest.mark.soak
def test_foreign_transaction_soak(
    fresh_db: Callable[[], str], samples: WorkflowRegistry, foreign: psycopg.Connection[Any]
) -> None:
    _phase(fresh_db, samples, foreign, seconds=float(os.environ.get("WFR_FOREIGN_TX_SECONDS", 600)))
