"""Constants and helpers every test package shares (not fixtures).

Tenants: TENANT_A and TENANT_B for tests that make their own events; SAMPLE_TENANT is
the tenant of the sample events in events/*.json; OTHER_TENANT never owns anything.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from workflow_runner import DomainEvent
from workflow_runner import engine as ops
from workflow_runner.definition import WorkflowRegistry
from workflow_runner.engine.tasks import TaskPorts
from workflow_runner.store import Store
from workflow_runner.webhook_guard import WebhookGuard

TENANT_A = "11111111-1111-4111-8111-111111111111"
TENANT_B = "22222222-2222-4222-8222-222222222222"
SAMPLE_TENANT = "6f1c2b1e-8d3a-4e5f-9a7b-0c1d2e3f4a5b"
OTHER_TENANT = "99999999-9999-4999-8999-999999999999"


def eventbridge(
    detail_type: str,
    detail: dict[str, Any],
    event_id: str | None = None,
    when: datetime | None = None,
    source: str = "tests",
    account: bool = True,
) -> dict[str, Any]:
    """An EventBridge event as a rule target receives it (`account=False`: the envelope
    moto delivers, which lacks it)."""
    event = {
        "version": "0",
        "id": event_id or str(uuid.uuid4()),
        "detail-type": detail_type,
        "source": source,
        "account": "123456789012",
        "time": (when or datetime(2026, 1, 5, 9, 0, tzinfo=UTC)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": "eu-central-1",
        "resources": [],
        "detail": detail,
    }
    if not account:
        del event["account"]
    return event


def event(
    type: str, payload: dict[str, Any], tenant: str = TENANT_A, event_id: str | None = None
) -> DomainEvent:
    return DomainEvent(
        id=event_id or str(uuid.uuid4()),
        type=type,
        payload=payload,
        tenant_id=tenant,
        source="tests",
    )


@contextmanager
def fake_aws(monkeypatch: Any, region: str) -> Iterator[None]:
    """moto's AWS with throwaway credentials in the environment: nothing reaches AWS."""
    from moto import mock_aws

    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": region,
    }.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        yield


def moto_function(client: Any, name: str, versions: int = 0) -> str:
    """A Lambda function in moto (under fake_aws) with `versions` published versions, one
    per configuration change as a deploy makes them; its unqualified ARN."""
    import io
    import zipfile

    import boto3

    iam = boto3.client("iam", region_name=client.meta.region_name)
    try:
        role = iam.get_role(RoleName="wfr")["Role"]["Arn"]
    except iam.exceptions.NoSuchEntityException:
        trust = {"Version": "2012-10-17", "Statement": []}
        role = iam.create_role(RoleName="wfr", AssumeRolePolicyDocument=json.dumps(trust))
        role = role["Role"]["Arn"]
    code = io.BytesIO()
    with zipfile.ZipFile(code, "w") as archive:
        archive.writestr("app.py", "def handler(event, context):\n    return event\n")
    arn = client.create_function(
        FunctionName=name,
        Runtime="python3.13",
        Role=role,
        Handler="app.handler",
        Code={"ZipFile": code.getvalue()},
    )["FunctionArn"]
    for _ in range(versions):
        moto_publish(client, name)
    return str(arn)


def moto_publish(client: Any, name: str) -> str:
    """Publish a new version of a moto function (a deploy changed it); its number."""
    count = len(client.list_versions_by_function(FunctionName=name)["Versions"])
    client.update_function_configuration(FunctionName=name, Description=f"deploy {count}")
    return str(client.publish_version(FunctionName=name)["Version"])


def register(registry: WorkflowRegistry, **kwargs: Any) -> Any:
    """Define a workflow (not in the default registry) and add it to `registry`."""
    from workflow_runner import define_workflow

    wf = define_workflow(register=False, **kwargs)
    registry.register(wf)
    return wf


