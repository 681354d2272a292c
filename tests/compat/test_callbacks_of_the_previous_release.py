"""Runs the previous release left waiting at a callback, and answers it recorded, go on
under this one (issue 33, item 2): the previous release's own code, taken from git,
starts the runs on the migrated database (it writes its shapes of the stream's facts
and of the `callbacks` row, none of the new columns); this release answers and resumes
them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from datetime import datetime, timedelta
from io import BytesIO
from pathlib import Path

import pytest
from workflow_runner import WorkflowRegistry, define_workflow, on_event
from workflow_runner import stream as ev
from workflow_runner.engine import project_pending, resume_run
from workflow_runner.engine.callbacks import (
    NoHeartbeat,
    complete_callback,
    fail_callback,
    heartbeat_callback,
    run_callbacks,
)
from workflow_runner.store import Store

from tests.support import TENANT_A, stream

ROOT = Path(__file__).resolve().parents[2]
# The release before callbacks could fail, beat or be created (this branch's base).
PREVIOUS_RELEASE = "2afba8f"

# Written by the previous release's code in a process of its own: start run `key` at
# T0 (and answer it too, as that release's endpoint did, with `answered`); print the
# token its mail carried.
_START = """
import json, sys
from datetime import datetime, timezone
from workflow_runner import define_workflow, on_event
from workflow_runner.callback_tokens import callback_links, tokens_in
from workflow_runner.definition import WorkflowRegistry, DomainEvent
from workflow_runner.engine import ingest_domain_event, project_pending
from workflow_runner.engine.callbacks import complete_callback
from workflow_runner.store import connect

url, tenant, key, answered = sys.argv[1:5]
T0 = datetime(2030, 1, 1, 9, 0, tzinfo=timezone.utc)
registry = WorkflowRegistry()
registry.register(define_workflow(
    name="legacy-approval", trigger=on_event("legacy.asked"), register=False,
    idempotency_key=lambda e: e.payload["id"],
    steps=lambda s: [
        s.mail_send(to="a@example.com", subject=key, body=lambda ctx: ctx.callback.url),
        s.wait_for_callback("answer", timeout="P1D"),
        s.return_(lambda ctx: {"answer": ctx.steps["answer"]}),
    ]))
store = connect(url)
with callback_links("https://cb.example.com/"):
    event = DomainEvent(key, "legacy.asked", {"id": key}, tenant, T0, "tests")
    [started] = ingest_domain_event(store, event, T0, registry).started
project_pending(store, T0)
row = store.conn.execute(
    "SELECT request FROM dispatch_outbox WHERE request->>'subject' = %s", (key,)).fetchone()
[token] = tokens_in(row["request"]["body"])
if answered == "yes":
    complete_callback(store, token, {"by": "the previous release"}, T0)
print(json.dumps({"run": started.run_id, "token": token}))
"""


def _legacy_approval() -> WorkflowRegistry:
    """The same workflow as this release registers it (its fingerprint is the one the
    runs were pinned to: a wait_for_callback without heartbeat or catch)."""
    registry = WorkflowRegistry()
    registry.register(
        define_workflow(
            name="legacy-approval",
            trigger=on_event("legacy.asked"),
            register=False,
            idempotency_key=lambda e: e.payload["id"],
            steps=lambda s: [
                s.mail_send(to="a@example.com", subject="-", body=lambda ctx: ctx.callback.url),
                s.wait_for_callback("answer", timeout="P1D"),
                s.return_(lambda ctx: {"answer": ctx.steps["answer"]}),
            ],
        )
    )
    return registry


@pytest.fixture(scope="module")
def previous_engine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The previous release's engine package, from git."""
    archive = subprocess.run(
        ["git", "archive", PREVIOUS_RELEASE, "layers/engine/workflow_runner"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout
    folder = tmp_path_factory.mktemp("previous")
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(folder, filter="data")
    return folder / "layers" / "engine"


def _started_by_the_previous_release(
    previous_engine: Path, db_url: str, key: str, answered: bool = False
) -> tuple[str, str]:
    env = {**os.environ, "PYTHONPATH": str(previous_engine)}
    done = subprocess.run(
        [sys.executable, "-c", _START, db_url, TENANT_A, key, "yes" if answered else "no"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    started = json.loads(done.stdout.strip().splitlines()[-1])
    return str(started["run"]), str(started["token"])


def _resume(store: Store, run_id: str, now: datetime) -> str:
    """Resume the run as this release's ResumeRun does (its definition serves it by
    shape: the previous release's process defined it from other source text)."""
    return resume_run(store, TENANT_A, run_id, 1, now, registry=_legacy_approval()).outcome


def test_a_run_the_previous_release_left_waiting_completes_under_this_one(
    previous_engine: Path, db_url: str, store: Store
) -> None:
    run_id, token = _started_by_the_previous_release(previous_engine, db_url, "k-1")
    waiting = stream(store, run_id)[-1]
    assert waiting.type == ev.STEP_WAITING_FOR_CALLBACK
    assert not {"name", "heartbeatSeconds"} & set(waiting.payload)  # its own shape
    now = waiting.recorded_at + timedelta(hours=1)
    with pytest.raises(NoHeartbeat):
        heartbeat_callback(store, token, now)

    completion = complete_callback(store, token, None, now)  # no payload: a success

    assert completion.run_due
    assert _resume(store, run_id, now) == "completed"
    assert stream(store, run_id)[-1].fact.result == {"answer": None}
    assert [c.status for c in run_callbacks(store, TENANT_A, run_id, now)] == ["completed"]


def test_a_run_of_the_previous_release_can_be_failed_through_its_token(
    previous_engine: Path, db_url: str, store: Store
) -> None:
    run_id, token = _started_by_the_previous_release(previous_engine, db_url, "k-2")
    now = stream(store, run_id)[-1].recorded_at + timedelta(hours=1)
    fail_callback(store, token, "Rejected", None, now)
    project_pending(store, now)
    assert _resume(store, run_id, now) == "failed"
    assert stream(store, run_id)[-1].payload["reason"] == "callback_failed"


def test_an_answer_the_previous_release_recorded_is_taken_by_this_one(
    previous_engine: Path, db_url: str, store: Store
) -> None:
    run_id, _ = _started_by_the_previous_release(previous_engine, db_url, "k-3", answered=True)
    answer = stream(store, run_id)[-1]
    assert answer.type == ev.CALLBACK_COMPLETED and "tokenHash" not in answer.payload
    assert _resume(store, run_id, answer.recorded_at) == "completed"
    assert stream(store, run_id)[-1].fact.result == {"answer": {"by": "the previous release"}}
