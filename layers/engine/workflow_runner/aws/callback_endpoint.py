"""The callback endpoint's HTTP side (functions/callback, behind a Lambda Function URL):
a request in, the token and payload out; an engine answer as an HTTP response.

An outside system POSTs to `ctx.callback.url` (the Function URL followed by the token)
with the JSON payload as the body, or to the Function URL itself with
`{"token": "wfrcb_...", "payload": ...}`. Only POST completes: a mail client or a link
scanner that fetches the link (GET) cannot use up a single-use token.

The token is the credential (the URL's AuthType is NONE): it alone decides the tenant,
the run and the wait, so no answer names them. Every answer is JSON,
`{"completed": true}` or `{"completed": false, "reason": ..., "error": ...}`:

| status | reason |
|---|---|
| 200 | (completed; the run is on the resume queue) |
| 400 | invalid: the request or its payload, saying what, where and which limit; nothing written |
| 404 | unknown: no callback has this token |
| 405 | method_not_allowed: not a POST |
| 409 | already_completed (a token is single-use) or not_waiting (the run moved on) |
| 410 | expired: the wait's timeout has passed |

A database failure is not answered here: it raises, the caller gets a 5xx and retries.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..callback_tokens import is_token
from ..engine.callbacks import CallbackRefused, UnknownCallback
from ..errors import InvalidInput
from ..json_input import parse_json
from ..storable import DEFAULT_MAX_RESULT_BYTES

# The inbox source of a payload that arrived through the endpoint.
SOURCE = "workflow-runner.callback-endpoint"
_STATUS = {"unknown": 404, "already_completed": 409, "not_waiting": 409, "expired": 410}
_HOW = "POST the JSON payload to the link the run handed out"
# A body may be as large as the payload it carries may be (complete_callback's limit);
# larger ones are refused before they are decoded.
MAX_BODY_BYTES = DEFAULT_MAX_RESULT_BYTES


@dataclass(frozen=True)
class CallbackRequest:
    """What a request asks: complete the wait of `token` with `payload`."""

    token: str
    payload: Any


class MethodNotAllowed(Exception):
    """A request that is not a POST (a GET never completes a callback)."""


def parse_request(event: Any) -> CallbackRequest:
    """The token and payload of a Function URL request (payload format 2.0).

    Raises:
        MethodNotAllowed: not a POST.
        InvalidInput: no Function URL request, a body that is not JSON, over
            MAX_BODY_BYTES or nested deeper than json_input.MAX_DEPTH, no payload.
        UnknownCallback: the path or `token` has no token's shape (no database needed
            to refuse it).
    """
    if not isinstance(event, Mapping) or not isinstance(event.get("requestContext"), Mapping):
        raise InvalidInput("callback request: not a Function URL request")
    method = (event["requestContext"].get("http") or {}).get("method")
    if method != "POST":
        raise MethodNotAllowed(str(method))
    path = str(event.get("rawPath") or "").strip("/")
    body = _json_body(event)
    if path:
        token, payload = path, body
    elif isinstance(body, dict) and set(body) == {"token", "payload"}:
        token, payload = body["token"], body["payload"]
    else:
        raise InvalidInput(
            'callback request: no token in the path and no {"token": ..., "payload": ...} '
            f"body ({_HOW})"
        )
    if not isinstance(token, str) or not is_token(token):
        raise UnknownCallback()
    return CallbackRequest(token, payload)


def _json_body(event: Mapping[str, Any]) -> Any:
    raw = event.get("body")
    if raw is None or raw == "":
        raise InvalidInput(
            "callback request: the body is empty: send the JSON payload ({} for none)"
        )
    try:
        text = base64.b64decode(raw, validate=True) if event.get("isBase64Encoded") else raw
    except (binascii.Error, TypeError, ValueError) as error:
        raise InvalidInput(f"callback request: the body is not JSON ({error})") from error
    return parse_json(text, "callback request: the body", max_bytes=MAX_BODY_BYTES)


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


def completed() -> dict[str, Any]:
    return answer(200, {"completed": True})


def refused(error: CallbackRefused) -> dict[str, Any]:
    body = {"completed": False, "reason": error.reason, "error": str(error)}
    return answer(_STATUS.get(error.reason, 409), body)


def invalid(error: InvalidInput) -> dict[str, Any]:
    return answer(400, {"completed": False, "reason": "invalid", "error": str(error)})


def not_allowed(method: str) -> dict[str, Any]:
    error = f"{method or 'this method'} does not complete a callback: {_HOW}"
    body = {"completed": False, "reason": "method_not_allowed", "error": error}
    return answer(405, body, {"allow": "POST"})
