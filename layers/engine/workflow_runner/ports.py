"""The engine's outside world, as small interfaces.

The Lambda handlers reach AWS (SQS, Lambda async invoke, SES, HTTPS) and the
database only through a `Runtime`. In AWS it is built from the environment on first
use; the local runtime and tests install their own with `set_runtime` (an in-process
queue, a manual clock, captured mail) and call the very same handlers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from .clock import Clock
from .definition import WorkflowRegistry
from .definition.hosts import DefinitionHosts
from .errors import NotConfigured, WorkflowRunnerError
from .settings import Settings
from .store import Store
from .webhook_guard import WebhookGuard


@dataclass(frozen=True)
class ResumeRequest:
    """Ask ResumeRun to resume one suspension, `delay_seconds` from now (0–900)."""

    tenant_id: str
    run_id: str
    step_index: int
    delay_seconds: int = 0
    wake_at: datetime | None = None
    force: bool = False


class ResumeQueue(Protocol):
    """Where resume requests go. A queue whose consumer holds requests that arrive
    shortly before their run is due (ResumeRun: RESUME_HOLD_SECONDS) says so with an
    `early_seconds` attribute; requests are then delayed to arrive up to that much early
    instead of up to a second late (SQS delays are whole seconds)."""

    def send(self, requests: Sequence[ResumeRequest]) -> list[ResumeRequest]:
        """Enqueue requests; return those that could not be enqueued."""
        ...


class Nudger(Protocol):
    def nudge_projection(self) -> None:
        """Ask PendingProjection to catch up soon (fire and forget)."""
        ...

    def nudge_dispatcher(self) -> None:
        """Ask StepDispatcher to deliver pending dispatch requests soon."""
        ...


class Mailer(Protocol):
    def send_mail(
        self, request_id: str, sender: str, to: Sequence[str], subject: str, body: str
    ) -> str:
        """Send one mail; return the provider's message id.

        Raises:
            PermanentDeliveryError: rejected for good.
            DeliveryOutcomeUnknown: it may or may not have been sent.
            Exception: anything else: it was not sent (worth another attempt).
        """
        ...


@dataclass(frozen=True)
class HttpResponse:
    """A webhook's answer; `body` holds at most the first 64 KB (+1 byte to tell that
    there was more)."""

    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""


class PermanentDeliveryError(WorkflowRunnerError):
    """A mailer raises it when the provider rejected a message for good (another
    attempt cannot fix it). Any other exception of a mailer means it was not sent."""


class DeliveryOutcomeUnknown(WorkflowRunnerError):
    """A mailer raises it when it cannot tell whether the provider took the message
    (a timeout after the request went out): mail is never sent twice, so such a
    delivery ends ambiguous, for an operator to check."""


class HttpSender(Protocol):
    def send(
        self, method: str, url: str, headers: dict[str, str], body: bytes, timeout: float
    ) -> HttpResponse:
        """One HTTP request, no redirects followed. Raise OSError on network failure."""
        ...


class FunctionInvoker(Protocol):
    def invoke(self, function_arn: str, payload: dict[str, Any]) -> Any:
        """Invoke a function version synchronously with a JSON payload; its JSON answer
        (how a run's work is handed to the kept version that has its definition).

        Raises:
            HostGone: no such function version (it was deleted).
            ForwardFailed: it could not be invoked, or it raised.
        """
        ...


@dataclass
class Runtime:
    """Everything a handler needs besides its input.

    Args:
        clock: business time.
        store: a warm, healthy connection (re-established when broken).
        resume_queue, nudger, mailer, http: the ports to the outside world.
        settings: the functions' configuration (default: from the environment).
        registry: the workflows (default: the modules named in WORKFLOW_MODULES).
        webhook_guard: the SSRF guard (default: from settings.webhook_allow_hosts).
        reconnect: drop the cached connection after a transient failure, so the next
            `store()` opens a fresh one (None: the store cannot be re-established).
        definition_hosts: where definitions gone from the registry still run (None: the
            function versions registered in the database; definition/hosts.py).
        invoker: how a run's work is handed to the kept function version that has its
            definition (None: kept code is only used when it is loaded here).
    """

    clock: Clock
    store: Callable[[], Store]
    resume_queue: ResumeQueue
    nudger: Nudger
    mailer: Mailer
    http: HttpSender
    settings: Settings | None = None
    registry: WorkflowRegistry | None = None
    webhook_guard: WebhookGuard | None = None
    reconnect: Callable[[], None] | None = None
    definition_hosts: DefinitionHosts | None = None
    invoker: FunctionInvoker | None = None


_runtime: Runtime | None = None
_factory: Callable[[], Runtime] | None = None


def set_runtime(runtime: Runtime | None) -> None:
    """Install the runtime handlers use (None: rebuild from the environment on next use)."""
    global _runtime
    _runtime = runtime


def installed_runtime() -> Runtime | None:
    """The runtime installed now, without building the default one."""
    return _runtime


def set_runtime_factory(factory: Callable[[], Runtime]) -> None:
    """Register how to build the default runtime (the AWS one) lazily."""
    global _factory
    _factory = factory


def get_runtime() -> Runtime:
    """The installed runtime, building the default one on first use."""
    global _runtime
    if _runtime is None:
        if _factory is None:
            raise NotConfigured("no runtime installed: call set_runtime() or set_runtime_factory()")
        _runtime = _factory()
    return _runtime
