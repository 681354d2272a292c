"""`wfr local` across a code change (issue 32, item 2): a run that started on the old
code of a workflow module goes on on that code when the module changed structurally
between two commands — as a kept Lambda version serves it in AWS — and fails loud once
that code is gone."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest
from cli_support import TENANT, Cli
from workflow_runner.definition import WorkflowRegistry, registry
from workflow_runner.store import Store

ENV = {"WORKFLOW_MODULES": "kept_flows"}
T0 = "2026-01-05T09:00:00Z"
A_DAY_LATER = "2026-01-06T09:00:01Z"

OLD_CODE = """
from workflow_runner import Event, define_workflow, on_event

define_workflow(
    name="kept-trial",
    trigger=on_event("user.signed-up"),
    idempotency_key=Event.payload["userId"],
    steps=lambda s: [
        s.wait(for_="P1D"),
        s.mail_send(to="ada@example.com", subject="Sent by the old code", body="-"),
    ],
)
"""

# A step before the wait the run stands at: its shape disagrees there.
NEW_CODE = OLD_CODE.replace(
    's.wait(for_="P1D"),', 's.compute("plan", lambda ctx: "pro"),\n        s.wait(for_="P1D"),'
).replace("Sent by the old code", "Sent by the new code")


@pytest.fixture
def module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """kept_flows.py on the module path; each `deploy` below is a fresh process's view."""
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "_DEFAULT", WorkflowRegistry())
    monkeypatch.delitem(sys.modules, "kept_flows", raising=False)
    return tmp_path / "kept_flows.py"


def deploy(module: Path, source: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The module's code changes, and the next command starts as a new process would:
    nothing imported, an empty registry."""
    module.write_text(source)
    monkeypatch.setattr(registry, "_DEFAULT", WorkflowRegistry())
    monkeypatch.delitem(sys.modules, "kept_flows", raising=False)
    importlib.invalidate_caches()


def start_a_run(cli: Cli, tmp_path: Path) -> None:
    entry = {
        "Source": "shop",
        "DetailType": "user.signed-up",
        "Detail": json.dumps({"tenantId": TENANT, "userId": "ada", "email": "ada@x.example"}),
    }
    (tmp_path / "events.json").write_text(json.dumps([entry]))
    result = cli("local", "put-events", str(tmp_path / "events.json"), "--now", T0, env=ENV)
    assert result.code == 0, result.err


def the_run(cli: Cli) -> dict[str, str]:
    [run] = cli("runs", "list", "--tenant", TENANT, "--json", env=ENV).json()
    return dict(run)


def test_a_run_goes_on_on_the_code_it_started_on_after_a_structural_change(
    cli: Cli, module: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deploy(module, OLD_CODE, monkeypatch)
    start_a_run(cli, tmp_path)
    deploy(module, NEW_CODE, monkeypatch)

    doctor = cli("doctor", "--json", env=ENV).json()
    [kept] = [c for c in doctor["checks"] if c["name"].startswith("kept versions")]
    assert kept["summary"] == "1 waiting run(s) stay on 1 kept version(s) until they settle"
    assert kept["items"][0].startswith("kept_flows as kept at 2026-01-05T09:00:00Z: kept-trial")

    assert cli("local", "tick", "--now", A_DAY_LATER, env=ENV).code == 0
    assert the_run(cli)["status"] == "completed"
    mail = cli("local", "mail", "--json", env=ENV).json()
    assert [m["subject"] for m in mail] == ["Sent by the old code"]


def test_the_run_fails_loud_once_the_code_it_started_on_is_gone(
    cli: Cli, module: Path, tmp_path: Path, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    deploy(module, OLD_CODE, monkeypatch)
    start_a_run(cli, tmp_path)
    deploy(module, NEW_CODE, monkeypatch)
    store.conn.execute("DELETE FROM local_kept_modules")  # the old code is gone

    assert cli("local", "tick", "--now", A_DAY_LATER, env=ENV).code == 0
    run = the_run(cli)
    assert run["status"] == "failed"
    events = cli("show", run["runId"], "--json", env=ENV).json()["events"]
    failed = [e["payload"] for e in events if e["type"] == "workflow.run-failed"]
    assert [f["reason"] for f in failed] == ["workflow_definition_changed"]
    assert cli("local", "mail", "--json", env=ENV).json() == []


def test_an_operator_resume_leaves_a_run_on_its_kept_function_version_alone(
    cli: Cli, module: Path, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a deployment's database: the CLI cannot run the kept version's code, so it
    says where the run resumes instead of failing it."""
    from datetime import datetime

    from workflow_runner.definition import default_registry
    from workflow_runner.definition.hosts import RESUME_RUN, register_hosts

    from tests.support import trigger

    deploy(module, OLD_CODE, monkeypatch)
    importlib.import_module("kept_flows")
    old = default_registry()
    now = datetime.fromisoformat(T0)
    started = trigger(store, old, "user.signed-up", {"userId": "ada"}, now, tenant=TENANT)
    kept = "arn:aws:lambda:eu-central-1:123456789012:function:wfr-ResumeRun:3"
    register_hosts(store, old, RESUME_RUN, kept, now)
    deploy(module, NEW_CODE, monkeypatch)

    run_id = started.started[0].run_id
    result = cli("resume", run_id, "--force", "--now", A_DAY_LATER, env=ENV)

    assert result.code == 1
    assert f"runs on the kept version {kept}" in result.err
    assert the_run(cli)["status"] == "waiting"
