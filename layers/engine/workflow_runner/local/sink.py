"""A local webhook sink: an HTTP server on 127.0.0.1 that answers every webhook the
local runtime sends and remembers what arrived — what `wfr local sink` serves and `wfr
demo` runs for the samples' hooks.example.com URLs (redirected with
WFR_WEBHOOK_REDIRECTS). Any method is answered: 200 with a small JSON body, or the
statuses scripted for a path first (`--answer /exports=503,503` fails it twice, to see
the retries).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ..errors import InvalidInput


@dataclass(frozen=True)
class ReceivedRequest:
    """One request the sink answered (`status`: what it answered)."""

    method: str
    path: str
    idempotency_key: str
    body: Any
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    received_at: datetime = field(default_factory=lambda: datetime.now(UTC))


@dataclass
class WebhookSink:
    """A running sink: its server, what it received, what is still scripted."""

    server: ThreadingHTTPServer
    thread: threading.Thread
    received: list[ReceivedRequest] = field(default_factory=list)
    answers: dict[str, list[int]] = field(default_factory=dict)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"


def parse_answers(items: list[str] | None) -> dict[str, list[int]]:
    """`--answer PATH=STATUS[,STATUS...]` options as path -> statuses.

    Raises:
        InvalidInput: an item is not PATH=STATUS,... with statuses from 100 to 599.
    """
    answers: dict[str, list[int]] = {}
    for item in items or []:
        path, sep, statuses = item.partition("=")
        try:
            codes = [int(code) for code in statuses.split(",")]
        except ValueError:
            codes = []
        if (
            not sep
            or not path.startswith("/")
            or not codes
            or not all(100 <= code <= 599 for code in codes)
        ):
            raise InvalidInput(
                f"--answer: expected PATH=STATUS[,STATUS...] such as /exports=503,200, got {item!r}"
            )
        answers.setdefault(path, []).extend(codes)
    return answers


@contextmanager
def webhook_sink(
    answers: Mapping[str, list[int]] | None = None,
    host: str = "127.0.0.1",
    port: int = 0,
    on_request: Callable[[ReceivedRequest], None] | None = None,
) -> Iterator[WebhookSink]:
    """Run a WebhookSink (on a free port unless `port` says) for the block.

    Args:
        answers: path -> statuses to answer there, in order, before answering 200.
        on_request: called with each request as it is answered (from the server's
            threads, one at a time).

    Raises:
        OSError: the address is taken or cannot be bound.
    """
    received: list[ReceivedRequest] = []
    scripted = {path: list(statuses) for path, statuses in (answers or {}).items()}
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def _record(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body: Any = json.loads(raw) if raw else None
            except ValueError:
                body = raw.decode(errors="replace")
            key = self.headers.get("idempotency-key", "")
            with lock:
                queue = scripted.get(self.path.split("?")[0]) or []
                status = queue.pop(0) if queue else 200
                request = ReceivedRequest(
                    self.command,
                    self.path,
                    key,
                    body,
                    status,
                    {k.lower(): v for k, v in self.headers.items()},
                )
                received.append(request)
                if on_request is not None:
                    on_request(request)
            answer = json.dumps({"accepted": status < 300, "request": key[:8]}).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _record

        def log_message(self, format: str, *args: Any) -> None:
            """Silence the default access log (on_request says what arrived)."""

    server = ThreadingHTTPServer((host, port), Handler)
    thread = threading.Thread(target=server.serve_forever, name="wfr-sink", daemon=True)
    thread.start()
    sink = WebhookSink(server, thread, received, scripted)
    try:
        yield sink
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