def trigger(
    store: Store,
    registry: WorkflowRegistry,
    type: str,
    payload: dict[str, Any],
    now: datetime,
    tenant: str = TENANT_A,
    event_id: str | None = None,
) -> ops.IngestResult:
    """Ingest a trigger event and run the pending projection (as the nudge would)."""
    result = ops.ingest_domain_event(store, event(type, payload, tenant, event_id), now, registry)
    ops.project_pending(store, now)
    return result


def task_ports(registry: WorkflowRegistry) -> TaskPorts:
    """What the tasks of `registry` reach when they only compute: no mailer, no HTTP."""
    return TaskPorts(registry, mailer=None, http=None, guard=WebhookGuard([]))  # type: ignore[arg-type]


def stream_types(store: Store, run_id: str, tenant: str = TENANT_A) -> list[str]:
    return [e.type for e in store.streams.load(tenant, run_id)]


def stream(store: Store, run_id: str, tenant: str = TENANT_A) -> list[Any]:
    return store.streams.load(tenant, run_id)


def pending_rows(store: Store, tenant: str = TENANT_A) -> list[dict[str, Any]]:
    return store.pending.for_tenant(tenant)


def resume_open(
    store: Store, registry: WorkflowRegistry, run_id: str, now: datetime, tenant: str = TENANT_A
) -> ops.ResumeResult:
    """Resume the run's open suspension now, at whatever step it waits, and project."""
    state = ops.load_run(store, tenant, run_id)
    assert state.suspension is not None
    result = ops.resume_run(
        store, tenant, run_id, state.suspension.step_index, now, registry=registry
    )
    ops.project_pending(store, now)
    return result


def resume_due(
    store: Store, registry: WorkflowRegistry, now: datetime, tenant: str = TENANT_A
) -> list[ops.ResumeResult]:
    """One due-scan cycle without a queue: project, resume every due row, project again."""
    ops.project_pending(store, now)
    results = [
        ops.resume_run(store, tenant, row.run_id, row.step_index, now, registry=registry)
        for row in store.pending.due(tenant, now, 1000)
    ]
    ops.project_pending(store, now)
    return results


def join_count_problems(store: Store) -> list[str]:
    """Where joins and their children disagree, at rest (empty: nowhere): a row still
    running behind a settled child run, a settled row not counted into its join, or a
    join whose counters (running, settled) differ from what its rows say."""
    conn = store.conn
    problems = [
        f"row not counted: {r}"
        for r in conn.execute(
            "SELECT c.join_id::text AS join_id, c.item_index, c.status, c.counted, "
            "       r.status AS run_status "
            "FROM run_children c JOIN workflow_runs r "
            "  ON r.tenant_id = c.tenant_id AND r.run_id = c.child_run_id "
            "WHERE (c.status = 'running' AND r.status IN ('completed', 'failed', 'cancelled'))"
            "   OR NOT c.counted"
        ).fetchall()
    ]
    problems += [
        f"the join's counters differ from its rows: {r}"
        for r in conn.execute(
            "SELECT * FROM (SELECT j.join_id::text AS join_id, j.running, j.settled, "
            "  count(*) FILTER (WHERE c.status = 'running' OR NOT c.counted) AS running_rows, "
            "  count(*) FILTER (WHERE c.counted AND c.started_at IS NOT NULL "
            "                   AND c.status IN ('completed', 'failed', 'cancelled')) "
            "    AS settled_rows "
            "  FROM run_joins j JOIN run_children c "
            "    ON c.tenant_id = j.tenant_id AND c.join_id = j.join_id "
            "  GROUP BY j.tenant_id, j.join_id) x "
            "WHERE (running, settled) <> (running_rows, settled_rows)"
        ).fetchall()
    ]
    return problems


