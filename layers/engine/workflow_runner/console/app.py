"""The console as a WSGI application, and the server `wfr console` runs it in.

Standard library only (wsgiref): no runtime dependency for the engine layer. Pages are
rendered on the server; the CSS and the small script are package data. Safety (the
first two in access.py):

- every bind answers only requests whose Host header names it (loopback names, the
  address given, the names added): a web page elsewhere cannot reach it by DNS
  rebinding; the check comes before anything else;
- bound to anything but loopback (or told to), it shows and does nothing for a browser
  without its operator token (a link with `?token=`, then a cookie), as Jupyter's;
- it is read-only unless started with actions enabled;
- every action is a POST carrying the process's CSRF token (from the confirmation page,
  which other sites cannot read), from the console's own origin;
- responses forbid framing, inline scripts and other origins (Content-Security-Policy).
"""

from __future__ import annotations

import hmac
import logging
import queue
import re
import secrets
import socket
import sys
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from socketserver import ThreadingMixIn
from typing import Any
from urllib.parse import parse_qsl
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from ..callback_tokens import callback_links
from ..clock import SystemClock
from ..definition import WorkflowRegistry
from ..engine.run_lookup import AmbiguousRunId, resolve_run
from ..errors import InvalidInput, RunNotFound, StoreError
from ..store import RunSummary, Store, connect
from . import access, actions, deliveries, limits_page, migrate, run_view, views
from .layout import View, error_page

log = logging.getLogger("workflow_runner")

MAX_FORM_BYTES = 64 * 1024
STATIC = {
    "console.css": "text/css; charset=utf-8",
    "console.js": "text/javascript; charset=utf-8",
    "favicon.svg": "image/svg+xml",
}
_RUN_PATH = re.compile(r"^/runs/([0-9A-Fa-f-]{4,36})(?:/(cancel|resume|redrive))?$")
_REDELIVER_PATH = re.compile(r"^/deliveries/([0-9A-Fa-f-]{36})/redeliver$")
_MIGRATE_PATH = re.compile(r"^/workflows/([^/]+)/migrate$")
_HEADERS = [
    (
        "Content-Security-Policy",
        "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; "
        "form-action 'self'; base-uri 'none'",
    ),
    ("X-Content-Type-Options", "nosniff"),
    ("X-Frame-Options", "DENY"),
    # same-origin, not no-referrer: with no-referrer a browser sends `Origin: null` on the
    # action forms, and the origin check below would refuse every action.
    ("Referrer-Policy", "same-origin"),
    ("Cache-Control", "no-store"),
]


class StorePool:
    """A few database connections shared by the server's request threads."""

    def __init__(self, url: str, size: int = 4) -> None:
        self.url = url
        self._idle: queue.LifoQueue[Store] = queue.LifoQueue(maxsize=size)

    @contextmanager
    def store(self) -> Iterator[Store]:
        try:
            store = self._idle.get_nowait()
        except queue.Empty:
            store = connect(self.url, connect_timeout=10)
        try:
            yield store
        finally:
            if not store.closed:
                try:
                    self._idle.put_nowait(store)
                except queue.Full:
                    store.close()

    def close(self) -> None:
        while True:
            try:
                self._idle.get_nowait().close()
            except queue.Empty:
                return


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    form: dict[str, str]
    host: str
    origin: str | None
    cookie: str = ""


@dataclass
class Response:
    status: str
    body: bytes = b""
    content_type: str = "text/html; charset=utf-8"
    headers: list[tuple[str, str]] = field(default_factory=list)


_STATUS = {
    200: "200 OK",
    303: "303 See Other",
    400: "400 Bad Request",
    403: "403 Forbidden",
    404: "404 Not Found",
    405: "405 Method Not Allowed",
    409: "409 Conflict",
    413: "413 Content Too Large",
    421: "421 Misdirected Request",
    500: "500 Internal Server Error",
    503: "503 Service Unavailable",
}


def _html(code: int, text: str) -> Response:
    return Response(_STATUS[code], text.encode())


@dataclass
class ConsoleConfig:
    """How a console serves: its database, workflows, whether actions are on, and who
    may use it.

    `allowed_hosts` are the Host header values it answers; `make_console_server` sets
    them from the bind and `allow_host_names` (None until then: it answers none).
    `token` is the operator token every page but the static files asks for (None: none
    asked for); `make_console_server` makes one up for a bind other than loopback, or
    for any bind with `require_token`. `token_cookie` names the cookie that carries it.
    """

    database_url: str
    registry: WorkflowRegistry
    allow_actions: bool = False
    template: Path | None = None
    allowed_hosts: frozenset[str] | None = None
    database_label: str = ""
    callback_base_url: str | None = None  # for the passes its actions run
    allow_host_names: tuple[str, ...] = ()
    token: str | None = None
    require_token: bool = False
    token_cookie: str = "wfr_console"


