"""fast_init: the quicker __init__ builds what the dataclass's own would, and stays frozen."""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import InitVar, dataclass, field
from datetime import UTC, datetime
from typing import Any, ClassVar

import pytest
from workflow_runner.fast_init import fast_init
from workflow_runner.store.streams import StoredEvent
from workflow_runner.stream.run import RunStarted
from workflow_runner.stream.suspensions import StepWaiting


def _shape(fast: bool) -> type[Any]:
    """The same class twice: with the dataclass's __init__ and with fast_init's."""

    @dataclass(frozen=True)
    class Shape:
        seen: ClassVar[list[str]] = []

        name: str
        width: int = 1
        tags: list[str] = field(default_factory=list)
        note: str | None = None
        created: int = field(default=7, init=False)
        history: list[int] = field(default_factory=lambda: [0], init=False)
        unit: str = field(default="mm", kw_only=True)
        extra: dict[str, int] = field(default_factory=dict, kw_only=True)

        def __post_init__(self) -> None:
            if self.width < 0:
                raise ValueError("negative width")
            Shape.seen.append(self.name)

    return fast_init(Shape) if fast else Shape


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [
        (("a",), {}),
        (("b", 3), {}),
        (("c", 3, ["x"], "n"), {"unit": "cm", "extra": {"k": 1}}),
        ((), {"name": "d", "note": "m", "width": 0}),
    ],
)
def test_builds_what_the_dataclass_init_builds(
    args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    plain, fast = _shape(False), _shape(True)
    expected, got = plain(*args, **kwargs), fast(*args, **kwargs)
    assert dataclasses.asdict(got) == dataclasses.asdict(expected)
    assert vars(got) == vars(expected)
    assert fast.seen == [got.name]  # __post_init__ ran once


def test_same_parameters_defaults_and_errors() -> None:
    plain, fast = _shape(False), _shape(True)
    assert list(inspect.signature(fast).parameters) == list(inspect.signature(plain).parameters)
    assert fast.__init__.__qualname__ == "_shape.<locals>.Shape.__init__"
    for cls in (plain, fast):
        with pytest.raises(TypeError):
            cls()  # name is required
        with pytest.raises(TypeError):
            cls("a", 1, [], None, "cm")  # unit is keyword-only
        with pytest.raises(TypeError):
            cls("a", created=3)  # not an init parameter
        with pytest.raises(ValueError, match="negative width"):
            cls("a", -1)


def test_factories_run_per_instance_and_instances_stay_frozen() -> None:
    fast = _shape(True)
    first, second = fast("a"), fast("b")
    assert first.tags is not second.tags and first.history is not second.history
    assert first.history == [0] and first.created == 7
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.width = 2
    assert fast("a") == fast("a") != fast("a", 2)


def test_refuses_what_it_cannot_build_the_same() -> None:
    @dataclass
    class Mutable:
        x: int

    @dataclass(frozen=True, slots=True)
    class Slotted:
        x: int

    @dataclass(frozen=True)
    class WithInitVar:
        x: int
        scale: InitVar[int] = 1

    for cls in (Mutable, Slotted, WithInitVar, int):
        with pytest.raises(TypeError, match="fast_init"):
            fast_init(cls)


def test_engine_records_keep_their_parameters() -> None:
    """Classes the engine decorates: keyword-only facts, defaults, inherited fields."""
    started = RunStarted(
        workflow_name="w",
        workflow_version=2,
        trigger_event_type="t",
        trigger_event_id="e",
        definition_fingerprint="f",
    )
    assert started.idempotency_key is None and started.parent_run_id is None
    assert RunStarted.from_payload(started.to_payload()) == started
    with pytest.raises(TypeError):
        RunStarted("w", 2, "t", "e", "f")  # type: ignore[misc]
    names = list(inspect.signature(StepWaiting).parameters)
    assert {"step_index", "wake_at"} <= set(names)
    now = datetime.now(UTC)
    event = StoredEvent(1, "t", "s", "workflow-run", 1, "x", {}, {}, now)
    assert event.xid == "" and event.recorded_at is now