def refuse_pass_writes(monkeypatch: Any, run_id: str | None = None) -> None:
    """Make the database refuse what passes write to `run_id` (any run when None), as
    PostgreSQL refuses a row it cannot store (a check, an encoding, a size); a
    failure's settling (no events) still goes through."""
    from workflow_runner.errors import StoreError
    from workflow_runner.store.streams import PassWrite, StreamStore

    real = StreamStore.record_passes

    def record(self: StreamStore, writes: list[PassWrite], *args: Any) -> Any:
        if any(w.events and run_id in (None, w.run_id) for w in writes):
            raise StoreError("database error (22P05): unsupported Unicode escape sequence")
        return real(self, writes, *args)

    monkeypatch.setattr(StreamStore, "record_passes", record)


def child_json(code: str, *args: str) -> Any:
    """Run `code` (dedented) in a fresh interpreter at the repository root with `args`,
    and return the JSON its last line of output holds: for what changes the whole
    process (the garbage collector's generations), kept out of the test session."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        cwd=Path(__file__).resolve().parent.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def nested(levels: int, leaf: Any = 1) -> Any:
    """`leaf` inside `levels` objects, `{"n": {"n": ... leaf}}` (built without recursion)."""
    value = leaf
    for _ in range(levels):
        value = {"n": value}
    return value


def nested_text(levels: int, leaf: str = "1") -> str:
    """The JSON text of `nested(levels)`, built as text (no encoder recursing into it)."""
    return '{"n":' * levels + leaf + "}" * levels


def network_address() -> str | None:
    """This machine's IPv4 address on its default route (not loopback), or None when it has
    none: what a console bound with `--host` to a network address listens on in tests."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # UDP: picks the route, sends nothing
        except OSError:
            return None
        address = str(probe.getsockname()[0])
    return None if address.startswith("127.") or address == "0.0.0.0" else address


@contextmanager
def serving_console(
    args: list[str], db_url: str, env: dict[str, str] | None = None, timeout: float = 120
) -> Iterator[tuple[str, list[str]]]:
    """Start `wfr ARGS` (a console), wait for the URL it prints (with its `?token=` when it
    prints one), and stop it with SIGTERM after; yields the URL and stdout's lines."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("WORKFLOW_", "WFR_"))}
    environ.update(DATABASE_URL=db_url, NO_COLOR="1", **(env or {}))
    process = subprocess.Popen(
        [str(Path(sys.executable).parent / "wfr"), *args],
        cwd=Path(__file__).resolve().parents[1],
        env=environ,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None and process.stderr is not None
    lines: list[str] = []
    try:
        for line in process.stdout:
            lines.append(line)
            found = re.search(r"wfr console: (http://\S+)", line)
            if found:
                yield found.group(1), lines
                break
        else:
            raise AssertionError(
                "the console never started:\n" + "".join(lines) + process.stderr.read()
            )
    finally:
        process.send_signal(signal.SIGTERM)
        # Read through the text streams: communicate() would skip what they buffered.
        rest, err = process.stdout.read(), process.stderr.read()
        process.wait(timeout=timeout)
        lines.append(rest)
        lines.append(err)
        assert process.returncode == 0, err
        assert "console stopped" in rest


def run_as_user(
    argv: list[str], folder: Path, timeout: float = 600, **environ: str
) -> subprocess.CompletedProcess[str]:
    """Run a command in `folder` as a user's shell would: this process's environment
    without the test session's DATABASE_URL, WORKFLOW_MODULES and PYTHONPATH, plus
    `environ`; output captured as text."""
    skip = ("DATABASE_URL", "WORKFLOW_MODULES", "PYTHONPATH")
    env = {k: v for k, v in os.environ.items() if k not in skip}
    return subprocess.run(
        argv, cwd=folder, env={**env, **environ}, capture_output=True, text=True, timeout=timeout
    )


def positional_query(name: str) -> tuple[str, list[str]]:
    """A named query's text with its %(name)s parameters as $1, $2, ... (for PREPARE),
    and the parameter names in that order."""
    from workflow_runner.store.queries import query

    names: list[str] = []

    def placeholder(m: re.Match[str]) -> str:
        if m.group(1) not in names:
            names.append(m.group(1))
        return f"${names.index(m.group(1)) + 1}"

    return re.sub(r"%\((\w+)\)s", placeholder, query(name)), names
