"""Cron catch-up after an outage: `on_cron(..., catchup="all" | "latest" | "none")`
(issue 11, item 7). The default keeps today's behaviour: every missed instant starts,
at most 100 per workflow, tenant and scan."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from workflow_runner import define_workflow, on_cron
from workflow_runner.aws.inprocess import InMemoryResumeQueue
from workflow_runner.clock import ManualClock
from workflow_runner.definition import WorkflowRegistry
from workflow_runner.engine.due_scan import due_scan
from workflow_runner.errors import WorkflowDefinitionError
from workflow_runner.store import Store

from tests.support import TENANT_A, TENANT_B

START = datetime(2026, 1, 5, 9, 0, 20, tzinfo=UTC)
BACK = START + timedelta(hours=5)  # a five-hour outage of the due scan


def _cron(name: str, schedule: str, **catchup: Any) -> Any:
    return define_workflow(
        name=name,
        trigger=on_cron(schedule, **catchup),
        steps=lambda s: [s.return_(lambda ctx: ctx.event.payload["scheduledAt"])],
        register=False,
    )


def _started(store: Store, tenant: str, name: str) -> list[str]:
    return sorted(
        e.payload["cronScheduledAt"]
        for r in store.runs.for_tenant(tenant, name, limit=10_000)
        for e in store.streams.load(tenant, r.run_id)[:1]
    )


def _scan(store: Store, registry: WorkflowRegistry, at: datetime) -> int:
    clock = ManualClock(at)
    return len(due_scan(store, InMemoryResumeQueue(clock), at, registry=registry).cron_started)


@pytest.fixture
def outage(store: Store, registry: WorkflowRegistry) -> WorkflowRegistry:
    for policy in ("all", "latest", "none"):
        registry.register(_cron(f"minutely-{policy}", "* * * * *", catchup=policy))
        registry.register(_cron(f"hourly-{policy}", "30 * * * *", catchup=policy))
    registry.register(_cron("minutely-default", "* * * * *"))
    for tenant in (TENANT_A, TENANT_B):
        store.inbox.register_tenant(tenant, START)
    assert _scan(store, registry, START) == 0  # first sight: counting starts now
    return registry


def test_all_starts_every_missed_instant_a_hundred_per_scan(
    store: Store, outage: WorkflowRegistry
) -> None:
    _scan(store, outage, BACK)
    assert len(_started(store, TENANT_A, "minutely-all")) == 100
    for minute in (1, 2, 3):
        _scan(store, outage, BACK + timedelta(minutes=minute))
    minutes = _started(store, TENANT_A, "minutely-all")
    assert len(minutes) == 303  # 300 missed, then one a minute as the scans go on
    assert len(set(minutes)) == len(minutes)
    assert _started(store, TENANT_A, "minutely-default") == minutes  # the default is "all"
    assert len(_started(store, TENANT_B, "hourly-all")) == 5


def test_latest_starts_only_the_most_recent_missed_instant(
    store: Store, outage: WorkflowRegistry
) -> None:
    _scan(store, outage, BACK)
    assert _started(store, TENANT_A, "minutely-latest") == ["2026-01-05T14:00:00.000000Z"]
    assert _started(store, TENANT_A, "hourly-latest") == ["2026-01-05T13:30:00.000000Z"]
    # The position moved to the instant started: the next scans go on from there.
    _scan(store, outage, BACK + timedelta(minutes=1))
    assert _started(store, TENANT_A, "minutely-latest")[-1] == "2026-01-05T14:01:00.000000Z"
    assert len(_started(store, TENANT_A, "minutely-latest")) == 2


def test_none_skips_missed_instants_and_keeps_the_ones_on_time(
    store: Store, outage: WorkflowRegistry
) -> None:
    _scan(store, outage, BACK)
    # Only the instants at most five minutes old when the scan came back.
    assert _started(store, TENANT_A, "minutely-none") == [
        f"2026-01-05T13:{m}:00.000000Z" for m in (56, 57, 58, 59)
    ] + ["2026-01-05T14:00:00.000000Z"]
    assert _started(store, TENANT_B, "hourly-none") == []
    _scan(store, outage, BACK + timedelta(minutes=32))  # the next instant comes on time
    assert _started(store, TENANT_B, "hourly-none") == ["2026-01-05T14:30:00.000000Z"]


def test_without_an_outage_every_policy_starts_each_instant_once(
    store: Store, registry: WorkflowRegistry
) -> None:
    for policy in ("all", "latest", "none"):
        registry.register(_cron(f"hourly-{policy}", "30 * * * *", catchup=policy))
    store.inbox.register_tenant(TENANT_A, START)
    _scan(store, registry, START)
    at = START
    for _ in range(6 * 60):  # six hours of scans, one a minute
        at += timedelta(minutes=1)
        _scan(store, registry, at)
    expected = [f"2026-01-05T{h:02d}:30:00.000000Z" for h in range(9, 15)]
    for policy in ("all", "latest", "none"):
        assert _started(store, TENANT_A, f"hourly-{policy}") == expected


def test_the_catchup_policy_is_not_part_of_the_fingerprint() -> None:
    default = _cron("report", "0 9 * * *")
    for policy in ("all", "latest", "none"):
        assert _cron("report", "0 9 * * *", catchup=policy).fingerprint == default.fingerprint


def test_an_unknown_policy_is_refused_when_the_workflow_is_defined() -> None:
    with pytest.raises(WorkflowDefinitionError, match="catchup") as refused:
        _cron("report", "0 9 * * *", catchup="some")
    assert str(refused.value).startswith("report › trigger (on_cron) › catchup: ")
