"""The benchmarks' in-process pipeline takes intake and resume batches of the sizes the
template's IntakeBatchSize and ResumeBatchSize would give its functions, one job per
batch (as SQS invokes a function once per batch, not once per message)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from workflow_runner import DomainEvent, ManualClock
from workflow_runner.engine.due_scan import TENANT_SHARE_UNMEASURED
from workflow_runner.ports import ResumeRequest
from workflow_runner.store import Store

from bench.common import TENANT, bench_registry, sleep_event
from bench.harness import DEPLOYED_DUE_SOON_HORIZON, Batches, Pipeline, wait_until


class _Recording(Pipeline):
    sizes: list[int]
    jobs_queued = 0

    def _ingest(self, store: Store, events: Sequence[DomainEvent]) -> None:
        self.sizes.append(len(events))
        super()._ingest(store, events)


def _ingest_sleepers(pipeline: Pipeline, n: int, prefix: str) -> None:
    """Hand the pipeline `n` trigger events of the bench's sleep workflow, ids
    `{prefix}-0`, `{prefix}-1`, …"""
    for i in range(n):
        pipeline.ingest(sleep_event(f"{prefix}-{i}", f"{prefix}{i}", i))


def _ingested_batches(db_url: str, intake_batch: int | None) -> list[int]:
    options = {} if intake_batch is None else {"batches": Batches(intake=intake_batch)}
    clock = ManualClock(datetime(2026, 1, 5, 9, 0, tzinfo=UTC))  # every run stays asleep
    pipeline = _Recording(
        db_url, bench_registry(), workers=2, run_scanner=False, clock=clock, **options
    )
    pipeline.sizes = []
    # Queued before the workers start, so each job finds every event still waiting.
    _ingest_sleepers(pipeline, 60, "h")
    pipeline.jobs_queued = pipeline._jobs.qsize()
    with pipeline:
        assert wait_until(lambda: pipeline.stats.ingested == 60, 60)
    assert not pipeline.stats.errors
    # One job per batch: none queued that would find nothing left.
    assert pipeline.jobs_queued == len(pipeline.sizes)
    return sorted(pipeline.sizes, reverse=True)


def test_intake_jobs_take_up_to_the_intake_batch_size(db_url: str, store: Store) -> None:
    assert _ingested_batches(db_url, 25) == [25, 25, 10]


def test_the_default_intake_batch_is_sqs_ten(db_url: str, store: Store) -> None:
    assert _ingested_batches(db_url, None) == [10] * 6


class _RecordingResumes(Pipeline):
    resumed: list[int]

    def _resume(self, store: Store, batch: Sequence[ResumeRequest]) -> None:
        self.resumed.append(len(batch))


def _resume_batches(db_url: str, batches: Batches | None) -> list[int]:
    options = {} if batches is None else {"batches": batches}
    pipeline = _RecordingResumes(db_url, bench_registry(), workers=2, run_scanner=False, **options)
    pipeline.resumed = []
    for i in range(60):  # ready before the workers start: each job finds all waiting
        pipeline._deliver(ResumeRequest(TENANT, f"00000000-0000-4000-8000-{i:012d}", 0))
    with pipeline:
        assert wait_until(lambda: sum(pipeline.resumed) == 60, 60)
    return sorted(pipeline.resumed, reverse=True)


def test_resume_jobs_take_up_to_the_resume_batch_size(db_url: str, store: Store) -> None:
    assert _resume_batches(db_url, Batches(resume=50)) == [50, 10]
    assert _resume_batches(db_url, Batches(intake=50)) == [10] * 6  # intake's is its own
    assert _resume_batches(db_url, None) == [10] * 6


def test_events_arriving_while_workers_take_batches_all_get_a_job(
    db_url: str, store: Store
) -> None:
    clock = ManualClock(datetime(2026, 1, 5, 9, 0, tzinfo=UTC))
    pipeline = _Recording(db_url, bench_registry(), workers=3, run_scanner=False, clock=clock)
    pipeline.sizes = []
    with pipeline:
        _ingest_sleepers(pipeline, 137, "c")
        assert wait_until(lambda: pipeline.stats.ingested == 137, 60)
        assert wait_until(pipeline.idle, 10)
    assert not pipeline.stats.errors
    assert sum(pipeline.sizes) == 137 and max(pipeline.sizes) <= 10
    assert pipeline._triggers.jobs == 0 and not pipeline._triggers.items


def test_one_scan_tops_a_held_tenant_up_as_its_resumes_make_room(db_url: str, store: Store) -> None:
    """The scanner waits for room as the template deploys DueScan: one call hands out
    all 600 due rows of one tenant while the workers resume them, where a call without
    waiting stopped at the unmeasured share (200), and the pipeline at 200 rows a scan
    interval."""
    asleep_at = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
    with Pipeline(
        db_url, bench_registry(), workers=2, run_scanner=False, clock=ManualClock(asleep_at)
    ) as intake:
        _ingest_sleepers(intake, 600, "s")
        assert wait_until(lambda: intake.stats.ingested == 600, 60)
        later = datetime(2026, 1, 5, 10, tzinfo=UTC)
        assert wait_until(lambda: len(store.pending.due(TENANT, later, 1000)) == 600, 60)
    due_at = ManualClock(datetime(2026, 1, 5, 9, 1, tzinfo=UTC))
    with Pipeline(db_url, bench_registry(), workers=2, run_scanner=False, clock=due_at) as p:
        p._scan(store)  # one call, as the scanner thread makes every scan_interval
        sent = p.stats.sent
        assert wait_until(lambda: p.stats.outcomes.get("completed", 0) == 600, 60)
    assert not p.stats.errors
    assert sent == 600 > TENANT_SHARE_UNMEASURED


def test_the_projector_sends_waits_due_within_its_horizon_without_a_scan(
    db_url: str, store: Store
) -> None:
    """As PendingProjection deployed: with a horizon, the projection itself sends the
    new 1 s waits, delayed to their second, and the workers resume them when due; no
    due scan runs. Without one, nothing sends them."""
    with Pipeline(db_url, bench_registry(), workers=2, run_scanner=False) as without:
        _ingest_sleepers(without, 20, "n")
        assert wait_until(lambda: without.stats.ingested == 20, 60)
        assert not wait_until(lambda: without.stats.resumes > 0, 2.5)
    assert not without.stats.errors
    with Pipeline(
        db_url,
        bench_registry(),
        workers=2,
        run_scanner=False,
        due_soon_horizon=DEPLOYED_DUE_SOON_HORIZON,
    ) as deployed:
        _ingest_sleepers(deployed, 20, "d")
        assert wait_until(lambda: deployed.stats.outcomes.get("completed", 0) == 20, 60)
    assert not deployed.stats.errors
    assert deployed.stats.scans == 0
    assert deployed.stats.outcomes.get("not-due", 0) == 0  # held until due, not requeued


def test_the_event_wait_hands_its_events_over_at_a_peers_pace(db_url: str) -> None:
    """Workload 14 with `pace_per_s` (as a peer whose every send is a commit of its
    own): event i goes i / pace after the first, so the sends span (n - 1) / pace, and
    every run still resumes."""
    from bench import event_wait

    paced = event_wait.run_ours(db_url, 11, 2, pace_per_s=50.0)

    assert paced["n"] == 11 and paced["pace_per_s"] == 50.0
    assert 200.0 <= paced["send_span_ms"] < 400.0  # 10 gaps of 20 ms


def test_the_event_wait_hands_its_events_over_at_once_by_default(db_url: str) -> None:
    from bench import event_wait

    at_once = event_wait.run_ours(db_url, 11, 2)

    assert at_once["n"] == 11 and "pace_per_s" not in at_once
    assert at_once["send_span_ms"] < 100.0
