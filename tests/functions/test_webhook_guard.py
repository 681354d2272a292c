"""SSRF guard and the pinned HTTPS sender: only public addresses unless allow-listed,
the connection goes to the checked address, Host/SNI stay the URL's, no redirects."""

from __future__ import annotations

import http.server
import shutil
import ssl
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from workflow_runner.aws.ports import PinnedHttpSender
from workflow_runner.webhook_guard import BlockedDestination, WebhookGuard, is_public_address


@pytest.mark.parametrize(
    "address",
    [
        "10.0.0.1",
        "172.16.5.4",
        "192.168.1.1",
        "127.0.0.1",
        "0.0.0.0",
        "169.254.169.254",  # instance metadata
        "169.254.170.2",  # ECS task metadata
        "100.64.0.1",  # shared address space (CGNAT)
        "224.0.0.1",  # multicast
        "240.0.0.1",  # reserved
        "255.255.255.255",
        "::1",
        "::",
        "fe80::1",
        "fc00::1",
        "fd00:ec2::254",  # IPv6 instance metadata
        "ff02::1",
        "::ffff:127.0.0.1",  # IPv4-mapped loopback
        "::ffff:10.1.2.3",
        "::ffff:169.254.169.254",
        "2002:0a00:0001::1",  # 6to4 around 10.0.0.1
        "64:ff9b::a00:1",  # NAT64 around 10.0.0.1
    ],
)
def test_non_public_addresses_are_refused(address: str) -> None:
    assert not is_public_address(address)


@pytest.mark.parametrize(
    "address", ["93.184.215.14", "8.8.8.8", "2606:4700:4700::1111", "::ffff:8.8.8.8"]
)
def test_public_addresses_pass(address: str) -> None:
    assert is_public_address(address)


def resolver(table: dict[str, list[str]]) -> Any:
    calls: list[str] = []

    def resolve(host: str, port: int) -> list[str]:
        calls.append(host)
        return table[host]

    resolve.calls = calls  # type: ignore[attr-defined]
    return resolve


def test_dns_name_resolving_to_a_private_address_is_refused() -> None:
    guard = WebhookGuard(resolver=resolver({"evil.example.com": ["10.0.0.7"]}))
    with pytest.raises(BlockedDestination, match="non-public"):
        guard.check("https://evil.example.com/hook")


def test_one_private_address_among_public_ones_is_refused() -> None:
    guard = WebhookGuard(resolver=resolver({"mixed.example.com": ["8.8.8.8", "127.0.0.1"]}))
    with pytest.raises(BlockedDestination):
        guard.check("https://mixed.example.com/")


def test_metadata_literal_is_refused_without_lookup() -> None:
    resolve = resolver({})
    guard = WebhookGuard(resolver=resolve)
    with pytest.raises(BlockedDestination):
        guard.check("http://169.254.169.254/latest/meta-data/")
    with pytest.raises(BlockedDestination):
        guard.check("https://[::ffff:169.254.169.254]/")
    assert resolve.calls == []


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("ftp://hooks.example.com/x", "scheme 'ftp'"),
        ("file:///etc/passwd", "scheme 'file'"),
        ("http://hooks.example.com/x", "plain http"),
        ("https:///nohost", "no host"),
        ("https://user:pw@hooks.example.com/", "credentials"),
        ("https://hooks.example.com:99999/", "invalid webhook URL"),
    ],
)
def test_bad_urls_are_refused(url: str, message: str) -> None:
    guard = WebhookGuard(resolver=resolver({"hooks.example.com": ["8.8.8.8"]}))
    with pytest.raises(BlockedDestination, match=message):
        guard.check(url)


def test_public_https_target_passes_with_its_addresses() -> None:
    guard = WebhookGuard(resolver=resolver({"hooks.example.com": ["8.8.8.8", "8.8.4.4"]}))
    target = guard.check("https://Hooks.Example.com./x?y=1")
    assert (target.scheme, target.host, target.port) == ("https", "hooks.example.com", 443)
    assert target.addresses == ("8.8.8.8", "8.8.4.4")


