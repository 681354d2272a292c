"""Who may use the console: every bind answers only the Host names it serves (a page
elsewhere cannot reach it by DNS rebinding), and a bind to anything but loopback asks
for the operator token, as Jupyter does, before it shows or does anything. The token
flow in a real browser is in tests/browser."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pytest
from console_support import ROOT, Client, populate
from workflow_runner.console import ConsoleApp, ConsoleConfig, allowed_hosts, make_console_server
from workflow_runner.definition import default_registry
from workflow_runner.errors import InvalidInput
from workflow_runner.store import Store

from tests.support import TENANT_A, network_address

ADDRESS = network_address()
needs_network_address = pytest.mark.skipif(
    ADDRESS is None, reason="this machine has no network address besides loopback"
)
# Nothing listens on port 9: a request that reached the database would get a 503.
NO_DATABASE = "postgresql://wfr@127.0.0.1:9/nowhere?connect_timeout=2"


@dataclass
class Bound:
    client: Client
    app: ConsoleApp
    port: int
    origin: str


@contextmanager
def bound(config: ConsoleConfig, host: str) -> Iterator[Bound]:
    """A console bound as `wfr console --host HOST --port 0` binds it (requests go to the
    application directly, addressed to the bound host and port)."""
    server, app = make_console_server(config, host, 0)
    port = int(server.server_address[1])
    own = f"{host}:{port}"
    try:
        yield Bound(Client(app, host=own), app, port, f"http://{own}")
    finally:
        server.server_close()
        app.pool.close()


def _config(url: str = NO_DATABASE, **kw: object) -> ConsoleConfig:
    return ConsoleConfig(
        database_url=url,
        registry=default_registry(),
        allow_actions=True,
        template=ROOT / "template.yaml",
        **kw,  # type: ignore[arg-type]
    )


def _count(store: Store) -> int:
    row = store.conn.execute("SELECT count(*) AS n FROM wf_events").fetchone()
    assert row is not None
    return int(row["n"])


def _enter(console: Bound, token: str) -> str:
    """Visit with `?token=` as the printed link does; the cookie it sets (name=value)."""
    entry = console.client.get("/", token=token)
    assert entry.status == 303 and entry.location == "/"
    return entry.headers["Set-Cookie"].split(";")[0]


@needs_network_address
def test_a_rebinding_page_is_refused_on_a_host_bind_before_the_database_is_read() -> None:
    with bound(_config(), str(ADDRESS)) as console:
        for host in (
            f"attacker.example:{console.port}",
            "attacker.example",
            f"{ADDRESS}:{console.port + 1}",
        ):
            refused = console.client.request("GET", "/", host=host)
            assert refused.status == 421, host
            assert "does not serve the host" in refused.text
        post = console.client.post(
            "/runs/0123456789abcdef/cancel",
            {"csrf": console.app.csrf},
            host=f"attacker.example:{console.port}",
        )
        assert post.status == 421
        # Its own address passes the Host check; the token is asked for before the
        # database is read (that would be a 503 here).
        assert console.client.get("/").status == 403


def test_a_wildcard_bind_answers_only_its_own_addresses_and_the_names_given() -> None:
    with bound(_config(allow_host_names=("console.internal",)), "0.0.0.0") as console:
        port = console.port
        for host in (f"attacker.example:{port}", f"0.0.0.0:{port}", "console.internal:1"):
            assert console.client.request("GET", "/", host=host).status == 421, host
        mine = [f"console.internal:{port}", f"127.0.0.1:{port}", f"localhost:{port}"]
        if ADDRESS is not None:
            mine.append(f"{ADDRESS}:{port}")
        for host in mine:
            assert console.client.request("GET", "/", host=host).status == 403, host


@needs_network_address
def test_without_the_token_a_network_console_shows_nothing_and_writes_nothing(
    db_url: str, store: Store
) -> None:
    runs = populate(store)
    run = runs.ids["order"]
    with bound(_config(db_url), str(ADDRESS)) as console:
        for path in ("/", f"/runs/{run}", f"/runs/{run}/cancel", "/pending", "/doctor"):
            page = console.client.get(path, tenant=TENANT_A)
            assert page.status == 403, path
            assert 'name="csrf"' not in page.text and "order-approval" not in page.text
            assert "?token=" in page.text and "WFR_CONSOLE_TOKEN" in page.text
        before = _count(store)
        # Even with the form's CSRF token (which the confirmation page would show).
        form = {"tenant": TENANT_A, "csrf": console.app.csrf, "reason": "rebound"}
        refused = console.client.post(f"/runs/{run}/cancel", form, origin=console.origin)
        assert refused.status == 403
        wrong = console.client.get("/", token="not-the-token-0123456789")
        assert wrong.status == 403 and "Set-Cookie" not in wrong.headers
        assert "not the token this console" in wrong.text
        forged = console.client.post(
            f"/runs/{run}/cancel", form, origin=console.origin, cookie=_forged(console)
        )
        assert forged.status == 403
        assert _count(store) == before


def _forged(console: Bound) -> str:
    """A cookie with the console's cookie name and a value that is not the token's."""
    cookie = _enter(console, str(console.app.config.token))
    return cookie.split("=", 1)[0] + "=" + "0" * 64


@needs_network_address
def test_with_the_token_a_network_console_acts(db_url: str, store: Store) -> None:
    runs = populate(store)
    run = runs.ids["order"]
    with bound(_config(db_url), str(ADDRESS)) as console:
        token = console.app.config.token
        assert token is not None and len(token) >= 40  # generated: 32 random bytes
        entry = console.client.get("/", token=token)
        attributes = [part.strip() for part in entry.headers["Set-Cookie"].split(";")]
        assert {"HttpOnly", "SameSite=Strict", "Path=/"} <= set(attributes[1:])
        assert token not in attributes[0]  # the cookie holds a value derived from it
        cookie = attributes[0]
        # The link's other parameters survive the redirect that drops the token.
        deep = console.client.get(f"/runs/{run}", tenant=TENANT_A, token=token)
        assert deep.location == f"/runs/{run}?tenant={TENANT_A}"
        confirm = console.client.request(
            "GET", f"/runs/{run}/cancel", {"tenant": TENANT_A}, cookie=cookie
        )
        assert confirm.status == 200 and "Cancel this run?" in confirm.text
        done = console.client.post(
            f"/runs/{run}/cancel",
            {"tenant": TENANT_A, "csrf": confirm.csrf(), "reason": "by token"},
            origin=console.origin,
            cookie=cookie,
        )
        assert done.status == 303 and "outcome=cancelled" in done.location
    events = store.streams.load(TENANT_A, run)
    assert [e.type for e in events][-2:] == ["workflow.operator-action", "workflow.run-cancelled"]
    assert events[-2].payload["reason"] == "by token"


@needs_network_address
def test_the_token_page_lets_an_operator_in_with_the_token(db_url: str, store: Store) -> None:
    runs = populate(store)
    path = f"/runs/{runs.ids['order']}/cancel"
    with bound(_config(db_url), str(ADDRESS)) as console:
        asked = console.client.get(path, tenant=TENANT_A)
        assert asked.status == 403 and 'action="/login"' in asked.text
        assert f'name="next" value="{path}?tenant={TENANT_A}"' in asked.text
        token = str(console.app.config.token)
        wrong = console.client.post("/login", {"token": "x" * 40, "next": path})
        assert wrong.status == 403 and "Set-Cookie" not in wrong.headers
        login = console.client.post("/login", {"token": token, "next": f"{path}?tenant={TENANT_A}"})
        assert login.status == 303 and login.location == f"{path}?tenant={TENANT_A}"
        cookie = login.headers["Set-Cookie"].split(";")[0]
        confirm = console.client.request("GET", path, {"tenant": TENANT_A}, cookie=cookie)
        assert confirm.status == 200
        # It only ever sends the operator back into the console.
        for elsewhere in ("//evil.example/", "https://evil.example/", "/\\evil.example"):
            away = console.client.post("/login", {"token": token, "next": elsewhere})
            assert away.status == 303 and away.location == "/", elsewhere


def test_behind_a_tls_proxy_named_with_its_port_the_console_acts(db_url: str, store: Store) -> None:
    runs = populate(store)
    run = runs.ids["order"]
    config = _config(db_url, allow_host_names=("ops.example:443",), require_token=True)
    with bound(config, "127.0.0.1") as console:
        proxy = Client(console.app, host="ops.example")  # https://ops.example/ in the browser
        assert proxy.get("/").status == 403
        cookie = proxy.get("/", token=str(console.app.config.token)).headers["Set-Cookie"]
        cookie = cookie.split(";")[0]
        confirm = proxy.request("GET", f"/runs/{run}/cancel", {"tenant": TENANT_A}, cookie=cookie)
        form = {"tenant": TENANT_A, "csrf": confirm.csrf()}
        path = f"/runs/{run}/cancel"
        assert proxy.post(path, form, origin="https://evil.example", cookie=cookie).status == 403
        done = proxy.post(path, form, origin="https://ops.example", cookie=cookie)
        assert done.status == 303 and "outcome=cancelled" in done.location


def test_a_loopback_console_needs_no_token_as_before(db_url: str, store: Store) -> None:
    runs = populate(store)
    run = runs.ids["order"]
    with bound(_config(db_url), "127.0.0.1") as console:
        assert console.client.get("/").status == 200
        assert console.client.request("GET", "/", host=f"localhost:{console.port}").status == 200
        assert console.client.request("GET", "/", host="evil.example").status == 421
        confirm = console.client.get(f"/runs/{run}/cancel", tenant=TENANT_A)
        done = console.client.post(
            f"/runs/{run}/cancel",
            {"tenant": TENANT_A, "csrf": confirm.csrf()},
            origin=console.origin,
        )
        assert done.status == 303


def test_a_loopback_console_asks_for_the_token_when_told_to() -> None:
    with bound(_config(require_token=True), "127.0.0.1") as console:
        token = console.app.config.token
        assert token is not None
        assert console.client.get("/").status == 403
        assert console.client.get("/static/console.css").status == 200  # the page's style
        _enter(console, token)
    given = "a-token-set-in-the-environment"
    with bound(_config(token=given), "127.0.0.1") as console:
        assert console.app.config.token == given
        assert console.client.get("/").status == 403
        _enter(console, given)


@pytest.mark.parametrize(
    ("host", "port", "names", "expected"),
    [
        ("127.0.0.1", 8080, (), {"127.0.0.1:8080", "localhost:8080", "[::1]:8080"}),
        ("localhost", 8080, (), {"127.0.0.1:8080", "localhost:8080", "[::1]:8080"}),
        ("::1", 8080, (), {"127.0.0.1:8080", "localhost:8080", "[::1]:8080"}),
        ("192.0.2.10", 8080, (), {"192.0.2.10:8080"}),
        ("192.0.2.10", 80, (), {"192.0.2.10:80", "192.0.2.10"}),
        ("FD00:0::2", 8080, (), {"[fd00::2]:8080"}),
        (
            "192.0.2.10",
            8080,
            ("Console.Internal", "proxy.example:443", "[fd00::2]", "192.0.2.11:9000"),
            {
                "192.0.2.10:8080",
                "console.internal:8080",
                "proxy.example:443",
                "proxy.example",
                "[fd00::2]:8080",
                "192.0.2.11:9000",
            },
        ),
    ],
)
def test_the_hosts_each_bind_answers(
    host: str, port: int, names: tuple[str, ...], expected: set[str]
) -> None:
    assert allowed_hosts(host, port, names) == expected


def test_a_wildcard_bind_answers_loopback_and_the_names_given_never_any_host() -> None:
    hosts = allowed_hosts("0.0.0.0", 8080, ("console.internal",))
    assert {"console.internal:8080", "127.0.0.1:8080", "localhost:8080"} <= hosts
    assert "0.0.0.0:8080" not in hosts and "attacker.example:8080" not in hosts


@pytest.mark.parametrize(
    "name", ["evil.example/x", "*", "", "a b", "host:99999", "host:", "user@host", "[nope]"]
)
def test_a_name_that_is_no_host_is_refused(name: str) -> None:
    with pytest.raises(InvalidInput):
        allowed_hosts("127.0.0.1", 8080, (name,))
