"""`wfr versions prune` (issue 32, item 2): the ResumeRun and StepDispatcher versions no
unsettled run needs are deleted; the live alias's versions, newer ones, and the newest
version that has an unsettled run's definition stay. Against moto's Lambda."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from cli_support import TENANT, Cli
from workflow_runner import Event, define_workflow, on_event
from workflow_runner.definition import WorkflowDefinition, WorkflowRegistry
from workflow_runner.definition.hosts import RESUME_RUN, STEP_DISPATCHER, register_hosts
from workflow_runner.store import Store

from tests.support import fake_aws, moto_function, trigger

REGION = "eu-central-1"
NOW = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """moto's Lambda client."""
    with fake_aws(monkeypatch, REGION):
        yield boto3.client("lambda", region_name=REGION)


def flow(subject: str) -> WorkflowDefinition:
    return define_workflow(
        name="pruned",
        trigger=on_event("pruned.start"),
        idempotency_key=Event.payload["id"],
        steps=lambda s: [
            s.wait(for_="P1D"),
            s.mail_send(to="ops@example.com", subject=subject, body="-"),
        ],
        register=False,
    )


def published(client: Any, name: str) -> list[str]:
    found = client.list_versions_by_function(FunctionName=name)["Versions"]
    return [v["Version"] for v in found if v["Version"] != "$LATEST"]


@pytest.fixture
def stack(aws: Any, store: Store) -> dict[str, str]:
    """ResumeRun versions 1-5, live on 4: v2 and v3 had the definition a waiting run
    started on (v3 newest), v4 has the current one, v5 is being deployed; v1 registered
    nothing (before kept code). StepDispatcher 1-2, live on 2, both with the old one."""
    resume = moto_function(aws, "wfr-ResumeRun", 5)
    dispatcher = moto_function(aws, "wfr-StepDispatcher", 2)
    aws.create_alias(FunctionName="wfr-ResumeRun", Name="live", FunctionVersion="4")
    aws.create_alias(FunctionName="wfr-StepDispatcher", Name="live", FunctionVersion="2")
    old, new = flow("Old"), flow("New")
    registry = WorkflowRegistry()
    registry.register(old)
    trigger(store, registry, "pruned.start", {"id": "a"}, NOW, tenant=TENANT)
    for version, definition in ((2, old), (3, old), (4, new), (5, new)):
        at = NOW + timedelta(days=version)
        register_hosts(store, [definition], RESUME_RUN, f"{resume}:{version}", at)
    for version in (1, 2):
        register_hosts(store, [old], STEP_DISPATCHER, f"{dispatcher}:{version}", NOW)
    return {"resume": resume, "dispatcher": dispatcher}


def test_a_dry_run_says_what_would_go_and_why_the_rest_stays(
    cli: Cli, aws: Any, stack: dict[str, str]
) -> None:
    result = cli("versions", "prune", "--dry-run", "--region", REGION, "--json")
    assert result.code == 0, result.err
    report = result.json()
    resume, dispatcher = stack["resume"], stack["dispatcher"]
    assert report["deleted"] == [f"{resume}:1", f"{resume}:2", f"{dispatcher}:1"]
    assert report["kept"] == {
        f"{dispatcher}:2": "the live alias points to it",
        f"{resume}:3": f"unsettled runs of pruned ({flow('Old').fingerprint[:12]}…)",
        f"{resume}:4": "the live alias points to it",
        f"{resume}:5": "newer than the live alias's version (a deploy in progress)",
    }
    assert published(aws, "wfr-ResumeRun") == ["1", "2", "3", "4", "5"]  # nothing deleted


def test_prune_deletes_the_versions_no_unsettled_run_needs_and_forgets_them(
    cli: Cli, aws: Any, stack: dict[str, str], store: Store
) -> None:
    result = cli("versions", "prune", "--region", REGION)
    assert result.code == 0, result.err
    resume = stack["resume"]
    assert f"deleted {resume}:2" in result.out
    assert f"kept {resume}:3: unsettled runs of pruned" in result.out
    assert published(aws, "wfr-ResumeRun") == ["3", "4", "5"]
    assert published(aws, "wfr-StepDispatcher") == ["2"]
    registered = {r.function_arn for r in store.hosts.all()}
    assert f"{resume}:2" not in registered and f"{resume}:3" in registered


def test_once_the_runs_settle_their_kept_version_goes_too(
    cli: Cli, aws: Any, stack: dict[str, str], store: Store
) -> None:
    store.conn.execute("UPDATE workflow_runs SET status = 'completed'")
    assert cli("versions", "prune", "--region", REGION).code == 0
    assert published(aws, "wfr-ResumeRun") == ["4", "5"]


def test_a_canary_keeps_both_versions_the_alias_sends_traffic_to(
    cli: Cli, aws: Any, stack: dict[str, str]
) -> None:
    aws.update_alias(
        FunctionName="wfr-ResumeRun",
        Name="live",
        FunctionVersion="4",
        RoutingConfig={"AdditionalVersionWeights": {"2": 0.1}},
    )
    report = cli("versions", "prune", "--dry-run", "--region", REGION, "--json").json()
    assert report["kept"][f"{stack['resume']}:2"] == "the live alias points to it"
    assert f"{stack['resume']}:1" in report["deleted"]
