"""Error text in the local loop: `wfr local` and `wfr runs show` on a local database
show the exception's text, with the key, the place inside the value and the type for a
value that cannot be stored, from the local runtime's log (table local_run_log). Stored
events never carry it (invariant 8), and AWS logs show a class and a hash."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import failing_workflows
import pytest
from cli_support import TENANT, Cli
from failing_workflows import SECRET
from workflow_runner.definition import default_registry

ENV = {"WORKFLOW_MODULES": "failing_workflows"}
T0 = "2026-01-05T09:00:00Z"


@pytest.fixture(autouse=True)
def _registered() -> Iterator[None]:
    """The failing workflows are in the default registry for these tests only."""
    for definition in (failing_workflows.charge, failing_workflows.refusal):
        default_registry().register(definition)
    yield
    for definition in (failing_workflows.charge, failing_workflows.refusal):
        default_registry().unregister(definition.name)


def _events(tmp_path: Path, *entries: tuple[str, dict[str, Any]]) -> str:
    path = tmp_path / "events.json"
    detail = [(kind, json.dumps({"tenantId": TENANT, **d})) for kind, d in entries]
    path.write_text(
        json.dumps([{"Source": "shop", "DetailType": k, "Detail": d} for k, d in detail])
    )
    return str(path)


def test_a_task_result_that_is_not_json_names_its_key_place_and_type(
    cli: Cli, tmp_path: Path
) -> None:
    file = _events(tmp_path, ("charge.requested", {"orderId": "o-1"}))
    sent = cli("local", "put-events", file, "--now", T0, env=ENV)
    assert sent.code == 0, sent.err
    text = "the result of task 'charge' is not JSON: .paidAt is a datetime.datetime"
    assert text in sent.out
    [run] = cli("runs", "list", "--json", env=ENV).json()
    assert run["status"] == "failed"
    shown = cli("runs", "show", run["runId"], env=ENV)
    assert "result_not_storable" in shown.out and text in shown.out
    as_json = cli("runs", "show", run["runId"], "--json", env=ENV).json()
    assert any(text in (line["detail"] or "") for line in as_json["localLog"])
    # What is stored stays generic: no key path, no type, no text.
    stored = json.dumps(as_json["events"])
    assert "paidAt" not in stored and "datetime" not in stored
    assert "workflow step failed (ResultNotStorable)" in stored


def test_a_step_exception_shows_its_text_locally_but_is_never_stored(
    cli: Cli, tmp_path: Path
) -> None:
    file = _events(tmp_path, ("refusal.requested", {"orderId": "o-2"}))
    sent = cli("--json", "local", "put-events", file, "--now", T0, env=ENV)
    assert sent.code == 0, sent.err
    [event] = sent.json()["events"]
    assert [line["detail"] for line in event["log"]] == [f"ValueError: {SECRET}"]
    assert SECRET not in json.dumps(event["events"])
    [run] = cli("runs", "list", "--json", env=ENV).json()
    shown = cli("runs", "show", run["runId"], env=ENV)
    assert f"ValueError: {SECRET}" in shown.out
