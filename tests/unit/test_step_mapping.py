"""The step mapping of `wfr runs migrate --map FROM=TO`: places as users type them, and
where a run at a path goes."""

from __future__ import annotations

import pytest
from workflow_runner.engine.step_mapping import Place, StepMapping, parse_mapping, parse_place
from workflow_runner.errors import InvalidInput


def test_places_are_indexes_with_a_branchs_arm_after_its_index() -> None:
    assert parse_place("2") == Place(((2, None),))
    assert parse_place("3.0") == Place(((3, None), (0, None)))
    assert parse_place(" 4.true.1 ") == Place(((4, "true"), (1, None)))
    assert str(parse_place("4.false.1.0")) == "4.false.1.0"


@pytest.mark.parametrize("text", ["", "a", "true", "2.true.false", "2..3", "-1", "2.item"])
def test_anything_else_is_not_a_place(text: str) -> None:
    with pytest.raises(InvalidInput, match="is not a step place"):
        parse_place(text)


def test_a_run_at_or_inside_from_goes_to_to_with_its_item_and_attempt() -> None:
    mapping = parse_mapping(["2=3"])
    assert mapping.target([{"i": 2}]) == [{"i": 3}]
    assert mapping.target([{"i": 2, "item": 5}, {"i": 1}]) == [{"i": 3, "item": 5}, {"i": 1}]
    assert mapping.target([{"i": 2, "attempt": 2}]) == [{"i": 3, "attempt": 2}]
    assert mapping.target([{"i": 1}]) == [{"i": 1}]  # not mapped: its own path
    assert mapping.entries() == ["2=3"]


def test_arms_are_matched_when_named_and_set_as_to_says() -> None:
    mapping = parse_mapping(["4.true.1=5.false.1", "4=6"])
    assert mapping.target([{"i": 4, "arm": "true"}, {"i": 1}]) == [
        {"i": 5, "arm": "false"},
        {"i": 1},
    ]
    # The other arm is not 4.true: the shorter mapping applies and keeps its arm.
    assert mapping.target([{"i": 4, "arm": "false"}, {"i": 1}]) == [
        {"i": 6, "arm": "false"},
        {"i": 1},
    ]


def test_the_longest_matching_from_applies() -> None:
    mapping = parse_mapping(["2=3", "2.0=3.4"])
    assert mapping.target([{"i": 2, "attempt": 1}, {"i": 0}]) == [
        {"i": 3, "attempt": 1},
        {"i": 4},
    ]
    assert mapping.target([{"i": 2, "attempt": 1}, {"i": 1}]) == [
        {"i": 3, "attempt": 1},
        {"i": 1},
    ]


def test_an_empty_mapping_keeps_every_path() -> None:
    assert StepMapping().target([{"i": 0}]) == [{"i": 0}]


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        (["2"], "expected FROM=TO"),
        (["2=3.0"], "at different depths"),
        (["2=3", "2=4"], "is mapped twice"),
        (["x=3"], "is not a step place"),
    ],
)
def test_malformed_mappings_are_refused_with_what_is_wrong(
    entries: list[str], message: str
) -> None:
    with pytest.raises(InvalidInput, match=message):
        parse_mapping(entries)