class ConsoleApp:
    """The WSGI application: `ConsoleApp(config)(environ, start_response)`."""

    def __init__(self, config: ConsoleConfig, pool: StorePool | None = None) -> None:
        self.config = config
        self.pool = pool or StorePool(config.database_url)
        self.csrf = secrets.token_urlsafe(32)

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        try:
            request = self._request(environ)
            with callback_links(self.config.callback_base_url):
                response = self.handle(request)
        except _TooLarge:
            response = _html(
                413, error_page(None, "413 Content Too Large", "The form is too large.")
            )
        headers = [
            ("Content-Type", response.content_type),
            ("Content-Length", str(len(response.body))),
        ]
        start_response(response.status, headers + _HEADERS + response.headers)
        return [response.body]

    @staticmethod
    def _request(environ: Mapping[str, Any]) -> Request:
        method = str(environ.get("REQUEST_METHOD", "GET")).upper()
        form: dict[str, str] = {}
        if method == "POST":
            length = int(environ.get("CONTENT_LENGTH") or 0)
            if length > MAX_FORM_BYTES:
                raise _TooLarge
            raw = environ["wsgi.input"].read(length) if length else b""
            form = dict(parse_qsl(raw.decode("utf-8", errors="replace"), keep_blank_values=True))
        return Request(
            method=method,
            path=str(environ.get("PATH_INFO") or "/"),
            query=dict(parse_qsl(str(environ.get("QUERY_STRING") or ""), keep_blank_values=True)),
            form=form,
            host=str(environ.get("HTTP_HOST") or ""),
            origin=environ.get("HTTP_ORIGIN"),
            cookie=str(environ.get("HTTP_COOKIE") or ""),
        )

    def handle(self, request: Request) -> Response:
        """Answer one request (never raises). Who asks is checked before the database
        is read: the Host first (421 Misdirected Request), then the operator token
        (403 with the page that says how to get in)."""
        allowed = self.config.allowed_hosts
        if allowed is None or request.host.lower() not in allowed:
            return _html(
                421,
                error_page(
                    None,
                    "421 Misdirected Request",
                    f"This console does not serve the host {request.host!r}.",
                    "If that is a name of the console's machine, start it with "
                    "`wfr console --allow-host NAME`.",
                ),
            )
        if request.path.startswith("/static/"):
            return self._static(request.path.removeprefix("/static/"))
        if request.path == "/favicon.ico":
            return self._static("favicon.svg")
        refused = self._operator_check(request)
        if refused is not None:
            return refused
        try:
            with self.pool.store() as store:
                return self._route(request, self._view(store))
        except StoreError as error:
            log.warning("console: database error", extra={"detail": str(error)})
            return _html(503, error_page(None, "503 Database unavailable", str(error)))
        except Exception:  # a bug: show a page, keep serving, print the traceback
            traceback.print_exc(file=sys.stderr)
            return _html(
                500,
                error_page(
                    None,
                    "500 Internal Server Error",
                    "Something went wrong; the traceback is on the console's terminal.",
                ),
            )

    def _operator_check(self, request: Request) -> Response | None:
        """None when the request may go on; else the answer to a request without the
        operator token, or to one that presents it (a `?token=` link, the login form),
        which sets the cookie and goes on to the page asked for without the token."""
        token = self.config.token
        if token is None:
            return None
        if request.method == "POST" and request.path == "/login":
            return self._login(request.form.get("token", ""), request.form.get("next", "/"))
        if request.method in ("GET", "HEAD") and "token" in request.query:
            return self._login(
                request.query["token"], access.link_back(request.path, request.query)
            )
        if access.presents_token(request.cookie, self.config.token_cookie, token):
            return None
        query = request.query if request.method != "POST" else {}
        return _html(403, access.token_page(access.link_back(request.path, query), wrong=False))

    def _login(self, given: str, next_path: str) -> Response:
        token = self.config.token
        if token is None or not access.token_matches(given, token):
            return _html(403, access.token_page(next_path, wrong=True))
        return Response(
            _STATUS[303],
            headers=[
                ("Location", access.local_path(next_path)),
                ("Set-Cookie", access.token_cookie(self.config.token_cookie, token)),
            ],
        )

    def _view(self, store: Store) -> View:
        local = store.local.clock()
        return View(
            store=store,
            registry=self.config.registry,
            now=local if local is not None else SystemClock().now(),
            local_clock=local,
            allow_actions=self.config.allow_actions,
            csrf=self.csrf,
            database=self.config.database_label,
            template=self.config.template,
        )

    def _static(self, name: str) -> Response:
        if name not in STATIC:
            return _html(404, error_page(None, "404 Not Found", f"No such file: {name}"))
        data = resources.files(__package__).joinpath("static", name).read_bytes()
        return Response(_STATUS[200], data, STATIC[name], [("Cache-Control", "max-age=300")])

    def _route(self, request: Request, view: View) -> Response:
        path = request.path.rstrip("/") or "/"
        if request.method not in ("GET", "HEAD", "POST"):
            return _html(405, error_page(view, "405 Method Not Allowed", request.method))
        if request.method == "POST":
            return self._post(request, view, path)
        if path == "/":
            return _html(*views.runs_page(view, request.query))
        if path == "/pending":
            return _html(*views.pending_page(view, request.query))
        if path == "/doctor":
            return _html(*views.doctor_page(view))
        if path == "/deliveries":
            return _html(*deliveries.deliveries_page(view, request.query))
        if path == "/limits":
            return _html(*limits_page.limits_page(view, request.query))
        migration = _MIGRATE_PATH.match(path)
        if migration is not None:  # the dry run, and with actions the form that does it
            return _html(*migrate.confirm_page(view, migration.group(1), request.query))
        redelivery = _REDELIVER_PATH.match(path)
        if redelivery is not None:
            if not view.allow_actions:
                return _read_only(view)
            return _html(
                *deliveries.confirm_redelivery(
                    view, redelivery.group(1), request.query.get("tenant")
                )
            )
        found = _RUN_PATH.match(path)
        if found is None:
            return _html(404, error_page(view, "404 Not Found", f"No page at {request.path}"))
        ref, action = found.groups()
        run_or_error = self._run(view, ref, request.query.get("tenant"))
        if isinstance(run_or_error, Response):
            return run_or_error
        if action is None:
            return _html(200, run_view.run_page(view, run_or_error, request.query))
        if not view.allow_actions:
            return _read_only(view)
        return _html(*actions.confirm_page(view, run_or_error, action))

    def _post(self, request: Request, view: View, path: str) -> Response:
        found = _RUN_PATH.match(path)
        redelivery = _REDELIVER_PATH.match(path)
        migration = _MIGRATE_PATH.match(path)
        if (found is None or found.group(2) is None) and redelivery is None and migration is None:
            return _html(
                405, error_page(view, "405 Method Not Allowed", "Only actions are posted.")
            )
        if not view.allow_actions:
            return _read_only(view)
        # https: through a TLS proxy named with --allow-host NAME:443 (the Host is checked).
        if request.origin is not None and request.origin not in (
            f"http://{request.host}",
            f"https://{request.host}",
        ):
            return _html(
                403, error_page(view, "403 Forbidden", "The action came from another site.")
            )
        token = request.form.get("csrf", "")
        if not hmac.compare_digest(token.encode(), self.csrf.encode()):
            return _html(
                403,
                error_page(
                    view,
                    "403 Forbidden",
                    "The form's security token is missing or stale: reload the run's page "
                    "and try again.",
                ),
            )
        if migration is not None:
            return _html(*migrate.perform(view, migration.group(1), request.form))
        if redelivery is not None:
            code, location, text = deliveries.redeliver_now(view, redelivery.group(1), request.form)
        else:
            assert found is not None
            run_or_error = self._run(view, found.group(1), request.form.get("tenant"))
            if isinstance(run_or_error, Response):
                return run_or_error
            code, location, text = actions.perform(view, run_or_error, found.group(2), request.form)
        if code == 303:
            return Response(_STATUS[303], b"", headers=[("Location", location)])
        return _html(code, text)

    @staticmethod
    def _run(view: View, ref: str, tenant: str | None) -> RunSummary | Response:
        """The run a URL names, or the page that says why there is none (or which)."""
        try:
            return resolve_run(view.store, ref, tenant or None)
        except AmbiguousRunId as error:
            return _html(200, views.ambiguous_page(view, error))
        except RunNotFound as error:
            return _html(404, error_page(view, "404 Run not found", str(error)))
        except InvalidInput as error:
            return _html(400, error_page(view, "400 Bad Request", str(error)))


