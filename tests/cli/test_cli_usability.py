"""`wfr` as a person meets it: closed pipes, quiet stderr, every bad entry named,
workflow modules from the current directory, and local actions that take effect at once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cli_support import TENANT, Cli, table_count
from workflow_runner.aws import lambda_support
from workflow_runner.local.runtime import quiet_powertools
from workflow_runner.local.sink import webhook_sink
from workflow_runner.store import Store

ROOT = Path(__file__).resolve().parents[2]
WFR = Path(sys.executable).parent / "wfr"
T0 = "2026-01-05T09:00:00Z"


def _env(db_url: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("WORKFLOW_MODULES",)}
    env.update(DATABASE_URL=db_url, NO_COLOR="1", **extra)
    return env


def _entry(detail_type: str, **detail: Any) -> dict[str, Any]:
    return {
        "Source": "shop",
        "DetailType": detail_type,
        "Detail": json.dumps({"tenantId": TENANT, **detail}),
    }


def _write(tmp_path: Path, value: Any, name: str = "events.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(value))
    return str(path)


def test_a_closed_pipe_ends_the_command_quietly(db_url: str, store: Store) -> None:
    for n in range(800):  # well over a pipe's buffer of output
        store.runs.upsert(
            TENANT,
            f"00000000-0000-4000-8000-{n:012d}",
            "user-onboarding",
            "waiting",
            2,
            "f" * 64,
            "user.signed-up",
            datetime(2026, 1, 5, tzinfo=UTC),
        )
    process = subprocess.Popen(
        [str(WFR), "runs", "list", "--limit", "1000"],
        cwd=ROOT,
        env=_env(db_url),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None and process.stderr is not None
    assert process.stdout.readline().startswith("RUN ID")
    process.stdout.close()  # what `| head -1` does after its line
    err = process.stderr.read()
    assert process.wait(timeout=60) == 141
    assert err == ""


def test_local_commands_leave_stderr_empty(db_url: str, tmp_path: Path) -> None:
    file = _write(tmp_path, [_entry("user.signed-up", userId="ada", email="ada@example.com")])
    with webhook_sink() as sink:
        env = _env(db_url, WFR_WEBHOOK_REDIRECTS=f"hooks.example.com={sink.url}")
        for args in (
            ["migrate"],
            ["local", "put-events", file, "--now", T0],
            ["local", "tick"],
            ["local", "tick", "--until", "2026-01-14T10:00:00Z", "--every", "P1D"],
            ["runs", "list"],
        ):
            result = subprocess.run(
                [str(WFR), *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
            )
            assert result.returncode == 0, result.stderr
            # Only the fast-forward's own closing progress line goes to stderr.
            lines = [line for line in result.stderr.splitlines() if " ticks up to " not in line]
            assert lines == [], args
        assert sink.received  # the run really went through its webhook


def test_the_metrics_warning_is_kept_off_stderr_locally() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with quiet_powertools():
            lambda_support.metrics.flush_metrics()  # nothing to publish
    assert [str(w.message) for w in caught] == []
    with warnings.catch_warnings(record=True) as outside:
        warnings.simplefilter("always")
        lambda_support.metrics.flush_metrics()
    assert any("No application metrics to publish" in str(w.message) for w in outside)


def test_workflow_modules_are_found_from_the_current_directory(db_url: str, tmp_path: Path) -> None:
    package = tmp_path / "my_workflows"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "trial.py").write_text(
        "from workflow_runner import define_workflow, on_event\n"
        "trial = define_workflow(name='trial-ending', trigger=on_event('trial.started'),\n"
        "    steps=lambda s: [s.wait(for_='P13D'), s.return_({'isSuccess': True})])\n"
    )
    env = _env(db_url, WORKFLOW_MODULES="sample_workflows,my_workflows.trial")
    env.pop("PYTHONPATH", None)
    result = subprocess.run(
        [str(WFR), "graph", "trial-ending"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert "wait P13D" in result.stdout


def test_every_bad_entry_is_named_and_nothing_is_sent(
    cli: Cli, store: Store, tmp_path: Path
) -> None:
    good = _entry("user.signed-up", userId="u", email="u@example.com")
    no_tenant = {"Source": "s", "DetailType": "user.signed-up", "Detail": json.dumps({"x": 1})}
    as_object = {"Source": "s", "DetailType": "user.signed-up", "Detail": {"tenantId": TENANT}}
    result = cli("local", "put-events", _write(tmp_path, [good, no_tenant, good, as_object]))
    assert result.code == 2
    assert "2 of 4 entries are invalid; nothing was sent" in result.err
    assert "entry 2:" in result.err and "entry 4:" in result.err
    assert "entry 1:" not in result.err and "entry 3:" not in result.err
    assert "Detail must be a string of JSON, as in the PutEvents API, got a dict" in result.err
    assert table_count(store, "inbox") == 0 and table_count(store, "wf_events") == 0


def test_an_unknown_detail_type_gets_a_suggestion(cli: Cli, tmp_path: Path) -> None:
    result = cli("local", "put-events", _write(tmp_path, [_entry("user.signed-upp", userId="u")]))
    assert result.code == 0
    assert "entry 1: no workflow is triggered by or waits for 'user.signed-upp'" in result.err
    assert "did you mean 'user.signed-up'?" in result.err


def test_local_actions_take_effect_at_once(cli: Cli, store: Store, tmp_path: Path) -> None:
    signup = _entry("user.signed-up", userId="ada", email="ada@example.com")
    cli("local", "put-events", _write(tmp_path, [signup]), "--now", T0)
    run_id = cli("runs", "list", "--json").json()[0]["runId"]
    resumed = cli("resume", run_id, "--force")
    assert resumed.code == 0
    # The resumed pass asked for the "Getting started" mail: the dispatcher was nudged.
    subjects = [m["subject"] for m in cli("local", "mail", "--json").json()]
    assert subjects == ["Welcome!", "Getting started"]
    assert "mail to ada@example.com: Getting started" in resumed.out
    assert [r["stepIndex"] for r in cli("pending", "--json").json()] == [4]
    assert cli("cancel", run_id).code == 0
    assert cli("pending", "--json").json() == []  # the projection was nudged too


def test_json_output_of_local_commands_is_json_alone(db_url: str, tmp_path: Path) -> None:
    """`wfr --json local … | python3 -m json.tool` works: the handlers' CloudWatch metric
    lines (EMF, stdout in Lambda) and whatever workflow code prints stay off stdout."""
    file = _write(
        tmp_path,
        [
            _entry("user.signed-up", userId="ada", email="ada@example.com"),
            _entry("inventory.changed", sku="s-1", revision=1, failAttempts=1),
        ],
    )
    env = _env(db_url)
    for args in (
        ["--json", "local", "put-events", file, "--now", T0],
        ["--json", "local", "tick"],
        ["local", "tick", "--until", "2026-01-06T10:00:00Z", "--every", "PT6H", "--json"],
    ):
        result = subprocess.run(
            [str(WFR), *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
        )
        assert result.returncode == 0, result.stderr
        assert isinstance(json.loads(result.stdout), dict), args  # one JSON document
        assert '"_aws"' not in result.stdout + result.stderr, args


def test_a_host_that_does_not_resolve_is_named_in_the_warning(cli: Cli, tmp_path: Path) -> None:
    export = _entry("data.processed", webhookUrl="https://partner.invalid/exports", data={})
    result = cli("local", "put-events", _write(tmp_path, [export]), "--now", T0)
    assert result.code == 0
    assert "webhook host lookup failed for partner.invalid" in result.err


def test_the_local_sink_answers_every_webhook_and_prints_what_arrived(
    db_url: str, tmp_path: Path
) -> None:
    """The README's `python -m http.server` answers POST with 501; `wfr local sink`
    answers 200 (or what --answer scripts) and prints each request."""
    sink = subprocess.Popen(
        [str(WFR), "local", "sink", "--port", "0", "--answer", "/exports=503"],
        cwd=ROOT,
        env=_env(db_url),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert sink.stderr is not None and sink.stdout is not None
        banner = sink.stderr.readline()
        url = banner.split("listening on ")[1].split()[0]
        assert url.startswith("http://127.0.0.1:")
        env = _env(db_url, WFR_WEBHOOK_REDIRECTS=f"hooks.example.com={url}", WEBHOOK_ALLOW_HOSTS="")
        signup = _entry("user.signed-up", userId="active-ada", email="ada@example.com")
        export = _entry("data.processed", webhookUrl=f"{url}/exports", data={"rows": 3})
        for args in (
            ["local", "put-events", _write(tmp_path, [signup, export]), "--now", T0],
            ["local", "tick", "--until", "2026-01-06T09:00:00Z", "--every", "PT1H"],
        ):
            result = subprocess.run(
                [str(WFR), *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
            )
            assert result.returncode == 0, result.stderr
        # Every webhook was sent while the commands ran, so the sink has printed them
        # all: stop it and read what it printed (a missing line then fails, never hangs).
        # The export (503, then its retry), then at 09:00 the daily report; onboarding's
        # CRM call comes on day 8, after this window.
        sink.terminate()
        out, _ = sink.communicate(timeout=10)
        received = out.splitlines()
    finally:
        if sink.poll() is None:
            sink.kill()
            sink.wait(timeout=10)
    assert len(received) == 3, received
    assert received[0].startswith("POST /exports  503"), received
    assert received[1].startswith("POST /exports  200"), received  # the task's retry
    assert received[2].startswith("POST /daily-report"), received
    assert '"rows": 3' in received[0] and "idempotency-key " in received[0]
