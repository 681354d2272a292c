"""The benchmarks' in-process pipeline takes intake batches of the size the template's
IntakeBatchSize would give its functions."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from workflow_runner import DomainEvent, ManualClock
from workflow_runner.store import Store

from bench.common import TENANT, bench_registry
from bench.harness import Pipeline, wait_until


class _Recording(Pipeline):
    sizes: list[int]

    def _ingest(self, store: Store, events: Sequence[DomainEvent]) -> None:
        self.sizes.append(len(events))
        super()._ingest(store, events)


def _ingested_batches(db_url: str, intake_batch: int | None) -> list[int]:
    options = {} if intake_batch is None else {"intake_batch": intake_batch}
    clock = ManualClock(datetime(2026, 1, 5, 9, 0, tzinfo=UTC))  # every run stays asleep
    pipeline = _Recording(
        db_url, bench_registry(), workers=2, run_scanner=False, clock=clock, **options
    )
    pipeline.sizes = []
    # Queued before the workers start, so each job finds every event still waiting.
    for i in range(60):
        pipeline.ingest(
            DomainEvent(
                id=f"h-{i}", type="bench.sleep", payload={"id": f"h{i}", "n": i}, tenant_id=TENANT
            )
        )
    with pipeline:
        assert wait_until(lambda: pipeline.stats.ingested == 60, 60)
    assert not pipeline.stats.errors
    return sorted(pipeline.sizes, reverse=True)


def test_intake_jobs_take_up_to_the_intake_batch_size(db_url: str, store: Store) -> None:
    assert _ingested_batches(db_url, 25) == [25, 25, 10]


def test_the_default_intake_batch_is_sqs_ten(db_url: str, store: Store) -> None:
    assert _ingested_batches(db_url, None) == [10] * 6
