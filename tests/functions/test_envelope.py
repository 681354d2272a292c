"""Envelope validation: an EventBridge event becomes a DomainEvent or a clear error."""

from __future__ import annotations

import copy

import pytest
from workflow_runner.envelope import MAX_EVENT_BYTES, domain_event_from_eventbridge
from workflow_runner.errors import InvalidInput

from tests.functions.helpers import TENANT, load_event


def test_valid_event_becomes_domain_event() -> None:
    raw = load_event("trigger-projection-user-signed-up.json")
    event = domain_event_from_eventbridge(raw)
    assert event.id == raw["id"]
    assert event.type == "user.signed-up"
    assert event.source == "com.example.accounts"
    assert event.tenant_id == TENANT
    assert event.payload["userId"] == "active-42"
    assert event.time is not None and event.time.utcoffset() is not None


def test_account_is_optional_as_moto_delivers_it() -> None:
    raw = load_event("trigger-projection-user-signed-up.json")
    del raw["account"]
    assert domain_event_from_eventbridge(raw).tenant_id == TENANT


def test_tenant_id_is_normalised_to_lower_case() -> None:
    raw = load_event("trigger-projection-user-signed-up.json")
    raw["detail"]["tenantId"] = TENANT.upper()
    assert domain_event_from_eventbridge(raw).tenant_id == TENANT


def test_tenant_from_a_nested_path() -> None:
    raw = load_event("trigger-projection-user-signed-up.json")
    raw["detail"] = {"meta": {"tenant": {"id": TENANT}}, "userId": "u"}
    assert domain_event_from_eventbridge(raw, "meta.tenant.id").tenant_id == TENANT
    with pytest.raises(InvalidInput, match=r"detail\.meta\.tenant: missing"):
        raw["detail"] = {"meta": {}}
        domain_event_from_eventbridge(raw, "meta.tenant.id")


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("trigger-projection-bad-missing-tenant.json", r"detail\.tenantId: missing"),
        ("trigger-projection-bad-tenant-not-uuid.json", r"detail\.tenantId: .*'acme-corp'.*UUID"),
        ("trigger-projection-bad-string-detail.json", r"detail: .*JSON object, got a string"),
        ("trigger-projection-bad-own-source.json", r"source 'workflow-runner' is the engine's own"),
        ("trigger-projection-bad-missing-detail-type.json", r"detail-type: Field required"),
        ("event-wakeup-bad-tenant-not-string.json", r"detail\.tenantId: .*UUID string"),
    ],
)
def test_bad_events_name_the_field(name: str, message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        domain_event_from_eventbridge(load_event(name))


def test_oversize_event_is_rejected_with_its_size() -> None:
    raw = load_event("trigger-projection-user-signed-up.json")
    raw["detail"]["blob"] = "x" * MAX_EVENT_BYTES
    with pytest.raises(InvalidInput, match=r"over the 262144-byte limit"):
        domain_event_from_eventbridge(raw)


def test_event_just_under_the_limit_is_accepted() -> None:
    raw = load_event("trigger-projection-user-signed-up.json")
    raw["detail"]["blob"] = "x" * (MAX_EVENT_BYTES - 1024)
    assert domain_event_from_eventbridge(raw).payload["blob"]


@pytest.mark.parametrize("raw", [None, [], "text", 42])
def test_non_object_input_is_rejected(raw: object) -> None:
    with pytest.raises(InvalidInput, match="must be a JSON object"):
        domain_event_from_eventbridge(raw)


def test_naive_time_is_rejected() -> None:
    raw = copy.deepcopy(load_event("trigger-projection-user-signed-up.json"))
    raw["time"] = "2026-01-05T09:00:00"
    with pytest.raises(InvalidInput, match=r"time: .*time zone"):
        domain_event_from_eventbridge(raw)
