"""Retention values: parsing at the lowest level, the definition error that names the
workflow and argument, and the deployment default from the environment."""

from __future__ import annotations

from datetime import timedelta

import pytest
from workflow_runner import define_workflow, on_event
from workflow_runner.definition import WorkflowRegistry
from workflow_runner.errors import InvalidInput, WorkflowDefinitionError
from workflow_runner.retention import (
    DEFAULT_RETENTION,
    default_retention_from_env,
    describe_retention,
    parse_retention,
)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("P30D", timedelta(days=30)),
        ("PT1H", timedelta(hours=1)),
        ("P1Y", timedelta(days=365)),
        ("30d", timedelta(days=30)),  # the short spelling, as everywhere (durations.py)
        (timedelta(hours=6), timedelta(hours=6)),
        ("forever", None),
    ],
)
def test_retentions_parse(value: object, expected: timedelta | None) -> None:
    assert parse_retention(value) == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("PT59M", "shorter than the minimum retention PT1H"),
        (timedelta(0), "shorter than the minimum"),
        ("30 days", "is not a retention"),
        ("30 d", "is not a retention"),
        ("30m", "shorter than the minimum"),
        ("Forever", "is not a retention"),
        (30, "is not a retention"),
    ],
)
def test_bad_retentions_say_what_is_wrong(value: object, message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        parse_retention(value)


def test_describe_reads_back() -> None:
    assert describe_retention(timedelta(days=30)) == "P30D"
    assert describe_retention(None) == "forever"
    assert parse_retention(describe_retention(timedelta(hours=36))) == timedelta(hours=36)


def test_the_default_comes_from_run_retention() -> None:
    assert default_retention_from_env({}) == DEFAULT_RETENTION == timedelta(days=30)
    assert default_retention_from_env({"RUN_RETENTION": "P7D"}) == timedelta(days=7)
    assert default_retention_from_env({"RUN_RETENTION": "forever"}) is None
    with pytest.raises(InvalidInput, match="RUN_RETENTION: 'PT5M' is shorter"):
        default_retention_from_env({"RUN_RETENTION": "PT5M"})


def test_a_bad_retention_is_a_definition_error_with_its_place_among_the_others() -> None:
    with pytest.raises(WorkflowDefinitionError) as raised:
        define_workflow(
            name="tidy",
            trigger=on_event("a"),
            retention="PT10M",
            register=False,
            steps=lambda s: [s.wait(for_="3 days")],
        )
    text = str(raised.value)
    assert "tidy › define_workflow › retention: 'PT10M' is shorter than" in text
    assert "tidy › step 0 (wait) › for_" in text  # reported together, at import


def test_the_registry_maps_workflows_to_their_own_retention() -> None:
    registry = WorkflowRegistry()
    for name, retention in (("a", "P90D"), ("b", None), ("c", "forever")):
        registry.register(
            define_workflow(
                name=name,
                trigger=on_event(name),
                retention=retention,
                register=False,
                steps=lambda s: [s.return_(None)],
            )
        )
    assert registry.retentions() == {"a": timedelta(days=90), "c": None}


def test_retention_is_not_part_of_the_fingerprint() -> None:
    def steps(s: object) -> list[object]:
        return [s.return_(None)]  # type: ignore[attr-defined]

    one = define_workflow(name="f", trigger=on_event("f"), register=False, steps=steps)
    other = define_workflow(
        name="f", trigger=on_event("f"), register=False, retention="P1D", steps=steps
    )
    assert one.fingerprint == other.fingerprint