def test_allow_listed_host_may_be_private_and_plain_http() -> None:
    guard = WebhookGuard(
        allow_hosts=["Internal.Service"], resolver=resolver({"internal.service": ["10.1.1.1"]})
    )
    target = guard.check("http://internal.service:8080/hook")
    assert target.addresses == ("10.1.1.1",) and target.port == 8080


# --- the pinned sender against real local servers ---------------------------------------


class _Recorder(http.server.BaseHTTPRequestHandler):
    seen: ClassVar[list[dict[str, Any]]] = []
    status = 200

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length", 0))
        _Recorder.seen.append(
            {"path": self.path, "headers": dict(self.headers), "body": self.rfile.read(length)}
        )
        self.send_response(_Recorder.status)
        if _Recorder.status in (301, 302, 307):
            self.send_header("location", "http://127.0.0.1:1/elsewhere")
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[http.server.HTTPServer]:
    _Recorder.seen = []
    _Recorder.status = 200
    srv = http.server.HTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()


def test_sender_connects_to_the_checked_address_with_the_url_host(
    server: http.server.HTTPServer,
) -> None:
    port = server.server_address[1]
    resolve = resolver({"hooks.internal": ["127.0.0.1"]})
    sender = PinnedHttpSender(WebhookGuard(["hooks.internal"], resolve))
    response = sender.send(
        "POST",
        f"http://hooks.internal:{port}/in?x=1",
        {"content-type": "application/json", "idempotency-key": "req-1"},
        b'{"a":1}',
        5.0,
    )
    assert response.status == 200
    (request,) = _Recorder.seen
    assert request["path"] == "/in?x=1"
    assert request["headers"]["Host"] == f"hooks.internal:{port}"
    assert request["headers"]["idempotency-key"] == "req-1"
    assert request["body"] == b'{"a":1}'
    assert resolve.calls == ["hooks.internal"]  # one lookup: no rebinding window


def test_sender_refuses_a_private_answer_before_connecting(server: http.server.HTTPServer) -> None:
    port = server.server_address[1]
    sender = PinnedHttpSender(WebhookGuard([], resolver({"rebind.example.com": ["127.0.0.1"]})))
    with pytest.raises(BlockedDestination):
        sender.send("POST", f"https://rebind.example.com:{port}/", {}, b"{}", 5.0)
    assert _Recorder.seen == []


def test_sender_does_not_follow_redirects(server: http.server.HTTPServer) -> None:
    _Recorder.status = 302
    port = server.server_address[1]
    sender = PinnedHttpSender(
        WebhookGuard(["hooks.internal"], resolver({"hooks.internal": ["127.0.0.1"]}))
    )
    response = sender.send("POST", f"http://hooks.internal:{port}/", {}, b"{}", 5.0)
    assert response.status == 302
    assert response.headers["location"].endswith("/elsewhere")
    assert len(_Recorder.seen) == 1


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl CLI")
def test_https_uses_sni_and_verifies_the_url_host(tmp_path: Path) -> None:
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=hooks.test",
            "-addext",
            "subjectAltName=DNS:hooks.test",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    sni: list[str | None] = []
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(cert, key)
    server_ctx.sni_callback = lambda sock, name, ctx: sni.append(name)  # type: ignore[assignment,misc]
    _Recorder.seen = []
    _Recorder.status = 201
    srv = http.server.HTTPServer(("127.0.0.1", 0), _Recorder)
    srv.socket = server_ctx.wrap_socket(srv.socket, server_side=True)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        client_ctx = ssl.create_default_context(cafile=str(cert))
        guard = WebhookGuard(["hooks.test"], resolver({"hooks.test": ["127.0.0.1"]}))
        sender = PinnedHttpSender(guard, client_ctx)
        port = srv.server_address[1]
        assert sender.send("POST", f"https://hooks.test:{port}/x", {}, b"{}", 5.0).status == 201
        assert sni == ["hooks.test"]
        # The certificate is checked against the URL's host, not the address.
        other = PinnedHttpSender(
            WebhookGuard(["other.test"], resolver({"other.test": ["127.0.0.1"]})), client_ctx
        )
        with pytest.raises(ssl.SSLCertVerificationError):
            other.send("POST", f"https://other.test:{port}/x", {}, b"{}", 5.0)
    finally:
        srv.shutdown()
        srv.server_close()
