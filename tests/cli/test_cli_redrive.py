"""Redrive: re-run a failed run from the step that failed, on the current definition."""

from __future__ import annotations

from datetime import timedelta

import pytest
from cli_support import T0, TENANT, Cli, send, table_count
from workflow_runner import define_workflow, on_event
from workflow_runner.definition import WorkflowRegistry
from workflow_runner.definition.dsl import DomainEvent
from workflow_runner.engine import ingest_domain_event, resume_run
from workflow_runner.engine.redrive import RedriveRefused, redrive_run
from workflow_runner.store import Store

# Flipped by the tests: the "partner" step fails while this is True.
PARTNER = {"down": True}


def call_partner(ctx: object) -> dict[str, bool]:
    if PARTNER["down"]:
        raise ConnectionError("partner down")
    return {"ok": True}


@pytest.fixture(autouse=True)
def partner_down() -> None:
    PARTNER["down"] = True


def _define(
    registry: WorkflowRegistry, version: int = 1, times: int = 1, key: str = "prepared"
) -> None:
    steps = [
        lambda s: s.mail_send(to="ops@example.com", subject="starting", body="b"),
        lambda s: s.compute(key, lambda ctx: {"n": 1}),
        lambda s: s.wait(for_="PT1H"),
        lambda s: s.mail_send(to="ops@example.com", subject="after wait", body="b"),
        lambda s: s.retry(times=times, base="PT1S", do=[s.compute("partner", call_partner)]),
        lambda s: s.return_(lambda ctx: {"isSuccess": True, "prepared": ctx.steps.get(key)}),
    ]
    registry.register(
        define_workflow(
            "cli-partner",
            on_event("partner.requested"),
            steps=lambda s: [make(s) for make in steps],
            version=version,
            register=False,
        )
    )


def _start(store: Store, registry: WorkflowRegistry, event_id: str = "e-1") -> str:
    event = DomainEvent(event_id, "partner.requested", {"n": 1}, TENANT, T0, "tests")
    result = ingest_domain_event(store, event, T0, registry)
    return result.started[0].run_id


def _fail_after_wait(store: Store, registry: WorkflowRegistry) -> str:
    run_id = _start(store, registry)
    outcome = resume_run(store, TENANT, run_id, 2, T0 + timedelta(hours=1), registry=registry)
    assert outcome.outcome == "failed"
    return run_id


def test_redrive_repeats_the_failed_pass_without_repeating_its_dispatches(
    store: Store, registry: WorkflowRegistry
) -> None:
    _define(registry)
    run_id = _fail_after_wait(store, registry)
    mails_before = table_count(store, "dispatch_outbox")
    assert mails_before == 2  # "starting" and "after wait"
    PARTNER["down"] = False
    result = redrive_run(store, TENANT, run_id, T0 + timedelta(hours=2), registry)
    assert result.outcome == "completed"
    assert result.from_step_index == 4
    # The "after wait" mail of the failed pass got the same request id: not sent twice.
    assert table_count(store, "dispatch_outbox") == mails_before
    events = store.streams.load(TENANT, run_id)
    types = [e.type for e in events]
    assert types[-3:] == [
        "workflow.run-failed",
        "workflow.run-redriven",
        "workflow.run-completed",
    ]
    redriven = events[-2].payload
    assert redriven["fromStepIndex"] == 4
    assert redriven["path"] == [{"i": 2}]
    assert redriven["definitionFingerprint"] == redriven["previousFingerprint"]
    # Results from before the failed step are there again (restored from the suspension).
    assert events[-1].payload["result"] == {"isSuccess": True, "prepared": {"n": 1}}
    assert store.runs.get(TENANT, run_id).status == "completed"


def test_redrive_of_a_failure_in_the_first_pass_starts_over(
    store: Store, registry: WorkflowRegistry
) -> None:
    registry.register(
        define_workflow(
            "cli-first-pass",
            on_event("first.requested"),
            steps=lambda s: [
                s.mail_send(to="ops@example.com", subject="hello", body="b"),
                s.compute("partner", call_partner),
            ],
            register=False,
        )
    )
    event = DomainEvent("e-2", "first.requested", {}, TENANT, T0, "tests")
    run_id = ingest_domain_event(store, event, T0, registry).started[0].run_id
    assert store.runs.get(TENANT, run_id).status == "failed"
    PARTNER["down"] = False
    result = redrive_run(store, TENANT, run_id, T0, registry)
    assert result.outcome == "completed" and result.path == []
    assert table_count(store, "dispatch_outbox") == 1  # the mail keeps its request id


def test_redrive_gives_an_exhausted_retry_a_fresh_budget(
    store: Store, registry: WorkflowRegistry
) -> None:
    _define(registry, times=2)
    run_id = _start(store, registry)
    now = T0 + timedelta(hours=1)
    first = resume_run(store, TENANT, run_id, 2, now, registry=registry)
    assert first.outcome == "suspended"  # attempt 1 failed, retry scheduled
    second = resume_run(store, TENANT, run_id, 4, now, force=True, registry=registry)
    assert second.outcome == "failed"  # attempt 2 of 2 failed
    result = redrive_run(store, TENANT, run_id, now, registry)
    assert result.outcome == "suspended"  # attempt 1 of a new budget failed: retry scheduled
    assert result.path == [{"i": 4, "attempt": 1}]
    last = store.streams.load(TENANT, run_id)[-1]
    assert last.type == "workflow.retry.scheduled"
    assert (last.payload["attempt"], last.payload["maxAttempts"]) == (1, 2)


