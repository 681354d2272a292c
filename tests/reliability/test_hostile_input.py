"""Hostile input: every handler answers malformed, oversized, deeply nested, mistyped,
unknown-field, non-UUID, SQL-laden, odd-unicode and cross-tenant input with a clear
validation error and writes nothing; webhook targets inside the network are refused."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from workflow_runner import engine as ops
from workflow_runner import run_id_for
from workflow_runner.aws.inprocess import FakeLambdaContext, build_inprocess_runtime
from workflow_runner.clock import ManualClock
from workflow_runner.definition import WorkflowRegistry
from workflow_runner.errors import InvalidInput, RunNotFound
from workflow_runner.ports import set_runtime
from workflow_runner.store import Store
from workflow_runner.webhook_guard import BlockedDestination, WebhookGuard, is_public_address

from tests.reliability.harness import (
    PUBLIC_ADDRESS,
    TENANT_A,
    TENANT_B,
    eventbridge,
    handler,
    record,
)

# `make soak` raises the example count; the reduced suite keeps it small.
FUZZ = settings(
    max_examples=int(os.environ.get("WFR_FUZZ_EXAMPLES", "12")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


@pytest.fixture
def runtime(store: Store, clock: ManualClock, samples: WorkflowRegistry) -> Iterator[Any]:
    rt = build_inprocess_runtime(
        store, clock, webhook_resolver=lambda h, p: [PUBLIC_ADDRESS], registry=samples
    )
    set_runtime(rt)
    yield rt
    set_runtime(None)


def _counts(store: Store) -> dict[str, int]:
    tables = [
        r["tablename"]
        for r in store.conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' "
            "AND tablename <> 'schema_migrations'"
        ).fetchall()
    ]
    return {
        t: store.conn.execute(f'SELECT count(*) AS n FROM "{t}"').fetchone()["n"] for t in tables
    }


def _expect_rejected(store: Store, name: str, event: Any) -> str:
    """The handler raises InvalidInput (or RunNotFound) with a short, clean message and
    writes nothing."""
    before = _counts(store)
    with pytest.raises((InvalidInput, RunNotFound)) as caught:
        handler(name)(event, FakeLambdaContext())
    message = str(caught.value)
    assert "Traceback" not in message and len(message) < 2000, message[:300]
    assert _counts(store) == before, f"{name} wrote something for rejected input"
    return message


def _invoke_or_reject(store: Store, name: str, event: Any) -> Any:
    """Either a normal answer or a validation error that wrote nothing; never anything else."""
    before = _counts(store)
    try:
        return handler(name)(event, FakeLambdaContext())
    except (InvalidInput, RunNotFound) as error:
        message = str(error)
        assert "Traceback" not in message and len(message) < 2000, message[:300]
        assert _counts(store) == before, f"{name} wrote something for rejected input"
        return None


# --- EventBridge handlers ----------------------------------------------------------------


@FUZZ
@given(raw=json_values)
def test_eventbridge_handlers_reject_arbitrary_json(runtime: Any, store: Store, raw: Any) -> None:
    for name in ("trigger_projection", "event_wakeup"):
        _invoke_or_reject(store, name, raw)
    record(fuzz_cases=2)


@FUZZ
@given(
    detail=st.dictionaries(st.text(max_size=10), json_values, max_size=6),
    type_=st.sampled_from(
        ["order.placed", "order.approved", "user.signed-up", "inventory.changed", "unknown.type"]
    ),
    event_id=st.text(min_size=1, max_size=40),
)
def test_eventbridge_handlers_survive_arbitrary_details(
    runtime: Any, store: Store, detail: dict[str, Any], type_: str, event_id: str
) -> None:
    for tenant in (None, TENANT_A, "not-a-uuid"):
        body = dict(detail)
        if tenant is not None:
            body["tenantId"] = tenant
        for name in ("trigger_projection", "event_wakeup"):
            _invoke_or_reject(store, name, eventbridge(type_, body, event_id=event_id))
    record(fuzz_cases=6)


HOSTILE_ENVELOPES: list[tuple[str, Any]] = [
    ("not json at all", '{"id": '),
    ("a list", [1, 2, 3]),
    ("detail as string", {**eventbridge("order.placed", {}), "detail": '{"tenantId": "x"}'}),
    (
        "missing detail-type",
        {
            k: v
            for k, v in eventbridge("order.placed", {"tenantId": TENANT_A}).items()
            if k != "detail-type"
        },
    ),
    ("wrong types", {**eventbridge("order.placed", {"tenantId": TENANT_A}), "id": 12}),
    (
        "naive time",
        {**eventbridge("order.placed", {"tenantId": TENANT_A}), "time": "2026-01-01T00:00:00"},
    ),
    (
        "huge payload",
        eventbridge("order.placed", {"tenantId": TENANT_A, "orderId": "o", "blob": "x" * 300_000}),
    ),
    ("tenant not a uuid", eventbridge("order.placed", {"tenantId": "1 OR 1=1", "orderId": "o"})),
    ("tenant sql", eventbridge("order.placed", {"tenantId": "'; DROP TABLE inbox; --"})),
    ("tenant wrong type", eventbridge("order.placed", {"tenantId": 7, "orderId": "o"})),
    ("no tenant", eventbridge("order.placed", {"orderId": "o"})),
    (
        "own source",
        {**eventbridge("order.placed", {"tenantId": TENANT_A}), "source": "workflow-runner"},
    ),
    (
        "nul in detail",
        eventbridge(
            "order.placed",
            {"tenantId": TENANT_A, "orderId": "a\u0000b", "total": 1, "email": "a@example.com"},
        ),
    ),
    (
        "lone surrogate",
        eventbridge(
            "order.placed",
            {"tenantId": TENANT_A, "orderId": "\ud800", "total": 1, "email": "a@example.com"},
        ),
    ),
    (
        "nul in id",
        eventbridge(
            "order.placed",
            {"tenantId": TENANT_A, "orderId": "o", "total": 1, "email": "a@example.com"},
            event_id="a\u0000b",
        ),
    ),
    (
        "nul in key",
        eventbridge(
            "order.placed",
            {
                "tenantId": TENANT_A,
                "orderId": "o",
                "total": 1,
                "email": "a@example.com",
                "k\u0000": 1,
            },
        ),
    ),
]


def _deep(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(levels):
        value = {"n": value}
    return value


def test_hostile_envelopes_are_rejected_cleanly(runtime: Any, store: Store) -> None:
    for case, event in HOSTILE_ENVELOPES:
        try:
            _expect_rejected(store, "trigger_projection", event)
            if isinstance(event, dict) and event.get("detail-type") == "order.placed":
                event = {**event, "detail-type": "order.approved"}  # a type EventWakeup takes
            _expect_rejected(store, "event_wakeup", event)
        except BaseException as error:
            raise AssertionError(f"case {case!r}: {error}") from error
    record(fuzz_cases=2 * len(HOSTILE_ENVELOPES))


def test_deep_nesting_is_stored_intact_or_rejected_cleanly(runtime: Any, store: Store) -> None:
    detail = {
        "tenantId": TENANT_A,
        "orderId": "deep-50",
        "total": 1,
        "email": "a@example.com",
        "deep": _deep(50),
    }
    handler("trigger_projection")(eventbridge("order.placed", detail), FakeLambdaContext())
    stored = store.conn.execute("SELECT detail FROM inbox").fetchone()
    assert stored is not None and stored["detail"]["deep"] == _deep(50)
    for levels in (150, 5000):
        detail = {**detail, "orderId": f"deep-{levels}", "deep": _deep(levels)}
        message = _expect_rejected(store, "trigger_projection", eventbridge("order.placed", detail))
        assert "nested deeper" in message
    record(fuzz_cases=3)


def test_sql_metacharacters_and_unicode_are_data(runtime: Any, store: Store) -> None:
    nasty = "'); DELETE FROM inbox; -- ☃ \u202e 𝔘𝔫𝔦 \\x00 %(tenant_id)s {}"
    event = eventbridge(
        "order.placed",
        {"tenantId": TENANT_A, "orderId": nasty, "total": 3, "email": "a@example.com"},
        event_id=nasty,
    )
    answer = handler("trigger_projection")(event, FakeLambdaContext())
    assert answer["started"][0]["outcome"] == "suspended"
    row = store.inbox.get(TENANT_A, nasty)
    assert row is not None and row.detail["orderId"] == nasty
    record(fuzz_cases=1)


# --- resume inputs -----------------------------------------------------------------------


@FUZZ
@given(
    raw=json_values
    | st.fixed_dictionaries(
        {"tenantId": st.text(max_size=40), "runId": st.text(max_size=40), "stepIndex": json_values}
    )
)
def test_resume_direct_invoke_rejects_garbage(runtime: Any, store: Store, raw: Any) -> None:
    _invoke_or_reject(store, "resume_run", raw)
    record(fuzz_cases=1)


@FUZZ
@given(bodies=st.lists(st.text(max_size=60) | json_values.map(json.dumps), min_size=1, max_size=5))
def test_resume_batches_report_bad_messages_as_item_failures(
    runtime: Any, store: Store, bodies: list[str]
) -> None:
    records = [
        {
            "messageId": f"m{i}",
            "receiptHandle": "r",
            "body": body,
            "attributes": {},
            "messageAttributes": {},
            "md5OfBody": "",
            "eventSource": "aws:sqs",
            "eventSourceARN": "arn:aws:sqs:eu-central-1:1:q",
            "awsRegion": "eu-central-1",
        }
        for i, body in enumerate(bodies)
    ]
    before = _counts(store)
    try:
        answer = handler("resume_run")({"Records": records}, FakeLambdaContext())
    except Exception as error:  # Powertools raises when every record failed
        assert "All records failed" in str(error) or type(error).__name__ == "BatchProcessingError"
    else:
        assert len(answer["batchItemFailures"]) == len(records)
    assert _counts(store) == before
    record(fuzz_cases=1)


def test_a_console_resume_of_another_tenants_run_is_refused(
    runtime: Any, store: Store, clock: ManualClock
) -> None:
    order = {"tenantId": TENANT_A, "orderId": "o-1", "total": 5, "email": "a@example.com"}
    handler("trigger_projection")(eventbridge("order.placed", order), FakeLambdaContext())
    ops.project_pending(store, clock.now())
    run_id = run_id_for("order-approval", "o-1")
    message = _expect_rejected(
        store, "resume_run", {"tenantId": TENANT_B, "runId": run_id, "stepIndex": 1, "force": True}
    )
    assert TENANT_A not in message
    assert ops.load_run(store, TENANT_A, run_id).status == "waiting"
    # Unknown fields and mistyped values are named in the error.
    assert "x: Extra inputs are not permitted" in _expect_rejected(
        store, "resume_run", {"tenantId": TENANT_A, "runId": run_id, "stepIndex": 1, "x": 1}
    )
    assert "stepIndex" in _expect_rejected(
        store, "resume_run", {"tenantId": TENANT_A, "runId": run_id, "stepIndex": "1"}
    )
    assert "runId" in _expect_rejected(
        store, "resume_run", {"tenantId": TENANT_A, "runId": "1; DROP", "stepIndex": 1}
    )
    record(fuzz_cases=4)


def test_scheduled_handlers_reject_or_ignore_odd_ticks(runtime: Any, store: Store) -> None:
    for name in ("pending_projection", "due_scan", "step_dispatcher"):
        for event in ([], "tick", 3, None, {"detail-type": 5}, {"x": "\u0000"}):
            _invoke_or_reject(store, name, event)
    record(fuzz_cases=18)


# --- SSRF -------------------------------------------------------------------------------

BLOCKED_LITERALS = [
    "127.0.0.1",
    "127.1.2.3",
    "10.0.0.1",
    "172.16.5.4",
    "192.168.1.1",
    "169.254.169.254",
    "169.254.170.2",
    "100.64.0.1",
    "0.0.0.0",
    "[::1]",
    "[fd00:ec2::254]",
    "[fe80::1]",
    "[::ffff:127.0.0.1]",
    "[::ffff:169.254.169.254]",
    "[64:ff9b::a9fe:a9fe]",
    "[2002:7f00:1::]",
    "224.0.0.1",
    "255.255.255.255",
    "[::]",
]


@pytest.mark.parametrize("host", BLOCKED_LITERALS)
def test_webhooks_to_internal_addresses_are_refused(host: str) -> None:
    guard = WebhookGuard(resolver=lambda h, p: [PUBLIC_ADDRESS])
    with pytest.raises(BlockedDestination):
        guard.check(f"https://{host}/hook")
    record(ssrf_cases=1)


@pytest.mark.parametrize("address", [a.strip("[]") for a in BLOCKED_LITERALS])
def test_names_resolving_to_internal_addresses_are_refused(address: str) -> None:
    guard = WebhookGuard(resolver=lambda h, p: [PUBLIC_ADDRESS, address])
    with pytest.raises(BlockedDestination):
        guard.check("https://innocent.example.com/hook")
    assert not is_public_address(address)
    record(ssrf_cases=1)


@pytest.mark.parametrize(
    "url",
    [
        "http://hooks.example.com/x",
        "file:///etc/passwd",
        "gopher://a/b",
        "https://user:pw@a.com/",
        "https:///nohost",
        "https://[::1",
        "ftp://example.com/",
        "https://2130706433/",
        "https://0x7f.0.0.1/",
        "https://017700000001/",
    ],
)
def test_odd_webhook_urls_are_refused(url: str) -> None:
    # Decimal/hex/octal IPv4 spellings reach the resolver as names; the system
    # resolver turns them into 127.0.0.1, which the address check refuses.
    def resolver(host: str, port: int) -> list[str]:
        return ["127.0.0.1"]

    with pytest.raises(BlockedDestination):
        WebhookGuard(resolver=resolver).check(url)
    record(ssrf_cases=1)


def test_redirects_to_internal_addresses_are_not_followed(
    runtime: Any, store: Store, clock: ManualClock
) -> None:
    from workflow_runner.ports import HttpResponse

    runtime.http.respond = lambda request: HttpResponse(
        302, {"location": "http://169.254.169.254/latest/meta-data/"}
    )
    detail = {"tenantId": TENANT_A, "webhookUrl": "https://hooks.example.com/r", "data": {}}
    handler("trigger_projection")(eventbridge("data.processed", detail), FakeLambdaContext())
    answer = handler("step_dispatcher")({}, FakeLambdaContext())
    # A redirect is an answer the task does not retry; the sample catches the failure.
    assert answer["tasks"]["failed"] == 1 and answer["tasks"]["completed"] == 0
    assert [r.url for r in runtime.http.requests] == ["https://hooks.example.com/r"]
    record(ssrf_cases=1)


def test_the_pinned_sender_connects_only_to_checked_addresses() -> None:
    from workflow_runner.aws.ports import PinnedHttpSender

    guard = WebhookGuard(resolver=lambda h, p: ["10.1.2.3"])
    with pytest.raises(BlockedDestination):
        PinnedHttpSender(guard).send("POST", "https://rebind.example.com/", {}, b"{}", 1.0)
    record(ssrf_cases=1)


def test_random_ids_are_not_mistaken_for_runs(runtime: Any, store: Store) -> None:
    for _ in range(5):
        _expect_rejected(
            store,
            "resume_run",
            {"tenantId": str(uuid.uuid4()), "runId": str(uuid.uuid4()), "stepIndex": 0},
        )
    record(fuzz_cases=5)
