"""The static values a definition's check judges: durations, instants, storable
values, webhook URLs and auth, a cron's catch-up policy (definition/checks.py reports
what they raise with the step's place)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from ..durations import parse_duration, parse_instant
from ..errors import InvalidInput
from ..refs import Ref
from ..storable import NotStorable, check_storable
from .dsl import CATCHUP_POLICIES


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _placeholder(value: Any) -> Any:
    """`value` with every reference replaced by a scalar, to check the shape around it."""
    if isinstance(value, Ref):
        return 0
    if isinstance(value, Mapping):
        return {k: _placeholder(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_placeholder(v) for v in value]
    return value


def _duration(value: Any, argument: str, instead: str | None) -> None:
    if isinstance(value, timedelta) and instead:  # a wait takes one; a lookback only text
        return
    if isinstance(value, str) and not value.startswith("P") and instead:
        try:
            parse_instant(value)
        except InvalidInput:
            pass
        else:
            raise ValueError(
                f"{value!r} is an instant; {argument} takes a duration, {instead} an instant"
            )
    if not isinstance(value, str):
        raise ValueError(f"{_shown(value)} is not an ISO-8601 duration such as 'PT10M' or 'P3D'")
    try:
        parse_duration(value)
    except InvalidInput:
        raise ValueError(
            f"{value!r} is not an ISO-8601 duration such as 'PT10M' or 'P3D'"
        ) from None


def _instant(value: Any) -> None:
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"{value!r} has no time zone")
        return
    if isinstance(value, str) and value.startswith("P"):
        raise ValueError(f"{value!r} is a duration; until takes an instant, for_= a duration")
    if not isinstance(value, str):
        raise ValueError(
            f"{_shown(value)} is not an ISO-8601 instant such as '2030-01-31T09:00:00Z'"
        )
    try:
        parse_instant(value)
    except InvalidInput:
        raise ValueError(
            f"{value!r} is not an ISO-8601 instant with an offset such as '2030-01-31T09:00:00Z'"
        ) from None


def _duration_or_instant(value: Any) -> None:
    if isinstance(value, datetime):
        _instant(value)
        return
    if isinstance(value, timedelta):
        return
    if isinstance(value, str):
        try:
            (parse_duration if value.startswith("P") else parse_instant)(value)
            return
        except InvalidInput:
            pass
    raise ValueError(
        f"{_shown(value)} is neither an ISO-8601 duration such as 'P3D' or 'PT12H' nor an "
        "instant such as '2030-01-31T09:00:00Z'"
    )


def _storable(value: Any, what: str) -> None:
    try:
        check_storable(_placeholder(value), what)
    except NotStorable as error:
        raise ValueError(str(error)) from None


def _webhook_url(url: Any) -> None:
    if not isinstance(url, str):
        raise ValueError(f"{_shown(url)} is not a URL")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises for a malformed port
    except ValueError as error:
        raise ValueError(f"{url!r} is not a URL: {error}") from None
    if parts.scheme.lower() not in ("https", "http"):
        raise ValueError(f"{url!r}: the scheme must be https (http only for allow-listed hosts)")
    if not parts.hostname:
        raise ValueError(f"{url!r} has no host")
    if parts.username is not None or parts.password is not None:
        raise ValueError(f"{url!r} carries credentials: use auth= or headers=")


def _auth(auth: Any) -> None:
    if isinstance(auth, Mapping):
        if auth.get("type") == "bearer" and isinstance(auth.get("token"), (str, Ref)):
            return
        if auth.get("type") == "basic" and all(
            isinstance(auth.get(k), (str, Ref)) for k in ("username", "password")
        ):
            return
    raise ValueError(
        "auth must be {'type': 'bearer', 'token': ...} or "
        "{'type': 'basic', 'username': ..., 'password': ...}"
    )


def _catchup(catchup: object) -> None:
    if catchup not in CATCHUP_POLICIES:
        raise ValueError(f"must be one of {', '.join(CATCHUP_POLICIES)}, not {catchup!r}")
