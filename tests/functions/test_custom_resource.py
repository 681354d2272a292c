"""The schema-migration custom resource answers CloudFormation on every path: success,
failure, a malformed request, and a run that would outlast the function (the watchdog
answers first, once); a request without a ResponseURL cannot be answered and raises."""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

import pytest
from workflow_runner.aws import custom_resource
from workflow_runner.aws.inprocess import FakeLambdaContext
from workflow_runner.errors import InvalidInput

from tests.functions.helpers import load_event


class _Responses(http.server.BaseHTTPRequestHandler):
    received: ClassVar[list[tuple[float, dict[str, Any]]]] = []

    def do_PUT(self) -> None:
        body = self.rfile.read(int(self.headers["content-length"]))
        _Responses.received.append((time.monotonic(), json.loads(body)))
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(autouse=True)
def no_leftover_metrics() -> Iterator[None]:
    """custom_resource.run counts rejects; outside a handler nothing flushes them, so
    they would leak into the next handler's metrics in this process."""
    from workflow_runner.aws.lambda_support import metrics

    yield
    metrics.clear_metrics()


@pytest.fixture
def url() -> Iterator[str]:
    _Responses.received = []
    server = http.server.HTTPServer(("127.0.0.1", 0), _Responses)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/presigned"
    finally:
        server.shutdown()
        server.server_close()


def request(name: str, url: str) -> dict[str, Any]:
    return {**load_event(name), "ResponseURL": url}


def statuses() -> list[str]:
    return [body["Status"] for _, body in _Responses.received]


def test_work_that_outlasts_the_function_is_answered_failed_before_the_timeout(url: str) -> None:
    context = FakeLambdaContext()
    context.remaining_ms = 21_000  # with the 20 s margin: the watchdog fires after 1 s
    started = time.monotonic()
    budgets: list[float] = []

    def slow(budget: float) -> Mapping[str, str]:
        budgets.append(budget)
        time.sleep(2.5)
        return {"Applied": "0003_late"}

    result = custom_resource.run(
        request("migrate-update.json", url), context, physical_id="p", work=slow, what="work"
    )
    assert result["status"] == "FAILED" and "did not finish within 1 s" in result["reason"]
    ((answered_at, body),) = _Responses.received  # exactly one answer
    assert body["Status"] == "FAILED"
    assert 0.9 <= answered_at - started < 2.0  # the watchdog's, not the work's end
    assert budgets == [1.0]


def test_work_is_told_the_time_it_has(url: str) -> None:
    context = FakeLambdaContext()
    context.remaining_ms = 300_000
    seen: list[float] = []
    result = custom_resource.run(
        request("migrate-create.json", url),
        context,
        physical_id="p",
        work=lambda budget: seen.append(budget) or {"Applied": "x"},  # type: ignore[func-returns-value]
        what="work",
    )
    assert result == {"status": "SUCCESS", "data": {"Applied": "x"}}
    assert seen == [280.0]
    ((_, body),) = _Responses.received
    assert (body["Status"], body["Data"], body["PhysicalResourceId"]) == (
        "SUCCESS",
        {"Applied": "x"},
        "p",
    )


def test_failing_work_is_answered_with_its_reason(url: str) -> None:
    def broken(budget: float) -> Mapping[str, str]:
        raise RuntimeError("relation wf_events is locked")

    result = custom_resource.run(
        request("migrate-create.json", url),
        FakeLambdaContext(),
        physical_id="p",
        work=broken,
        what="work",
    )
    assert result["status"] == "FAILED"
    ((_, body),) = _Responses.received
    assert body["Status"] == "FAILED" and "relation wf_events is locked" in body["Reason"]


def test_update_keeps_the_physical_id_cloudformation_sent(url: str) -> None:
    event = request("migrate-update.json", url) | {"PhysicalResourceId": "from-create"}
    custom_resource.run(event, FakeLambdaContext(), physical_id="p", work=lambda b: {}, what="w")
    ((_, body),) = _Responses.received
    # Another id would make CloudFormation replace the resource and send a Delete.
    assert body["PhysicalResourceId"] == "from-create"


@pytest.mark.parametrize(
    "mutate",
    [
        lambda e: e | {"RequestType": "Upgrade"},
        lambda e: {k: v for k, v in e.items() if k != "StackId"},
        lambda e: e | {"RequestType": None},
    ],
)
def test_malformed_requests_are_answered_failed_and_do_no_work(url: str, mutate: Any) -> None:
    ran: list[float] = []
    result = custom_resource.run(
        mutate(request("migrate-create.json", url)),
        FakeLambdaContext(),
        physical_id="p",
        work=lambda b: ran.append(b) or {},  # type: ignore[func-returns-value]
        what="work",
    )
    assert result["status"] == "FAILED" and ran == []
    assert statuses() == ["FAILED"]


@pytest.mark.parametrize(
    "event",
    [["not", "an", "object"], {"RequestType": "Create"}, {"ResponseURL": "s3://bucket/key"}],
)
def test_a_request_that_cannot_be_answered_raises(url: str, event: Any) -> None:
    with pytest.raises(InvalidInput, match="ResponseURL"):
        custom_resource.run(
            event, FakeLambdaContext(), physical_id="p", work=lambda b: {}, what="w"
        )
    assert _Responses.received == []


def test_an_unreachable_response_url_raises_so_lambda_retries(url: str) -> None:
    event = request("migrate-delete.json", "http://127.0.0.1:9/unreachable")
    with pytest.raises(OSError):
        custom_resource.run(
            event, FakeLambdaContext(), physical_id="p", work=lambda b: {}, what="w"
        )