class _TooLarge(Exception):
    pass


def _read_only(view: View) -> Response:
    return _html(
        403,
        error_page(
            view,
            "403 Read-only",
            "This console was started read-only.",
            "Restart it with `wfr console --allow-actions` to cancel, resume or redrive runs.",
        ),
    )


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True
    allow_reuse_address = True


class _Server6(_Server):
    address_family = socket.AF_INET6


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Requests are not logged (the console is one person's tool)."""


def make_console_server(
    config: ConsoleConfig, host: str, port: int
) -> tuple[WSGIServer, ConsoleApp]:
    """Bind the console's server (port 0: any free port) without serving yet.

    Sets `config.allowed_hosts` from the bind when None, names the token's cookie after
    the port, and makes up an operator token when the bind is not loopback (or
    `config.require_token`) and none was given.

    Raises:
        OSError: the address is taken or cannot be bound.
        InvalidInput: a name in `config.allow_host_names` is no host name, or the given
            token is too short.
    """
    for name in config.allow_host_names:
        access.host_name(name)
    if config.token is not None:
        access.check_token(config.token)
    app = ConsoleApp(config)
    server_class = _Server6 if ":" in host else _Server
    server = make_server(host, port, app, server_class=server_class, handler_class=_QuietHandler)
    address, bound = str(server.server_address[0]), int(server.server_address[1])
    if config.allowed_hosts is None:
        try:
            config.allowed_hosts = access.allowed_hosts(
                host, bound, config.allow_host_names, address
            )
        except InvalidInput:
            server.server_close()
            raise
    config.token_cookie = f"wfr_console_{bound}"
    if config.token is None and (config.require_token or not access.is_loopback(address)):
        config.token = access.new_token()
    return server, app
