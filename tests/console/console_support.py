"""Helpers for the console tests: a WSGI client (no server needed) and a database with
runs in every state, made through the engine with the sample workflows."""

from __future__ import annotations

import io
import re
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import sample_workflows  # noqa: F401  (registers the samples in the default registry)
from workflow_runner.console import ConsoleApp, ConsoleConfig, allowed_hosts
from workflow_runner.definition import WorkflowRegistry, default_registry
from workflow_runner.definition.dsl import DomainEvent
from workflow_runner.engine import ingest_domain_event, project_pending, resume_run
from workflow_runner.engine.cancel import cancel_run
from workflow_runner.store import Store

from tests.support import TENANT_A, TENANT_B

ROOT = Path(__file__).resolve().parents[2]
T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
HOST = "127.0.0.1:8080"


@dataclass
class Page:
    status: int
    headers: dict[str, str]
    text: str

    @property
    def location(self) -> str:
        return self.headers.get("Location", "")

    def csrf(self) -> str:
        found = re.search(r'name="csrf" value="([^"]+)"', self.text)
        assert found, "the page has no CSRF field"
        return found.group(1)


@dataclass
class Client:
    """Calls the WSGI application directly, the way a browser's requests would arrive."""

    app: ConsoleApp
    host: str = HOST

    def request(
        self,
        method: str,
        path: str,
        query: dict[str, str] | None = None,
        form: dict[str, str] | None = None,
        host: str | None = None,
        origin: str | None = None,
        cookie: str | None = None,
    ) -> Page:
        body = urlencode(form or {}).encode()
        environ: dict[str, Any] = {
            "REQUEST_METHOD": method,
            "PATH_INFO": path,
            "QUERY_STRING": urlencode(query or {}),
            "HTTP_HOST": self.host if host is None else host,
            "CONTENT_LENGTH": str(len(body)),
            "CONTENT_TYPE": "application/x-www-form-urlencoded",
            "wsgi.input": io.BytesIO(body),
        }
        if origin is not None:
            environ["HTTP_ORIGIN"] = origin
        if cookie is not None:
            environ["HTTP_COOKIE"] = cookie
        answer: dict[str, Any] = {}

        def start_response(status: str, headers: list[tuple[str, str]]) -> None:
            answer["status"] = int(status.split()[0])
            answer["headers"] = dict(headers)

        chunks = self.app(environ, start_response)
        return Page(answer["status"], answer["headers"], b"".join(chunks).decode())

    def get(self, path: str, **query: str) -> Page:
        return self.request("GET", path, query)

    def post(self, path: str, form: dict[str, str], **kw: Any) -> Page:
        return self.request("POST", path, form=form, **kw)


def console(
    db_url: str, allow_actions: bool = False, registry: WorkflowRegistry | None = None
) -> Client:
    config = ConsoleConfig(
        database_url=db_url,
        registry=registry or default_registry(),
        allow_actions=allow_actions,
        template=ROOT / "template.yaml",
        allowed_hosts=allowed_hosts("127.0.0.1", 8080),
        database_label="test database",
    )
    return Client(ConsoleApp(config))


def send(
    store: Store, type: str, detail: dict[str, Any], now: datetime = T0, tenant: str = TENANT_A
) -> str:
    """Ingest one domain event, project, and return the id of the run it started
    (the event's id derives from its content: sending it again starts nothing)."""
    event_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{type}|{sorted(detail.items())}|{tenant}"))
    event = DomainEvent(event_id, type, {"tenantId": tenant, **detail}, tenant, now, "tests")
    result = ingest_domain_event(store, event, now, default_registry())
    project_pending(store, now)
    return result.started[0].run_id if result.started else ""


@dataclass
class Runs:
    """One run per state, by name."""

    ids: dict[str, str] = field(default_factory=dict)
    tenants: dict[str, str] = field(default_factory=dict)


def populate(store: Store, start: datetime = T0) -> Runs:
    """Runs in every state, in two tenants: waiting (timer, event), failed, completed,
    cancelled; the first starts at `start`, the last changes 1 h 25 min later."""
    runs = Runs()

    def add(name: str, run_id: str, tenant: str = TENANT_A) -> None:
        runs.ids[name] = run_id
        runs.tenants[name] = tenant

    add(
        "onboarding",
        send(store, "user.signed-up", {"userId": "ada", "email": "ada@example.com"}, now=start),
    )
    add(
        "onboarding-b",
        send(
            store,
            "user.signed-up",
            {"userId": "bob", "email": "b@example.com"},
            now=start,
            tenant=TENANT_B,
        ),
        TENANT_B,
    )
    order = {"orderId": "r-3", "total": 12, "email": "c@example.com"}
    add("order", send(store, "order.placed", order, now=start + timedelta(minutes=1)))
    cancelled = {"orderId": "r-4", "total": 5, "email": "d@example.com"}
    add("cancelled", send(store, "order.placed", cancelled, now=start + timedelta(minutes=2)))
    cancel_run(store, TENANT_A, runs.ids["cancelled"], start + timedelta(minutes=3), "test")
    done = {"sku": "sku-1", "revision": 1}  # inventory-sync completes in its first pass
    add("completed", send(store, "inventory.changed", done, now=start + timedelta(minutes=4)))
    sku = {"sku": "sku-9", "revision": 1, "failAttempts": 9}
    add("failed", send(store, "inventory.changed", sku, now=start + timedelta(minutes=5)))
    now = start + timedelta(minutes=5)
    for _ in range(4):
        now += timedelta(minutes=20)
        resume_run(store, TENANT_A, runs.ids["failed"], 0, now, registry=default_registry())
    project_pending(store, now)
    return runs