def test_redrive_runs_on_the_current_definition_and_records_both_fingerprints(
    store: Store, registry: WorkflowRegistry
) -> None:
    _define(registry)
    run_id = _fail_after_wait(store, registry)
    old = registry.latest("cli-partner").fingerprint
    registry.unregister("cli-partner")
    PARTNER["down"] = False
    _define(registry, version=2)
    new = registry.latest("cli-partner").fingerprint
    result = redrive_run(store, TENANT, run_id, T0 + timedelta(hours=2), registry)
    assert (result.previous_fingerprint, result.definition_fingerprint) == (old, new)
    assert result.outcome == "completed"


def test_redrive_a_run_failed_by_a_changed_definition(
    store: Store, registry: WorkflowRegistry
) -> None:
    _define(registry)
    PARTNER["down"] = False
    run_id = _start(store, registry)
    registry.unregister("cli-partner")
    # The old fingerprint is gone and step 1 stores under another key: resuming fails loud.
    _define(registry, version=2, key="ready")
    failed = resume_run(store, TENANT, run_id, 2, T0 + timedelta(hours=1), registry=registry)
    assert (failed.outcome, failed.reason) == ("failed", "workflow_definition_changed")
    result = redrive_run(store, TENANT, run_id, T0 + timedelta(hours=1), registry)
    assert result.outcome == "completed"


def test_redrive_refuses_runs_that_are_not_failed(store: Store, registry: WorkflowRegistry) -> None:
    _define(registry)
    run_id = _start(store, registry)
    before = table_count(store, "wf_events")
    with pytest.raises(RedriveRefused, match="is waiting; only failed runs can be redriven"):
        redrive_run(store, TENANT, run_id, T0, registry)
    assert table_count(store, "wf_events") == before


def test_redrive_refuses_a_returned_failure(store: Store, registry: WorkflowRegistry) -> None:
    registry.register(
        define_workflow(
            "cli-says-no",
            on_event("no.requested"),
            steps=lambda s: [s.return_({"isSuccess": False, "error": "no"})],
            register=False,
        )
    )
    event = DomainEvent("e-3", "no.requested", {}, TENANT, T0, "tests")
    run_id = ingest_domain_event(store, event, T0, registry).started[0].run_id
    with pytest.raises(RedriveRefused, match="returned failure"):
        redrive_run(store, TENANT, run_id, T0, registry)


def test_redrive_refuses_a_run_that_failed_before_its_first_step(
    store: Store, registry: WorkflowRegistry
) -> None:
    registry.register(
        define_workflow(
            "cli-bad-filter",
            on_event("filter.requested", filter=lambda event: event.payload["missing"]),
            steps=lambda s: [s.return_({"isSuccess": True})],
            register=False,
        )
    )
    event = DomainEvent("e-4", "filter.requested", {}, TENANT, T0, "tests")
    run_id = ingest_domain_event(store, event, T0, registry).started[0].run_id
    with pytest.raises(RedriveRefused, match="before its first step"):
        redrive_run(store, TENANT, run_id, T0, registry)


def test_cli_redrive_inventory_sync_after_its_retries_ran_out(cli: Cli, store: Store) -> None:
    detail = {"sku": "sku-9", "revision": 1, "failAttempts": 9}
    run_id = send(store, "inventory.changed", detail).started[0].run_id
    waiting = cli("redrive", run_id, "--tenant", TENANT)
    assert waiting.code == 1
    assert "is waiting; only failed runs can be redriven" in waiting.err
    now = T0
    for attempt in range(2, 6):  # attempt 1 ran when the event arrived
        now += timedelta(minutes=20)
        resumed = cli("resume", run_id, "--tenant", TENANT, "--now", now.isoformat(), "--json")
        # The last attempt fails the run: the resume happened, the run did not survive it.
        assert resumed.code == (1 if attempt == 5 else 0), resumed.err
    assert resumed.json()["outcome"] == "failed"
    assert f"run {run_id} failed in the resumed pass" in resumed.err
    assert cli("runs", "show", run_id, "--tenant", TENANT, "--json").json()["status"] == "failed"
    redriven = cli("redrive", run_id, "--tenant", TENANT, "--now", now.isoformat(), "--json")
    assert redriven.code == 0
    body = redriven.json()
    assert (body["outcome"], body["fromStepIndex"]) == ("suspended", 0)
    assert body["path"] == [{"i": 0, "attempt": 1}]
    shown = cli("runs", "show", run_id, "--tenant", TENANT, "--json").json()
    assert shown["status"] == "waiting"
    assert [e["type"] for e in shown["events"]][-2:] == [
        "workflow.run-redriven",
        "workflow.retry.scheduled",
    ]


def test_cli_redrive_unknown_run(cli: Cli) -> None:
    result = cli("redrive", "00000000-0000-4000-8000-00000000abcd", "--tenant", TENANT)
    assert result.code == 1 and "not found for tenant" in result.err
