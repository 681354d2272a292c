"""`wfr demo` and the installed console script, run as a user would (subprocesses)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parents[2]
WFR = Path(sys.executable).parent / "wfr"


def run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(WFR), *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "WORKFLOW_MODULES")}
    env.update(extra)
    return env


def test_console_script_is_installed() -> None:
    result = run(["--help"], clean_env())
    assert result.returncode == 0
    assert "usage: wfr" in result.stdout
    missing = run(["runs", "list", "--tenant", "7f0c1a52-2c11-4a1e-9b1e-000000000001"], clean_env())
    assert missing.returncode == 2
    assert missing.stderr.startswith("wfr: error: no database")


def test_demo_on_a_given_database_plays_the_story(db_url: str) -> None:
    started = time.monotonic()
    result = run(["demo"], clean_env(DATABASE_URL=db_url))
    elapsed = time.monotonic() - started
    assert result.returncode == 0, result.stdout + result.stderr
    assert elapsed < 60
    out = result.stdout
    for section in (
        "two sign-ups, two orders",
        "partners fail, tasks retry with backoff; a refused export fails",
        "the refused export, the out-of-stock order and the carrier that could not quote",
        "A batch of 8 orders fans out",
        "the partner answered 503, the retry was accepted",
        "order o-1001 is approved",
        "order o-1002 is cancelled",
        "finance approves batch b-1's invoice run with the token its mail carried",
        "step 4: resumed by callback",
        "Timeline of batch b-1",
        "one carrier could not quote (tolerated)",
        '"reason": "non_retryable", "taskKey": "slowpost"',
        "Eight days pass",
        "Captured mail",
        "Webhook requests received by the local sink",
        "flowchart TD",
        "ok: every run ended as expected",
    ):
        assert section in out, section
    assert "Engagement tips" in out and "Getting started" in out
    assert "/crm-onboarding" in out and "/fulfilment" in out and "/inventory-synced" in out
    assert "/shipments" in out
    assert "/invoices" in out and "Approve the invoice run of batch b-1?" in out
    # The shipment's created callbacks: a quote kept for its await, a caught failure.
    assert "bay_haulage: callback of run" in out and "kept for its await" in out
    assert "callback 'north_freight' failed: NoCapacity" in out
    assert "/carriers/north_freight" in out and "/bookings" in out
    assert "Timeline of shipment s-1" in out
    assert "\033[" not in out  # no colour into a pipe
    assert '"_aws"' not in out  # no EMF metric record from the handlers (heartbeats included)
    with psycopg.connect(db_url) as conn:
        statuses = dict(
            conn.execute("SELECT status, count(*) FROM workflow_runs GROUP BY status").fetchall()
        )
    # Two runs fail by design: the export whose destination is refused, and the
    # fulfilment of the out-of-stock order (its batch catches it and goes on).
    assert statuses.get("cancelled") == 1 and statuses.get("failed") == 2
    assert "warning  tasks: 3 task(s) failed for good" in out
    assert "A webhook could not be delivered" in out
    assert out.count("POST    /exports") == 2  # 503, then accepted: one request id


def test_demo_with_its_own_embedded_postgres() -> None:
    result = run(["demo"], clean_env())
    assert result.returncode == 0, result.stdout + result.stderr
    assert "starting an embedded PostgreSQL" in result.stdout
    assert "demo finished in" in result.stdout
