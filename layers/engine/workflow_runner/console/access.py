"""Who may use the console: the Host names it answers, and the operator token it asks for.

DNS rebinding: a page at attacker.example re-points its own name at the console's
address; the browser then treats the console as attacker.example's origin and lets the
page read it (a confirmation page's CSRF token included) and post its forms. Those
requests still say `Host: attacker.example`, so every bind keeps an allow-list of Host
values: the loopback names on a loopback bind, the address given with `--host`, this
machine's own addresses on a wildcard bind, and the names the operator adds. No bind
answers any Host.

The operator token, as Jupyter's: who can reach a bind other than loopback is not
known, so such a console answers only a browser that shows the token, once (the `?token=`
link it prints, or the form on the page that asks for it), then as an HttpOnly,
SameSite=Strict cookie for this console's port. The cookie holds an HMAC of the token,
never the token; every comparison takes constant time.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import socket
from collections.abc import Iterable
from ipaddress import IPv6Address, ip_address
from urllib.parse import quote, urlencode

from ..errors import InvalidInput
from .html import el, join
from .layout import notice, page

TOKEN_ENV = "WFR_CONSOLE_TOKEN"
MIN_TOKEN_LENGTH = 16
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
# Browsers leave these ports out of the Host header (http's and https's defaults).
DEFAULT_PORTS = (80, 443)
_LABEL = r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?"
_NAME = re.compile(rf"{_LABEL}(?:\.{_LABEL})*")
_LOCAL_PATH = re.compile(r"/(?![/\\])[\x21-\x7e]*")


def is_loopback(address: str) -> bool:
    """Whether an address (or `localhost`) is this machine's loopback."""
    if address.lower() == "localhost":
        return True
    try:
        return ip_address(address.strip("[]")).is_loopback
    except ValueError:
        return False


def is_wildcard(address: str) -> bool:
    """Whether binding an address listens on every one of the machine's (0.0.0.0, ::, "")."""
    if address == "":
        return True
    try:
        return ip_address(address.strip("[]")).is_unspecified
    except ValueError:
        return False


def host_name(value: str) -> tuple[str, int | None]:
    """A Host name as a browser writes it, and its port if one is given.

    `NAME`, `NAME:PORT`, an IPv4 address, an IPv6 address (bare or in brackets) or
    `[IPv6]:PORT`; lower case, IPv6 compressed and in brackets.

    Raises:
        InvalidInput: the value is no host name or address (a wildcard included).
    """
    text = value.strip().lower()
    problem = InvalidInput(
        f"{value!r}: not a host name or address (NAME, NAME:PORT, an IP address, [IPv6]:PORT)"
    )
    port_text: str | None = None
    if text.startswith("["):
        address, _, rest = text[1:].partition("]")
        if rest:
            if not rest.startswith(":"):
                raise problem
            port_text = rest[1:]
    elif text.count(":") > 1:
        address = text
    else:
        address, colon, after = text.partition(":")
        port_text = after if colon else None
    port = None
    if port_text is not None:
        if not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise problem
        port = int(port_text)
    try:
        ip = ip_address(address)
    except ValueError:
        if ":" in address or "[" in text or not _NAME.fullmatch(address):
            raise problem from None
        return address, port
    if ip.is_unspecified:
        raise problem
    return (f"[{ip.compressed}]" if isinstance(ip, IPv6Address) else ip.compressed), port


def machine_addresses(ipv6: bool) -> list[str]:
    """This machine's addresses that can be found portably: those its host name resolves
    to and the source address of its default route (IPv6 too when `ipv6`); never
    link-local or loopback. An address on another interface may be missing: the operator
    adds it with `--allow-host`."""
    families = [socket.AF_INET, socket.AF_INET6] if ipv6 else [socket.AF_INET]
    found: list[str] = []
    for family in families:
        try:
            infos = socket.getaddrinfo(socket.gethostname(), None, family, socket.SOCK_STREAM)
        except OSError:
            infos = []
        found.extend(str(info[4][0]) for info in infos)
        probe = "192.0.2.1" if family == socket.AF_INET else "2001:db8::1"
        try:
            with socket.socket(family, socket.SOCK_DGRAM) as udp:
                udp.connect((probe, 9))  # picks the route; a UDP connect sends nothing
                found.append(str(udp.getsockname()[0]))
        except OSError:
            pass
    kept: list[str] = []
    for address in found:
        ip = ip_address(address.split("%", 1)[0])
        name = f"[{ip.compressed}]" if isinstance(ip, IPv6Address) else ip.compressed
        if not (ip.is_link_local or ip.is_loopback or ip.is_unspecified) and name not in kept:
            kept.append(name)
    return kept


