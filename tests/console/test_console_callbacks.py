"""The console says when a run waits for a callback, and never shows its token."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from console_support import T0, console, send
from workflow_runner import Event, define_workflow, on_event
from workflow_runner.callback_tokens import callback_links, tokens_in
from workflow_runner.definition import default_registry
from workflow_runner.store import Store

from tests.support import TENANT_A

APPROVAL = define_workflow(
    name="console-approval",
    trigger=on_event("console-approval.requested"),
    idempotency_key=Event.payload["id"],
    steps=lambda s: [
        s.mail_send(to="boss@example.com", subject="Approve?", body=lambda c: c.callback.url),
        s.wait_for_callback("decision", timeout="P2D"),
    ],
    register=False,
)


@pytest.fixture(autouse=True)
def registered() -> Iterator[None]:
    default_registry().register(APPROVAL)
    yield
    default_registry().unregister(APPROVAL.name)


def test_a_run_waiting_for_a_callback_says_so_without_its_token(db_url: str, store: Store) -> None:
    with callback_links("https://callbacks.example.com/"):
        run_id = send(store, "console-approval.requested", {"id": "a-1"})
    row = store.conn.execute("SELECT request FROM dispatch_outbox").fetchone()
    assert row is not None
    (token,) = tokens_in(row["request"]["body"])

    page = console(db_url).get(f"/runs/{run_id}", tenant=TENANT_A)

    assert page.status == 200
    assert "Waiting at step 1 for a callback (result &#x27;decision&#x27;), until" in page.text
    assert "wait for a callback (result &#x27;decision&#x27;) until 2026-01-07" in page.text
    assert token not in page.text and "callbackSecret" not in page.text
    assert T0.isoformat()[:10] in page.text
