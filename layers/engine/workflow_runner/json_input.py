"""JSON from outside the engine, bounded in size and depth before anything works on it.

Every boundary that takes JSON from outside (the callback endpoint, intake records,
resume messages, ResumeRun's direct invoke, `wfr local put-events`, `wfr callbacks
complete`, the test kit) goes through here, so a body nested 100,000 levels deep is
refused with the limit named instead of raising RecursionError in `json.loads` (an
unhandled 5xx, a poisoned batch), and a value deep enough to decode but too deep for
what comes after (pydantic-core reads jsonb back at most 201 levels deep, writes it at
most 254) never gets that far.

Text is measured before it is decoded: its size first, then its depth, by a scan that
never recurses, so `json.loads` only ever sees text it can decode within the limit.
Values that arrive decoded (a Lambda direct invoke, a test's argument) are walked
without recursion.
"""

from __future__ import annotations

import json
from array import array
from itertools import accumulate
from typing import Any

from .errors import InvalidInput
from .storable import MAX_NESTING, compact_json, utf8_size

# Levels of objects and arrays, counting the outermost: `{}` and `[1]` are 1 deep,
# `{"a": [1]}` is 2. The same limit as what the engine stores (storable.MAX_NESTING),
# because a deeper input could never be stored; far under Python's recursion limit
# and pydantic-core's. Ruby's JSON parser defaults to the same 100.
MAX_DEPTH = MAX_NESTING

# Brackets as +1 and -1 (signed bytes), everything else dropped.
_SIGNS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def parse_json(
    text: str | bytes, where: str, *, max_bytes: int | None, max_depth: int = MAX_DEPTH
) -> Any:
    """Decode JSON text from outside, refusing it whole when it is too large or too deep.

    Args:
        text: the JSON text (bytes in UTF-8, or UTF-16/32 as `json.loads` detects them).
        where: what the text is, for the message (`"callback request: the body"`).
        max_bytes: the most bytes the text may have; None when the caller's transport
            already bounds it.
        max_depth: the most levels of objects and arrays.

    Returns:
        The decoded value.

    Raises:
        InvalidInput: over `max_bytes`, nested deeper than `max_depth`, or not JSON
            (or not text at all); the message names `where` and the limit.
    """
    if not isinstance(text, str | bytes):
        raise InvalidInput(f"{where} is not JSON (a {type(text).__name__}, not text)")
    size = len(text) if isinstance(text, bytes) else utf8_size(text)
    if max_bytes is not None and size > max_bytes:
        raise InvalidInput(f"{where} is {size} bytes, over the {max_bytes}-byte limit")
    try:
        decoded = (
            text.decode(json.detect_encoding(text), "surrogatepass")
            if isinstance(text, bytes)
            else text
        )
    except UnicodeDecodeError as error:
        raise InvalidInput(f"{where} is not JSON ({error})") from error
    if _text_too_deep(decoded, max_depth):
        raise _too_deep(where, max_depth)
    try:
        return json.loads(decoded)
    except json.JSONDecodeError as error:
        raise InvalidInput(
            f"{where} is not JSON (line {error.lineno}, column {error.colno}: {error.msg})"
        ) from error
    except ValueError as error:  # an integer of more digits than Python converts
        raise InvalidInput(f"{where} is not JSON ({error})") from error


def check_json_value(
    value: Any, where: str, *, max_bytes: int | None, max_depth: int = MAX_DEPTH
) -> None:
    """Refuse an already decoded value (a direct invoke, an argument) that is nested too
    deeply or too large, before anything recurses into it.

    Args:
        value: the decoded value (dicts, lists and scalars).
        where: what the value is, for the message (`"resume request"`).
        max_bytes: the most bytes of the value as compact JSON; None: not measured.
        max_depth: the most levels of objects and arrays.

    Raises:
        InvalidInput: nested deeper than `max_depth`, over `max_bytes`, or not JSON
            (measuring the size needs it encoded).
    """
    if _value_too_deep(value, max_depth):
        raise _too_deep(where, max_depth)
    if max_bytes is None:
        return
    try:
        text = compact_json(value)
    except (TypeError, ValueError) as error:
        raise InvalidInput(f"{where} is not JSON ({error})") from error
    size = utf8_size(text)
    if size > max_bytes:
        raise InvalidInput(f"{where} is {size} bytes, over the {max_bytes}-byte limit")


def _text_too_deep(text: str, limit: int) -> bool:
    """Whether the objects and arrays of JSON text nest deeper than `limit`. Linear in
    the text and without recursion; for text that is not JSON it may say yes where
    `json.loads` would have stopped at an error first, never no where it would recurse
    deeper."""
    if text.count("[") + text.count("{") <= limit:
        return False  # not even every bracket nested in the next: the usual event
    # Brackets inside strings are text. Without its escaped backslashes and quotes
    # (pairs taken from the left, as a JSON string reads them) every quote opens or
    # closes a string, so the even pieces between quotes are what is outside strings:
    # the pieces `json.loads` reads alike, up to wherever malformed text stops it.
    if "\\" in text:
        text = text.replace("\\\\", "").replace('\\"', "")
    outside = "".join(text.split('"')[::2]).encode("utf-8", "surrogatepass")
    signs = array("b", outside.translate(_SIGNS, _NOT_BRACKETS))
    return max(accumulate(signs), default=0) > limit


def _value_too_deep(value: Any, limit: int) -> bool:
    """Whether the dicts and lists (tuples: arrays too) of a decoded value nest deeper
    than `limit`, walked with a stack of its own (no recursion); it stops at the first
    place too deep, so a circular value is too deep, not endless."""
    if not isinstance(value, dict | list | tuple):
        return False
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        for child in node.values() if isinstance(node, dict) else node:
            if isinstance(child, dict | list | tuple):
                stack.append((child, depth + 1))
    return False


def _too_deep(where: str, limit: int) -> InvalidInput:
    return InvalidInput(f"{where} is nested deeper than {limit} levels (the limit)")