def allowed_hosts(
    host: str, port: int, names: Iterable[str] = (), bound: str | None = None
) -> frozenset[str]:
    """The Host header values a console bound to host:port answers.

    Args:
        host: the address (or name) it was told to bind.
        port: the port it listens on.
        names: more names it is reached by (`--allow-host`), each `NAME` (on `port`) or
            `NAME:PORT` (through a proxy on another port).
        bound: the address the socket got, when `host` is a name that resolved to it.

    Returns:
        Each name with its port; with port 80 or 443 the bare name too (browsers leave
        those out). A loopback bind adds 127.0.0.1, localhost and [::1]; a wildcard bind
        (0.0.0.0, ::) adds those and `machine_addresses`, never the wildcard itself.

    Raises:
        InvalidInput: a name is no host name or address.
    """
    given = [host_name(value) for value in names]  # first: a bad name fails before lookups
    address = bound or host
    base: list[str] = []
    if is_wildcard(address):
        base = [*LOOPBACK_HOSTS, *machine_addresses(ipv6=":" in address)]
    else:
        base = [host] + ([bound] if bound else [])
        if is_loopback(address):
            base += LOOPBACK_HOSTS
    hosts: set[str] = set()
    for name, own_port in [*(host_name(value) for value in base), *given]:
        effective = own_port or port
        hosts.add(f"{name}:{effective}")
        if effective in DEFAULT_PORTS:
            hosts.add(name)
    return frozenset(hosts)


def check_token(token: str) -> None:
    """Raises InvalidInput when a token given to the console is too short to be secret."""
    if len(token) < MIN_TOKEN_LENGTH:
        raise InvalidInput(
            f"the operator token must be at least {MIN_TOKEN_LENGTH} characters long "
            "(for example: python3 -c 'import secrets; print(secrets.token_urlsafe(32))')"
        )


def new_token() -> str:
    """A token for one console process (32 random bytes, URL-safe)."""
    return secrets.token_urlsafe(32)


def token_matches(given: str, token: str) -> bool:
    return hmac.compare_digest(given.encode(), token.encode())


def _cookie_value(token: str) -> str:
    return hmac.new(token.encode(), b"wfr console cookie", hashlib.sha256).hexdigest()


def token_cookie(name: str, token: str) -> str:
    """The Set-Cookie value that lets this browser in until it closes."""
    return f"{name}={_cookie_value(token)}; Path=/; HttpOnly; SameSite=Strict"


def presents_token(cookie_header: str, name: str, token: str) -> bool:
    """Whether a request's Cookie header carries this console's token cookie."""
    expected = _cookie_value(token).encode()
    for part in cookie_header.split(";"):
        key, _, value = part.strip().partition("=")
        if key == name and hmac.compare_digest(value.encode(), expected):
            return True
    return False


def local_path(target: str) -> str:
    """`target` when it is a path on this console, else `/` (never another site)."""
    return target if _LOCAL_PATH.fullmatch(target) else "/"


def link_back(path: str, query: dict[str, str]) -> str:
    """The console path a request asked for, with its query (the token left out)."""
    rest = {k: v for k, v in query.items() if k != "token"}
    return quote(path) + (f"?{urlencode(rest)}" if rest else "")


def token_page(next_path: str, wrong: bool) -> str:
    """The page a request without the operator token gets: how to get in."""
    body = join(
        [
            el("h1", "Operator token required"),
            notice("error", "That is not the token this console was started with.")
            if wrong
            else "",
            el(
                "p",
                "This console shows and does nothing without its operator token. Open the link ",
                el("code", "wfr console"),
                " printed when it started (",
                el("code", "http://HOST:PORT/?token=…"),
                "), or, when it was started with ",
                el("code", TOKEN_ENV),
                " set, enter that value here:",
            ),
            el(
                "form",
                el(
                    "label",
                    el("span", "Token"),
                    el("input", type="password", name="token", autocomplete="off", required=True),
                ),
                el("input", type="hidden", name="next", value=local_path(next_path)),
                el(
                    "div",
                    el("button", "Enter", type="submit", class_="btn primary"),
                    class_="buttons",
                ),
                method="post",
                action="/login",
                class_="confirm",
            ),
            el(
                "p",
                "This browser then keeps a cookie for this console until it is closed.",
                class_="muted small",
            ),
        ]
    )
    return page(None, "Operator token required", body)
