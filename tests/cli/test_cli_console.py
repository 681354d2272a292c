"""`wfr console` and `wfr demo --console` as a person starts them: a process that
serves the console until it is stopped (on 127.0.0.1, or with `--host` on a network
address, where it asks for the operator token it prints)."""

from __future__ import annotations

import http.cookiejar
import os
import re
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.support import network_address, serving_console

ROOT = Path(__file__).resolve().parents[2]
WFR = Path(sys.executable).parent / "wfr"
ADDRESS = network_address()
needs_network_address = pytest.mark.skipif(
    ADDRESS is None, reason="this machine has no network address besides loopback"
)


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as answer:
        assert answer.status == 200
        return str(answer.read().decode())


def _status(url: str, host: str | None = None) -> int:
    """The status of a GET that follows no redirect and keeps no cookie."""
    request = urllib.request.Request(url, headers={"Host": host} if host else {})
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(request, timeout=30) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


def test_wfr_console_serves_until_stopped(db_url: str) -> None:
    with serving_console(["console", "--port", "0"], db_url) as (url, lines):
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/", url)
        assert "read-only" in lines[0]
        page = _get(url)
        assert "<h1>Runs" in page and "No runs match" in page
        assert "Doctor" in _get(url + "doctor")


def test_the_console_works_on_the_demos_database(db_url: str) -> None:
    with serving_console(["demo", "--console", "--port", "0"], db_url) as (url, lines):
        assert any("every run ended as expected" in line for line in lines)
        page = _get(url)
        for workflow in ("user-onboarding", "order-approval", "inventory-sync"):
            assert workflow in page
        assert "status-cancelled" in page and "status-completed" in page
        run = re.search(r'href="(/runs/[0-9a-f-]{36}\?tenant=[0-9a-f-]{36})"', page)
        assert run is not None
        assert "<svg" in _get(url.rstrip("/") + run.group(1).replace("&amp;", "&"))


@needs_network_address
def test_on_a_network_address_it_prints_a_token_url_and_answers_only_its_own_host(
    db_url: str,
) -> None:
    args = ["console", "--host", str(ADDRESS), "--port", "0", "--allow-actions"]
    with serving_console(args, db_url) as (url, lines):
        found = re.fullmatch(rf"(http://{re.escape(str(ADDRESS))}:(\d+)/)\?token=([\w-]+)", url)
        assert found, url
        base, port, token = found.groups()
        assert len(token) >= 40
        # A page elsewhere that rebinds its name to this address sends its own Host.
        assert _status(base, host=f"attacker.example:{port}") == 421
        assert _status(base) == 403  # its own host, but no token
        assert _status(base + "?token=" + token[:-1] + "x") == 403
        browser = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
        )
        with browser.open(url, timeout=30) as answer:  # sets the cookie, then "/"
            assert answer.status == 200 and answer.url == base
            assert "<h1>Runs" in answer.read().decode()
        with browser.open(base + "doctor", timeout=30) as answer:
            assert answer.status == 200
    err = lines[-1]
    assert f"listening on {ADDRESS}" in err and "token" in err


def test_the_operator_token_can_come_from_the_environment(db_url: str) -> None:
    token = "operator-token-from-the-vault-0123456789"
    env = {"WFR_CONSOLE_TOKEN": token}
    with serving_console(["console", "--port", "0"], db_url, env=env) as (url, lines):
        # Set in the environment, it is asked for on loopback too, and never printed.
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/", url)
        assert _status(url) == 403
        assert _status(url + "?token=" + token) == 303
    printed = "".join(lines)
    assert "operator token required for every page (WFR_CONSOLE_TOKEN)" in printed
    assert token not in printed


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        ([], {"WFR_CONSOLE_TOKEN": "short"}, "at least 16 characters"),
        (["--allow-host", "evil.example/x"], {}, "--allow-host 'evil.example/x': not a host"),
        (["--allow-host", "*"], {}, "--allow-host '*': not a host"),
        ([], {"WFR_CONSOLE_ALLOW_HOSTS": "ok.example,bad host"}, "'bad host': not a host"),
    ],
)
def test_a_short_token_or_a_bad_host_name_stops_it_before_it_listens(
    db_url: str, args: list[str], env: dict[str, str], message: str
) -> None:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("WORKFLOW_", "WFR_"))}
    environ.update(DATABASE_URL=db_url, NO_COLOR="1", **env)
    done = subprocess.run(
        [str(WFR), "console", "--port", "0", *args],
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert "wfr console: http" not in done.stdout
