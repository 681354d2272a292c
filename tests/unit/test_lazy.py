"""lazy: computed on first read, kept on the instance, and never a lock between threads."""

from __future__ import annotations

import threading
from dataclasses import FrozenInstanceError, dataclass
from datetime import UTC, datetime

import pytest
from workflow_runner.lazy import lazy
from workflow_runner.store.streams import StoredEvent
from workflow_runner.stream import RUN_STREAM


@dataclass(frozen=True)
class _Box:
    value: int
    calls: list[int]

    @lazy
    def doubled(self) -> int:
        """Twice the value."""
        self.calls.append(self.value)
        return self.value * 2


def test_computed_once_per_instance_and_kept_in_its_dict() -> None:
    calls: list[int] = []
    a, b = _Box(2, calls), _Box(5, calls)
    assert (a.doubled, a.doubled, b.doubled, a.doubled) == (4, 4, 10, 4)
    assert calls == [2, 5]
    assert a.__dict__["doubled"] == 4
    assert isinstance(_Box.__dict__["doubled"], lazy) and _Box.doubled.__doc__ == "Twice the value."
    with pytest.raises(FrozenInstanceError):
        a.value = 3  # type: ignore[misc]


def test_two_threads_compute_at_once() -> None:
    """functools.cached_property on Python 3.11 computes under one lock shared by every
    instance: the second thread would wait at it until the first returned, and this
    barrier, which needs both inside the computation at once, would time out."""
    inside = threading.Barrier(2, timeout=5)

    @dataclass(frozen=True)
    class Meeting:
        name: str

        @lazy
        def met(self) -> str:
            inside.wait()
            return self.name

    found: dict[str, str] = {}
    errors: list[BaseException] = []

    def read(meeting: Meeting) -> None:
        try:
            found[meeting.name] = meeting.met
        except BaseException as error:  # a broken barrier, reported below
            errors.append(error)

    threads = [threading.Thread(target=read, args=(Meeting(n),)) for n in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert not errors and found == {"a": "a", "b": "b"}


def test_a_stored_events_fact_is_decoded_once() -> None:
    row = {
        "position": 1,
        "tenant_id": "t",
        "stream_id": "s",
        "stream_type": RUN_STREAM,
        "version": 1,
        "type": "workflow.run-started",
        "payload": {"workflowName": "w", "triggerEventType": "x", "definitionFingerprint": "f"},
        "metadata": {},
        "recorded_at": datetime(2026, 1, 1, tzinfo=UTC),
    }
    event = StoredEvent.from_row(row)
    assert event.fact is event.fact
