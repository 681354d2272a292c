"""json_input: JSON from outside is refused whole, with what, where and the limit named,
when it is too large or nested too deeply, before anything recurses into it; text at
the limit decodes as `json.loads` would."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from workflow_runner.errors import InvalidInput
from workflow_runner.json_input import MAX_DEPTH, check_json_value, parse_json

from tests.support import nested, nested_text

TOO_DEEP = f"is nested deeper than {MAX_DEPTH} levels (the limit)"

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='[]{}"\\:,ab é'),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(alphabet='[]{}"\\ab', max_size=4), inner, max_size=3)
    ),
    max_leaves=30,
)


def _depth(value: Any) -> int:
    """The reference: levels of objects and arrays, counted the obvious (recursive) way."""
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    return 0


@pytest.mark.parametrize(
    "text",
    [
        "[" * 100_000 + "]" * 100_000,
        nested_text(100_000),
        "[" * 100_000,  # never closed: too deep before it is malformed
        '{"a": "' + "x" * 1000 + '", "b": ' + "[" * 5000 + "1" + "]" * 5000 + "}",
    ],
    ids=["arrays", "objects", "unclosed", "deep-after-a-string"],
)
def test_text_nested_past_the_limit_is_refused_without_decoding(text: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        parse_json(text, "the body", max_bytes=None)
    assert str(refused.value) == f"the body {TOO_DEEP}"


def test_text_at_the_limit_decodes_and_one_level_more_does_not() -> None:
    assert parse_json(nested_text(MAX_DEPTH), "the body", max_bytes=None) == nested(MAX_DEPTH)
    with pytest.raises(InvalidInput, match="nested deeper than 100 levels"):
        parse_json(nested_text(MAX_DEPTH + 1), "the body", max_bytes=None)
    assert parse_json("[" * 7 + "]" * 7, "x", max_bytes=None, max_depth=7) == nested_list(7)


def nested_list(levels: int) -> Any:
    value: Any = []
    for _ in range(levels - 1):
        value = [value]
    return value


def test_brackets_inside_strings_are_text_not_depth() -> None:
    text = json.dumps({"brackets": "[" * 500, "escaped": '\\"[[[' * 100, "keys": {"{{{": 1}})
    assert parse_json(text, "x", max_bytes=None)["brackets"] == "[" * 500


@given(value=json_values)
def test_depth_is_measured_as_the_decoder_nests(value: Any) -> None:
    """On any JSON (brackets, quotes and backslashes in strings and keys included), the
    text scan and the value walk agree with the reference depth at every limit."""
    depth = _depth(value)
    for text in (json.dumps(value), json.dumps(value, indent=1, ensure_ascii=False)):
        for limit in (max(depth - 1, 0), depth):
            if depth > limit:
                with pytest.raises(InvalidInput, match="nested deeper"):
                    parse_json(text, "x", max_bytes=None, max_depth=limit)
                with pytest.raises(InvalidInput, match="nested deeper"):
                    check_json_value(value, "x", max_bytes=None, max_depth=limit)
            else:
                assert parse_json(text, "x", max_bytes=None, max_depth=limit) == value
                check_json_value(value, "x", max_bytes=None, max_depth=limit)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("x" * 300, "the body is 300 bytes, over the 256-byte limit"),
        ("é" * 200, "the body is 400 bytes, over the 256-byte limit"),  # UTF-8 bytes counted
        (b"[" + b"1," * 200 + b"1]", "the body is 403 bytes, over the 256-byte limit"),
    ],
)
def test_text_over_the_size_limit_is_refused_before_anything_else(
    text: str | bytes, message: str
) -> None:
    with pytest.raises(InvalidInput) as refused:
        parse_json(text, "the body", max_bytes=256)
    assert str(refused.value) == message


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{oops", "the body is not JSON (line 1, column 2: Expecting property name"),
        ("", "the body is not JSON (line 1, column 1: Expecting value)"),
        (b"\xff\xfe\xff", "the body is not JSON ("),
        ("9" * 5000, "the body is not JSON (Exceeds the limit (4300 digits)"),
    ],
)
def test_text_that_is_not_json_says_so(text: str | bytes, message: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        parse_json(text, "the body", max_bytes=None)
    assert str(refused.value).startswith(message), str(refused.value)


def test_bytes_decode_as_json_loads_decodes_them() -> None:
    for encoding in ("utf-8", "utf-16", "utf-32"):
        assert parse_json('{"a": "é"}'.encode(encoding), "x", max_bytes=None) == {"a": "é"}


@pytest.mark.parametrize(
    "value",
    [nested(100_000), nested_list(100_000), [nested(MAX_DEPTH)], (nested(MAX_DEPTH),)],
    ids=["objects", "arrays", "one-more-in-a-list", "one-more-in-a-tuple"],
)
def test_decoded_values_nested_past_the_limit_are_refused(value: Any) -> None:
    with pytest.raises(InvalidInput) as refused:
        check_json_value(value, "resume request", max_bytes=None)
    assert str(refused.value) == f"resume request {TOO_DEEP}"


def test_a_circular_value_is_refused_not_walked_forever() -> None:
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(InvalidInput, match="nested deeper"):
        check_json_value(loop, "payload", max_bytes=None)


def test_decoded_values_at_the_limits_pass_and_over_the_size_limit_do_not() -> None:
    check_json_value(nested(MAX_DEPTH), "payload", max_bytes=None)
    check_json_value({"blob": "x" * 240}, "payload", max_bytes=256)
    with pytest.raises(InvalidInput) as refused:
        check_json_value({"blob": "é" * 240}, "payload", max_bytes=256)
    assert str(refused.value) == "payload is 491 bytes, over the 256-byte limit"
    with pytest.raises(InvalidInput, match="payload is not JSON"):
        check_json_value({"when": {1, 2}}, "payload", max_bytes=256)
