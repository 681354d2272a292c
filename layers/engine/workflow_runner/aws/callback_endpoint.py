"""The callback endpoint's HTTP side (functions/callback, behind a Lambda Function URL):
a request in, what it asks (complete, fail, heartbeat) out; an engine answer as an HTTP
response.

An outside system POSTs to `ctx.callback.url` (the Function URL followed by the token):

- `POST <url>/<token>` with the JSON payload (an empty body: null) completes it;
- `POST <url>/<token>/fail` with `{"error": NAME, "message": TEXT}` (message optional)
  reports that it failed;
- `POST <url>/<token>/heartbeat` (no body, or `{}`) is a heartbeat;

or to the Function URL itself (`/`, `/fail`, `/heartbeat`) with the token in the body:
`{"token", "payload"}`, `{"token", "error", "message"}`, `{"token"}`. Only POST does
anything: a mail client or a link scanner that fetches the link (GET) cannot use up a
single-use token.

The token is the credential (the URL's AuthType is NONE): it alone decides the tenant,
the run and the callback, so no answer names them. Every answer is JSON: a completion's
`{"completed": true}` or `{"completed": false, "reason": ..., "error": ...}`; a
failure's and a heartbeat's `{"recorded": true}` (a heartbeat's with `deadline`, until
when the next one must come) or `{"recorded": false, "reason": ..., "error": ...}`:

- 200: recorded (a completion or failure the run waits for puts it on the resume queue);
- 400 invalid: the request, its payload or failure, saying what, where and which limit;
  nothing written;
- 404 unknown: no callback has this token;
- 405 method_not_allowed: not a POST;
- 409 already_completed (a token answers once), not_waiting (the run moved on),
  no_heartbeat (a heartbeat to a callback whose step names no interval);
- 410 expired: the callback's timeout passed, or its heartbeats stopped.

A database failure is not answered here: it raises, the caller gets a 5xx and retries.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from ..callback_tokens import is_token
from ..durations import format_instant
from ..engine.callbacks import (
    CallbackCompletion,
    CallbackHeartbeatRecorded,
    CallbackRefused,
    UnknownCallback,
    checked_failure,
    complete_callback,
    fail_callback,
    heartbeat_callback,
)
from ..errors import InvalidInput
from ..json_input import parse_json
from ..storable import DEFAULT_MAX_RESULT_BYTES
from ..store import Store

# The inbox source of an answer that arrived through the endpoint.
SOURCE = "workflow-runner.callback-endpoint"
_STATUS = {
    "unknown": 404,
    "already_completed": 409,
    "not_waiting": 409,
    "no_heartbeat": 409,
    "expired": 410,
}
_HOW = "POST the JSON payload to the link the run handed out"
# A body may be as large as the payload it carries may be (complete_callback's limit);
# larger ones are refused before they are decoded.
MAX_BODY_BYTES = DEFAULT_MAX_RESULT_BYTES
Action = Literal["complete", "fail", "heartbeat"]
_ACTIONS: tuple[Action, ...] = ("fail", "heartbeat")
# The keys a body with the token in it holds, by what it asks (optional ones second).
_BODY_KEYS: dict[Action, tuple[set[str], set[str]]] = {
    "complete": ({"token", "payload"}, set()),
    "fail": ({"token", "error"}, {"message"}),
    "heartbeat": ({"token"}, set()),
}


@dataclass(frozen=True)
class CallbackRequest:
    """What a request asks: complete the callback of `token` with `payload`, report it
    failed (`error`, `message`), or send a heartbeat."""

    token: str
    payload: Any = None
    action: Action = "complete"
    error: str | None = None
    message: str | None = None


class MethodNotAllowed(Exception):
    """A request that is not a POST (a GET never completes a callback)."""


def parse_request(event: Any) -> CallbackRequest:
    """What a Function URL request (payload format 2.0) asks.

    Raises:
        MethodNotAllowed: not a POST.
        InvalidInput: no Function URL request, a body that is not JSON, over
            MAX_BODY_BYTES or nested deeper than json_input.MAX_DEPTH, a body that does
            not hold what the request needs (it says what), a failure's error name or
            message that is not what checked_failure takes.
        UnknownCallback: the path or `token` has no token's shape (no database needed
            to refuse it).
    """
    if not isinstance(event, Mapping) or not isinstance(event.get("requestContext"), Mapping):
        raise InvalidInput("callback request: not a Function URL request")
    method = (event["requestContext"].get("http") or {}).get("method")
    if method != "POST":
        raise MethodNotAllowed(str(method))
    parts = [p for p in str(event.get("rawPath") or "").split("/") if p]
    action: Action = "complete"
    if parts and parts[-1] in _ACTIONS:
        action = "fail" if parts.pop() == "fail" else "heartbeat"
    if len(parts) > 1:
        raise UnknownCallback()
    body = _json_body(event)
    if parts:
        request = _with_token_in_path(parts[0], action, body)
    else:
        request = _with_token_in_body(action, body)
    if not isinstance(request.token, str) or not is_token(request.token):
        raise UnknownCallback()
    if action == "fail":
        checked_failure(request.error, request.message)
    return request


def _with_token_in_path(token: str, action: Action, body: Any) -> CallbackRequest:
    if action == "complete":
        return CallbackRequest(token, body)
    if action == "heartbeat":
        if body not in (None, {}):
            raise InvalidInput("callback request: a heartbeat takes no body (send none, or {})")
        return CallbackRequest(token, action=action)
    return _failure(token, body, {"error"}, {"message"})


def _with_token_in_body(action: Action, body: Any) -> CallbackRequest:
    required, optional = _BODY_KEYS[action]
    if not isinstance(body, dict) or not required <= set(body) <= required | optional:
        shape = ", ".join(f'"{k}": ...' for k in sorted(required)) + "".join(
            f', "{k}": ... (optional)' for k in sorted(optional)
        )
        where = "/" if action == "complete" else f"/{action}"
        raise InvalidInput(
            f"callback request: no token in the path and no {{{shape}}} body for {where} ({_HOW})"
        )
    if action == "complete":
        return CallbackRequest(body["token"], body["payload"])
    if action == "heartbeat":
        return CallbackRequest(body["token"], action=action)
    return _failure(body["token"], body, required, optional)


def _failure(token: Any, body: Any, required: set[str], optional: set[str]) -> CallbackRequest:
    if not isinstance(body, dict):
        got = "empty" if body is None else f"a {type(body).__name__}"
        raise InvalidInput(
            'callback request: a failure\'s body is {"error": NAME, "message": TEXT} '
            f"(message optional), not {got}"
        )
    missing = sorted(k for k in required if k not in body and k != "token")
    extra = sorted(set(body) - required - optional - {"token"})
    if missing or extra:
        what = [f"no {k!r}" for k in missing] + [f"unknown key {k!r}" for k in extra]
        raise InvalidInput(
            f"callback request: the failure's body has {', '.join(what)} "
            '(it is {"error": NAME, "message": TEXT}, message optional)'
        )
    return CallbackRequest(token, action="fail", error=body["error"], message=body.get("message"))


def _json_body(event: Mapping[str, Any]) -> Any:
    """The body's JSON (an empty body: None, a completion without a payload)."""
    raw = event.get("body")
    if raw is None or raw == "":
        return None
    try:
        text = base64.b64decode(raw, validate=True) if event.get("isBase64Encoded") else raw
    except (binascii.Error, TypeError, ValueError) as error:
        raise InvalidInput(f"callback request: the body is not JSON ({error})") from error
    if not text:
        return None
    return parse_json(text, "callback request: the body", max_bytes=MAX_BODY_BYTES)


