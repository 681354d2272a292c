"""One redaction policy for every log line that carries exception text from user code
or a provider: the class and a short hash by default, the full text only when the
operator opts in (LOG_EXCEPTION_TEXT=true) (issue 11, item 9)."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from workflow_runner import ManualClock, define_workflow, on_event, redaction
from workflow_runner import engine as ops
from workflow_runner.aws.inprocess import CapturedMailer, InMemoryResumeQueue, RecordingHttpSender
from workflow_runner.definition import WorkflowRegistry
from workflow_runner.engine.dispatcher import dispatch_pending
from workflow_runner.engine.tasks import TaskPorts
from workflow_runner.engine.worker import work
from workflow_runner.local.runtime import LocalRuntime
from workflow_runner.store import Store
from workflow_runner.webhook_guard import WebhookGuard

from tests.support import TENANT_A, event

SECRET = "order of jane@example.com, card 4111 1111 1111 1111, declined"
HIDDEN = re.compile(r"^ValueError \(text hash [0-9a-f]{8}\)$")
TEMPLATE = Path(__file__).resolve().parents[2] / "template.yaml"


@pytest.fixture(autouse=True)
def default_policy() -> Iterator[None]:
    redaction.configure(None)
    yield
    redaction.configure(None)


def _log_text(caplog: pytest.LogCaptureFixture) -> str:
    """Everything the captured records carry: message and every extra attribute."""
    return "\n".join(
        f"{r.getMessage()} {' '.join(str(v) for v in vars(r).values())}" for r in caplog.records
    )


def _details(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [str(r.detail) for r in caplog.records if hasattr(r, "detail")]


def _declines(ctx: Any) -> None:
    raise ValueError(SECRET)


def _register(registry: WorkflowRegistry) -> None:
    registry.register(
        define_workflow(
            name="declined",
            trigger=on_event("card.charged"),
            idempotency_key=lambda e: e.payload["k"],
            register=False,
            steps=lambda s: [s.compute("charge", _declines)],
        )
    )
    registry.register(
        define_workflow(
            name="picky",
            trigger=on_event("card.refunded", filter=_declines),
            register=False,
            steps=lambda s: [s.return_({"isSuccess": True})],
        )
    )


def test_a_failing_step_logs_its_class_and_a_hash_not_its_text(
    store: Store, registry: WorkflowRegistry, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    _register(registry)
    caplog.set_level(logging.INFO)
    ops.ingest_domain_event(store, event("card.charged", {"k": "1"}), clock.now(), registry)
    ops.ingest_domain_event(store, event("card.refunded", {"k": "2"}), clock.now(), registry)

    text = _log_text(caplog)
    assert "jane@example.com" not in text and "4111 1111" not in text
    details = _details(caplog)
    assert len(details) == 2 and all(HIDDEN.match(d) for d in details), details
    # The same text gives the same hash, so equal failures can be told apart and counted.
    assert details[0] == details[1]


def test_the_operator_opts_in_to_the_full_text(
    store: Store, registry: WorkflowRegistry, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    _register(registry)
    redaction.configure(True)
    caplog.set_level(logging.INFO)
    ops.ingest_domain_event(store, event("card.charged", {"k": "1"}), clock.now(), registry)
    assert _details(caplog) == [f"ValueError: {SECRET}"]


def test_a_provider_error_in_the_dispatcher_follows_the_same_policy(
    store: Store, registry: WorkflowRegistry, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    registry.register(
        define_workflow(
            name="mailer",
            trigger=on_event("mail.wanted"),
            register=False,
            steps=lambda s: [s.mail_send(to="jane@example.com", subject="s", body="b")],
        )
    )
    ops.ingest_domain_event(store, event("mail.wanted", {}), clock.now(), registry)

    class RefusingMailer(CapturedMailer):
        def send_mail(self, request_id: str, sender: str, to: Any, subject: str, body: str) -> str:
            raise ValueError(SECRET)

    caplog.set_level(logging.INFO)
    dispatch_pending(
        store,
        clock.now,
        RefusingMailer(),
        None,
        WebhookGuard(),
        mail_sender="a@example.org",  # type: ignore[arg-type]
    )
    assert "jane@example.com" not in _log_text(caplog)
    assert [d for d in _details(caplog) if HIDDEN.match(d)], _details(caplog)


@pytest.mark.parametrize(
    ("opt_in", "shown"), [(False, HIDDEN), (True, re.compile(f"^ValueError: {re.escape(SECRET)}$"))]
)
def test_a_failing_task_attempt_on_the_worker_follows_the_same_policy(
    store: Store,
    registry: WorkflowRegistry,
    clock: ManualClock,
    caplog: pytest.LogCaptureFixture,
    opt_in: bool,
    shown: re.Pattern[str],
) -> None:
    registry.register(
        define_workflow(
            name="charging",
            trigger=on_event("card.queued"),
            register=False,
            steps=lambda s: [s.task("charge", _declines)],
        )
    )
    ops.ingest_domain_event(store, event("card.queued", {}), clock.now(), registry)
    ops.project_pending(store, clock.now())
    redaction.configure(opt_in)
    caplog.set_level(logging.INFO)
    work(
        store,
        TaskPorts(registry, CapturedMailer(), RecordingHttpSender(), WebhookGuard()),
        InMemoryResumeQueue(clock),
        clock.now,
        lambda: 60.0,
    )
    attempts = [r for r in caplog.records if r.getMessage() == "task attempt failed"]
    assert attempts and all(shown.match(str(r.detail)) for r in attempts), _details(caplog)
    assert ("jane@example.com" in _log_text(caplog)) is opt_in


@pytest.mark.parametrize(("opt_in", "visible"), [(None, True), ("true", True), ("false", False)])
def test_the_local_runtime_applies_the_setting_to_the_handlers(
    store: Store,
    registry: WorkflowRegistry,
    clock: ManualClock,
    caplog: pytest.LogCaptureFixture,
    opt_in: str | None,
    visible: bool,
) -> None:
    _register(registry)
    environ = {} if opt_in is None else {"LOG_EXCEPTION_TEXT": opt_in}
    local = LocalRuntime(store, registry, TEMPLATE, start=clock.now(), environ=environ)
    caplog.set_level(logging.INFO, logger="workflow_runner")
    local.put_event(
        local.envelope(
            {
                "Source": "shop",
                "DetailType": "card.charged",
                "Detail": f'{{"tenantId": "{TENANT_A}", "k": "9"}}',
            }
        )
    )
    local.set_now(clock.now() + timedelta(minutes=1))
    # Locally the text is what a developer needs: shown unless turned off (issue 31).
    assert ("jane@example.com" in _log_text(caplog)) is visible
    # The policy the handlers set is not left behind for the rest of the process.
    assert redaction.configured() is None
