"""The console says when a run waits for a callback, and never shows its token."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from console_support import T0, console, send
from workflow_runner import Event, define_workflow, on_event
from workflow_runner.callback_tokens import callback_links, tokens_in
from workflow_runner.definition import default_registry
from workflow_runner.engine.callbacks import heartbeat_callback
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


SIGNING = define_workflow(
    name="console-signing",
    trigger=on_event("console-signing.requested"),
    idempotency_key=Event.payload["id"],
    steps=lambda s: [
        s.create_callback("contract", timeout="P3D", heartbeat="PT1H"),
        s.mail_send(
            to="legal@example.com", subject="Sign?", body=lambda c: c.callbacks["contract"].url
        ),
        s.await_callback("contract", result_key="signed"),
    ],
    register=False,
)


@pytest.fixture
def signing() -> Iterator[None]:
    default_registry().register(SIGNING)
    yield
    default_registry().unregister(SIGNING.name)


def test_the_run_page_lists_its_callbacks_with_deadline_and_last_heartbeat(
    db_url: str, store: Store, signing: None
) -> None:
    # The console judges deadlines by the system clock: a run started tomorrow.
    start = datetime.now(UTC).replace(second=0, microsecond=0) + timedelta(days=1)
    with callback_links("https://callbacks.example.com/"):
        run_id = send(store, "console-signing.requested", {"id": "s-1"}, now=start)
    row = store.conn.execute("SELECT request FROM dispatch_outbox").fetchone()
    assert row is not None
    (token,) = tokens_in(row["request"]["body"])
    beat = start + timedelta(minutes=30)
    heartbeat_callback(store, token, beat)

    page = console(db_url).get(f"/runs/{run_id}", tenant=TENANT_A)

    assert page.status == 200
    assert (
        "Waiting at step 2 for callback &#x27;contract&#x27; (result &#x27;signed&#x27;), "
        "until the next heartbeat, due" in page.text
    )
    callbacks = page.text[page.text.index("<h2>Callbacks</h2>") :]
    callbacks = callbacks[: callbacks.index("</section>")]
    assert "contract" in callbacks and "status-waiting" in callbacks
    assert shown(beat + timedelta(hours=1)) in callbacks  # the deadline the heartbeat set
    assert shown(beat) in callbacks  # the last heartbeat
    assert ">heartbeat<" in callbacks
    assert token not in page.text


def shown(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S")
