"""Webhook redirects of the local runtime (WFR_WEBHOOK_REDIRECTS): webhooks to the
listed hosts go to a local URL instead (e.g. the samples' hooks.example.com to
`wfr local sink` on 127.0.0.1), and the webhook guard resolves those hosts there."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from urllib.parse import urlsplit, urlunsplit

from ..ports import HttpResponse, HttpSender
from ..webhook_guard import system_resolver
from . import routes as r


class RedirectingHttpSender:
    """Sends webhooks for real, but for the listed hosts to a local URL instead
    (e.g. the samples' hooks.example.com to a sink on 127.0.0.1)."""

    def __init__(self, inner: HttpSender, redirects: Mapping[str, str]) -> None:
        self._inner = inner
        self._redirects = {host.lower(): base.rstrip("/") for host, base in redirects.items()}

    def rewrite(self, url: str) -> str:
        parts = urlsplit(url)
        base = self._redirects.get((parts.hostname or "").lower())
        if base is None:
            return url
        target = urlsplit(base)
        return urlunsplit((target.scheme, target.netloc, parts.path, parts.query, ""))

    def send(
        self, method: str, url: str, headers: dict[str, str], body: bytes, timeout: float
    ) -> HttpResponse:
        return self._inner.send(method, self.rewrite(url), headers, body, timeout)


def parse_redirects(text: str | None) -> dict[str, str]:
    """`host=http://127.0.0.1:8080,other=...` (WFR_WEBHOOK_REDIRECTS) as a mapping.

    Raises:
        RoutingError: an item is not host=URL.
    """
    redirects: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in (text or "").split(","))):
        host, sep, url = item.partition("=")
        if not sep or not host or urlsplit(url).scheme not in ("http", "https"):
            raise r.RoutingError(f"WFR_WEBHOOK_REDIRECTS: expected host=http://..., got {item!r}")
        redirects[host.strip().lower()] = url.strip()
    return redirects


def redirecting_resolver(redirects: Mapping[str, str]) -> Callable[[str, int], Sequence[str]]:
    """The guard resolves redirected hosts to where they are redirected."""

    def resolve(host: str, port: int) -> Sequence[str]:
        base = redirects.get(host.lower())
        if base is not None:
            return [urlsplit(base).hostname or "127.0.0.1"]
        return system_resolver(host, port)

    return resolve
