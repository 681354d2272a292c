"""CloudFormation custom resources that answer on every path.

CloudFormation waits for a PUT to the request's pre-signed ResponseURL. A handler that
raises, times out or rejects a malformed request without answering leaves the stack
waiting until the resource's ServiceTimeout (an hour without one). So:

- a request that has a usable ResponseURL is always answered, FAILED with the reason
  when it is malformed or the work fails;
- a watchdog answers FAILED shortly before the function's own timeout when the work is
  still running (the Lambda is then frozen mid-transaction and PostgreSQL rolls it back
  when the connection drops);
- exactly one answer is sent, whichever of the work and the watchdog finishes first;
- Delete never touches the work (the schema outlives the stack).

Only a request without a ResponseURL cannot be answered: it is logged, counted and
raised; the resource's ServiceTimeout ends CloudFormation's wait.
"""

from __future__ import annotations

import json
import threading
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from pydantic import ValidationError

from ..errors import InvalidInput
from . import lambda_support as support
from .lambda_support import logger
from .models import CustomResourceEvent


class RemainingTime(Protocol):
    def get_remaining_time_in_millis(self) -> int: ...


Work = Callable[[float], Mapping[str, str]]

REASON_LIMIT = 3000  # CloudFormation truncates longer reasons


class Responder:
    """Sends one response to a request's ResponseURL; later calls are ignored.

    Args:
        event: the request (only ResponseURL, StackId, RequestId and LogicalResourceId
            are read, so a malformed request can still be answered).
        physical_id: the resource's physical id.
        timeout: seconds for the PUT.
    """

    def __init__(self, event: Mapping[str, Any], physical_id: str, timeout: float = 10.0):
        self._event = event
        self._physical_id = physical_id
        self._timeout = timeout
        self._lock = threading.Lock()
        self.status: str | None = None

    def answer(self, status: str, reason: str = "", data: Mapping[str, str] | None = None) -> bool:
        """PUT the response once; False when an answer was already sent.

        Raises:
            OSError: the response URL could not be reached (the request stays unanswered).
        """
        with self._lock:
            if self.status is not None:
                return False
            body = json.dumps(
                {
                    "Status": status,
                    "Reason": (reason or f"See the logs of {self._physical_id}")[:REASON_LIMIT],
                    "PhysicalResourceId": self._physical_id,
                    "StackId": str(self._event.get("StackId", "")),
                    "RequestId": str(self._event.get("RequestId", "")),
                    "LogicalResourceId": str(self._event.get("LogicalResourceId", "")),
                    "Data": dict(data or {}),
                }
            ).encode()
            request = urllib.request.Request(
                str(self._event["ResponseURL"]),
                data=body,
                method="PUT",
                # The pre-signed URL was signed without a content type.
                headers={"content-type": "", "content-length": str(len(body))},
            )
            with urllib.request.urlopen(request, timeout=self._timeout) as reply:
                reply.read()
            self.status = status
            logger.info(f"answered CloudFormation: {status}", extra={"reason": reason})
            return True


def response_url(event: Any) -> str | None:
    """The request's ResponseURL when it is one we can answer on."""
    if not isinstance(event, Mapping):
        return None
    url = event.get("ResponseURL")
    if isinstance(url, str) and url.startswith(("https://", "http://")):
        return url
    return None


def run(
    event: Any,
    context: RemainingTime,
    *,
    physical_id: str,
    work: Work,
    what: str,
    margin_s: float = 20.0,
) -> dict[str, Any]:
    """Serve one custom resource request, answering CloudFormation on every path.

    Args:
        event: the request as Lambda received it.
        context: the Lambda context (its remaining time arms the watchdog).
        physical_id: the physical id reported when the request carries none.
        work: does Create and Update; receives the seconds it may take and returns the
            response's Data. Raising answers FAILED with the error as the reason.
        what: names the work in reasons ("schema migration").
        margin_s: the watchdog answers this long before the function's timeout.

    Returns:
        ``{"status": "SUCCESS" | "FAILED", "reason"?, "data"?}``, what was answered.

    Raises:
        InvalidInput: the request has no ResponseURL, so it cannot be answered.
        OSError: the ResponseURL could not be reached.
    """
    if response_url(event) is None:
        raise support.reject(
            InvalidInput("custom resource request without a ResponseURL: cannot answer it"),
            "custom resource request",
        )
    request_physical_id = event.get("PhysicalResourceId")
    responder = Responder(
        event, request_physical_id if isinstance(request_physical_id, str) else physical_id
    )
    try:
        request = CustomResourceEvent.model_validate(event)
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'request'}: {e['msg']}" for e in error.errors()
        )
        support.reject(InvalidInput(f"custom resource request: {problems}"), "custom resource")
        reason = f"invalid custom resource request ({problems})"
        responder.answer("FAILED", reason)
        return {"status": "FAILED", "reason": reason}

    if request.RequestType == "Delete":
        responder.answer("SUCCESS", f"{what}: nothing to delete (the data outlives the stack)")
        return {"status": "SUCCESS", "data": {}}

    budget = context.get_remaining_time_in_millis() / 1000 - margin_s
    timeout_reason = f"{what} did not finish within {max(budget, 0):.0f} s"

    def on_timeout() -> None:
        try:
            if responder.answer("FAILED", timeout_reason):
                logger.error(timeout_reason)
        except OSError:
            logger.exception("could not answer CloudFormation after the timeout")

    watchdog = threading.Timer(max(budget, 0.0), on_timeout)
    watchdog.daemon = True
    watchdog.start()
    try:
        data = work(max(budget, 1.0))
    except Exception as error:
        logger.exception(f"{what} failed")
        reason = f"{what} failed: {error}"
        responder.answer("FAILED", reason)
        return {"status": "FAILED", "reason": reason}
    finally:
        watchdog.cancel()
    if not responder.answer("SUCCESS", data=data):
        # The watchdog answered FAILED first, so CloudFormation rolls back to the old code,
        # which runs on the new schema (migrations only expand it); the rollback's Update
        # finds nothing left to apply.
        logger.warning(f"{what} completed after CloudFormation was told it failed")
        return {"status": "FAILED", "reason": timeout_reason}
    return {"status": "SUCCESS", "data": dict(data)}
