"""What PostgreSQL can store as jsonb: one check for inputs (EventBridge events) and for
what workflows produce (step results, task results, webhook responses)."""

from __future__ import annotations

import json
import math
import re
from typing import Any

from .errors import InvalidInput

MAX_NESTING = 100  # levels of objects and arrays; deeper values are refused, not recursed into
DEFAULT_MAX_RESULT_BYTES = 256 * 1024
# What jsonb text cannot hold: NUL, and UTF-16 surrogates (in a Python str only unpaired).
_REFUSED_TEXT = re.compile("[\x00\ud800-\udfff]")
# The compact JSON a value is measured in (json.dumps with these settings, built once).
_COMPACT = json.JSONEncoder(separators=(",", ":"), allow_nan=False, ensure_ascii=False)
# The same encoder's C core, built once instead of per call as JSONEncoder.encode does
# (two thirds of a small result's check), without the circular-reference bookkeeping:
# a value it refuses (circular ones recurse until RecursionError) is encoded again by
# _COMPACT, whose error says what is wrong.
_make_c_encoder: Any = getattr(json.encoder, "c_make_encoder", None)
_FAST_COMPACT: Any = (
    None
    if _make_c_encoder is None
    else _make_c_encoder(
        None,  # no markers: no circular check
        _COMPACT.default,
        json.encoder.encode_basestring,  # ensure_ascii=False
        None,  # no indent
        _COMPACT.key_separator,
        _COMPACT.item_separator,
        _COMPACT.sort_keys,
        _COMPACT.skipkeys,
        _COMPACT.allow_nan,
    )
)


def compact_json(value: Any) -> str:
    """`value` as _COMPACT encodes it, raising what _COMPACT raises."""
    if _FAST_COMPACT is not None:
        try:
            return "".join(_FAST_COMPACT(value, 0))
        except (TypeError, ValueError, RecursionError):
            pass  # encoded again below, for the error with its exact message
    return _COMPACT.encode(value)


def utf8_size(text: str) -> int:
    """The bytes of `text` in UTF-8 (what the size limits count)."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


class NotStorable(InvalidInput):
    """A value PostgreSQL's jsonb cannot store, or one over the size limit; the message
    names the first offending place. `reason` is what a run that produced it records."""

    reason = "result_not_storable"


def _reject(value: Any, where: str, depth: int) -> None:
    if depth > MAX_NESTING:
        raise NotStorable(f"{where}: nested deeper than {MAX_NESTING} levels")
    if isinstance(value, str):
        if _REFUSED_TEXT.search(value):
            raise NotStorable(f"{where}: text holds a NUL or an unpaired surrogate")
    elif isinstance(value, float) and not math.isfinite(value):
        raise NotStorable(f"{where}: {value} is not a JSON number")
    elif isinstance(value, dict):
        for key, item in value.items():
            _reject(key, f"{where} (a key)", depth)
            _reject(item, f"{where}.{str(key)[:32]}", depth + 1)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _reject(item, f"{where}[{index}]", depth + 1)


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _a_type(value: Any) -> str:
    """`a datetime.datetime`, `an object`: the type of a value JSON cannot hold."""
    kind = type(value)
    name = kind.__qualname__
    if kind.__module__ != "builtins":
        name = f"{kind.__module__}.{name}"
    return f"an {name}" if name[0] in "aeiou" else f"a {name}"


def _member(path: str, key: Any) -> str:
    text = str(key)[:32]
    if isinstance(key, str) and _IDENTIFIER.fullmatch(text):
        return f"{path}.{text}"
    return f"{path}[{key!r:.34}]"


def _not_json(value: Any, path: str, depth: int) -> str | None:
    """Where inside `value` the first thing JSON cannot hold sits, and what it is (None:
    nothing found; nesting beyond MAX_NESTING is left to the depth check)."""
    if depth > MAX_NESTING or value is None or isinstance(value, (str, int)):
        return None  # bool is an int
    place = path or "the value itself"
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{place} is {value}, not a JSON number"
    if isinstance(value, dict):
        for key, item in value.items():
            if not (key is None or isinstance(key, (str, int, float))):
                return f"{place} has a key that is {_a_type(key)}"
            if isinstance(key, float) and not math.isfinite(key):
                return f"{place} has the key {key}, not a JSON number"
            found = _not_json(item, _member(path, key), depth + 1)
            if found:
                return found
        return None
    if isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            found = _not_json(item, f"{path}[{index}]", depth + 1)
            if found:
                return found
        return None
    return (
        f"{place} is {_a_type(value)}; JSON has objects, arrays, text, numbers, true/false and null"
    )


def reject_unstorable(value: Any, where: str) -> None:
    """Refuse what jsonb cannot store: NUL and lone UTF-16 surrogates in text and keys,
    NaN and infinities, nesting beyond MAX_NESTING.

    Raises:
        NotStorable: naming the first offending field.
    """
    _reject(value, where, 0)


def check_storable(value: Any, where: str, max_bytes: int = DEFAULT_MAX_RESULT_BYTES) -> int:
    """Check that a value a workflow produced can be stored; return its size in bytes.

    Raises:
        NotStorable: not JSON (a set, an object, NaN), unstorable text, or larger than
            `max_bytes` as compact JSON.
    """
    try:
        text = compact_json(value)
    except (TypeError, ValueError) as error:
        # Name the place inside the value and its type (`.paidAt is a datetime.datetime`),
        # which the encoder's own message does not; a circular value keeps that message.
        found = _not_json(value, "", 0)
        raise NotStorable(f"{where} is not JSON: {found or error}") from error
    except RecursionError as error:
        raise NotStorable(f"{where}: nested deeper than {MAX_NESTING} levels") from error
    # The walk that names the offending place runs only if the text shows a suspect:
    # JSON spells a NUL (in text or a key) as \u0000 and keeps surrogates as they are
    # (the encoder itself refuses NaN and infinities, keys included), and a value nested
    # deeper than MAX_NESTING has more brackets than that. Text that merely looks suspect
    # (a literal "\\u0000", brackets inside strings) walks and passes.
    if (
        "\\u0000" in text
        or _REFUSED_TEXT.search(text)
        or text.count("[") + text.count("{") > MAX_NESTING
    ):
        reject_unstorable(value, where)
    size = utf8_size(text)
    if size > max_bytes:
        raise NotStorable(f"{where} is {size} bytes, over the {max_bytes}-byte limit")
    return size