def record(
    store: Store, request: CallbackRequest, now: datetime
) -> CallbackCompletion | CallbackHeartbeatRecorded:
    """Record what the request asks (see engine/callbacks.py).

    Raises:
        InvalidInput: a payload that is not storable JSON (nothing written).
        CallbackRefused: the token takes no such answer (nothing written).
    """
    if request.action == "heartbeat":
        return heartbeat_callback(store, request.token, now)
    if request.action == "fail":
        assert request.error is not None
        return fail_callback(store, request.token, request.error, request.message, now, SOURCE)
    return complete_callback(store, request.token, request.payload, now, SOURCE)


def answer(
    status: int, body: Mapping[str, Any], headers: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """A Function URL response with a JSON body."""
    return {
        "statusCode": status,
        "headers": {
            "content-type": "application/json",
            "cache-control": "no-store",
            **(headers or {}),
        },
        "body": json.dumps(body, separators=(",", ":")),
    }


def _key(action: Action) -> str:
    return "completed" if action == "complete" else "recorded"


def recorded(
    request: CallbackRequest, outcome: CallbackCompletion | CallbackHeartbeatRecorded
) -> dict[str, Any]:
    body: dict[str, Any] = {_key(request.action): True}
    if isinstance(outcome, CallbackHeartbeatRecorded):
        body["deadline"] = format_instant(outcome.deadline)
    return answer(200, body)


def refused(error: CallbackRefused, action: Action = "complete") -> dict[str, Any]:
    body = {_key(action): False, "reason": error.reason, "error": str(error)}
    return answer(_STATUS.get(error.reason, 409), body)


def invalid(error: InvalidInput, action: Action = "complete") -> dict[str, Any]:
    return answer(400, {_key(action): False, "reason": "invalid", "error": str(error)})


def action_of(event: Any) -> Action:
    """What a request asks, from its path alone (for the answer to a bad request)."""
    path = str(event.get("rawPath") or "") if isinstance(event, Mapping) else ""
    last = path.rstrip("/").rsplit("/", 1)[-1]
    return "fail" if last == "fail" else "heartbeat" if last == "heartbeat" else "complete"


def not_allowed(method: str) -> dict[str, Any]:
    error = f"{method or 'this method'} does not complete a callback: {_HOW}"
    body = {"completed": False, "reason": "method_not_allowed", "error": error}
    return answer(405, body, {"allow": "POST"})
