"""While a deploy replaces release 0.1 with this one, both run at once for a minute.

Release 0.1 resumed a run from its last suspension's `results` (every result so far),
read as ``dict(suspension.get("results") or {})``, and `awaitedRefs` the same way. This
release stores only what a pass added (`resultsDelta`), so a 0.1 ResumeRun that read a
suspension written here would see no results and could take the wrong branch. Instead,
`results` holds a string: 0.1's ``dict(...)`` raises, the resume rolls back and its SQS
message returns to the queue until the new code takes it. These tests pin that shape
and that this release reads it back as "no full results".
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from workflow_runner import stream
from workflow_runner.stream.names import RESULTS_MOVED

NOW = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


def _read_as_release_0_1(suspension: dict[str, Any]) -> dict[str, Any]:
    """How release 0.1 restored results (operations._restore_results)."""
    return dict(suspension.get("results") or {})


def _waiting(**results: Any) -> stream.StepWaiting:
    return stream.StepWaiting(
        workflow_name="w",
        trigger_event_type="t",
        step_index=1,
        path=[{"i": 1}],
        definition_fingerprint="f",
        wake_at=NOW,
        **results,
    )


def test_a_suspension_with_results_delta_fails_a_release_0_1_reader() -> None:
    payload = _waiting(results_delta={"total": 42}, awaited_refs_delta={}).to_payload()
    assert payload["results"] == RESULTS_MOVED
    with pytest.raises(ValueError):
        _read_as_release_0_1(payload)


def test_this_release_reads_the_marker_as_no_full_results() -> None:
    payload = _waiting(results_delta={"total": 42}, awaited_refs_delta={}).to_payload()
    fact = stream.decode(stream.STEP_WAITING, payload)
    assert isinstance(fact, stream.StepWaiting)
    assert fact.results is None and fact.results_delta == {"total": 42}
    assert not fact.full_results
    assert fact.to_payload() == payload


def test_a_release_0_1_suspension_still_carries_full_results() -> None:
    payload = _waiting(results={"total": 42}, awaited_refs={}).to_payload()
    assert _read_as_release_0_1(payload) == {"total": 42}
    fact = stream.decode(stream.STEP_WAITING, payload)
    assert isinstance(fact, stream.StepWaiting) and fact.full_results
