"""`wfr console` and `wfr demo --console` as a person starts them: a process that
serves the console on 127.0.0.1 until it is stopped."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WFR = Path(sys.executable).parent / "wfr"


@contextmanager
def serving(args: list[str], db_url: str, timeout: float = 120) -> Iterator[tuple[str, list[str]]]:
    """Start `wfr ARGS`, wait for the console's address, stop it with SIGTERM after."""
    env = {k: v for k, v in os.environ.items() if k != "WORKFLOW_MODULES"}
    env.update(DATABASE_URL=db_url, NO_COLOR="1")
    process = subprocess.Popen(
        [str(WFR), *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    lines: list[str] = []
    try:
        for line in process.stdout:
            lines.append(line)
            found = re.search(r"wfr console: (http://127\.0\.0\.1:\d+/)", line)
            if found:
                yield found.group(1), lines
                break
        else:
            pytest.fail("the console never started:\n" + "".join(lines) + process.stderr.read())  # type: ignore[union-attr]
    finally:
        process.send_signal(signal.SIGTERM)
        rest, err = process.communicate(timeout=timeout)
        lines.append(rest)
        assert process.returncode == 0, err
        assert "console stopped" in rest


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as answer:
        assert answer.status == 200
        return str(answer.read().decode())


def test_wfr_console_serves_until_stopped(db_url: str) -> None:
    with serving(["console", "--port", "0"], db_url) as (url, lines):
        assert "read-only" in lines[0]
        page = _get(url)
        assert "<h1>Runs" in page and "No runs match" in page
        assert "Doctor" in _get(url + "doctor")


def test_the_console_works_on_the_demos_database(db_url: str) -> None:
    with serving(["demo", "--console", "--port", "0"], db_url) as (url, lines):
        assert any("every run ended as expected" in line for line in lines)
        page = _get(url)
        for workflow in ("user-onboarding", "order-approval", "inventory-sync"):
            assert workflow in page
        assert "status-cancelled" in page and "status-completed" in page
        run = re.search(r'href="(/runs/[0-9a-f-]{36}\?tenant=[0-9a-f-]{36})"', page)
        assert run is not None
        assert "<svg" in _get(url.rstrip("/") + run.group(1).replace("&amp;", "&"))
