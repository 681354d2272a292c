"""In-process stand-ins for the AWS ports, for tests and the local runtime.

The same Lambda handlers run against these: a resume queue in memory that honours
delays on a (manual) clock, a nudger that records nudges for the driver to act on,
a mailer that captures mail, and an HTTP sender that records requests and answers
from a function. ``build_inprocess_runtime`` wires them into a ``Runtime``.

Typical use::

    rt = build_inprocess_runtime(store, clock, database_url=url)
    set_runtime(rt)
    handler(event, FakeLambdaContext())          # any functions/<name>/app.py handler
    rt.resume_queue.sqs_event(rt.resume_queue.receive())  # -> ResumeRun's input

or, for the whole stack with routing by template.yaml's patterns::

    app = InProcessApp(rt, load_handlers("template.yaml"), event_routes(load_template(...)))
    app.put_event(eventbridge_event)   # routed, handled, settled
    app.advance(timedelta(days=1))     # timers, delayed messages, retries, cron
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from ..clock import Clock
from ..definition import WorkflowRegistry
from ..engine.enqueue import MAX_DELAY_SECONDS
from ..errors import DidNotSettle
from ..ports import HttpResponse, ResumeRequest, Runtime
from ..settings import Settings
from ..store import Store
from ..webhook_guard import WebhookGuard
from .ports import resume_message
from .template import Route


class InMemoryResumeQueue:
    """A ResumeQueue whose messages become visible ``delay_seconds`` after sending.

    Args:
        clock: decides visibility.
        refuse: optional predicate; requests it accepts are refused (to test the
            due scan's lease release).
    """

    def __init__(self, clock: Clock, refuse: Callable[[ResumeRequest], bool] | None = None) -> None:
        self._clock = clock
        self._refuse = refuse
        self._messages: list[tuple[datetime, int, ResumeRequest]] = []
        self._seq = 0
        self.sent: list[ResumeRequest] = []  # every accepted request, in order

    def send(self, requests: Sequence[ResumeRequest]) -> list[ResumeRequest]:
        refused = []
        for request in requests:
            if self._refuse is not None and self._refuse(request):
                refused.append(request)
                continue
            delay = max(0, min(MAX_DELAY_SECONDS, request.delay_seconds))
            visible = self._clock.now() + timedelta(seconds=delay)
            self._seq += 1
            self._messages.append((visible, self._seq, request))
            self.sent.append(request)
        return refused

    def receive(self, limit: int = 10) -> list[ResumeRequest]:
        """Take up to ``limit`` visible messages, earliest first."""
        now = self._clock.now()
        visible = sorted(m for m in self._messages if m[0] <= now)[:limit]
        for message in visible:
            self._messages.remove(message)
        return [m[2] for m in visible]

    def next_visible_at(self) -> datetime | None:
        """When the next message becomes visible (None: the queue is empty)."""
        return min((m[0] for m in self._messages), default=None)

    def __len__(self) -> int:
        return len(self._messages)

    @staticmethod
    def sqs_event(requests: Sequence[ResumeRequest]) -> dict[str, Any]:
        """An SQS event as Lambda delivers it to ResumeRun."""
        return {
            "Records": [
                {
                    "messageId": f"m-{i}-{r.run_id}",
                    "receiptHandle": f"rh-{i}",
                    "body": json.dumps(resume_message(r)),
                    "attributes": {"ApproximateReceiveCount": "1"},
                    "messageAttributes": {},
                    "md5OfBody": "",
                    "eventSource": "aws:sqs",
                    "eventSourceARN": "arn:aws:sqs:eu-central-1:123456789012:resume",
                    "awsRegion": "eu-central-1",
                }
                for i, r in enumerate(requests)
            ]
        }


class RecordingNudger:
    """A Nudger that counts nudges; the driver decides when to run the functions."""

    def __init__(self) -> None:
        self.projection = 0
        self.dispatcher = 0

    def nudge_projection(self) -> None:
        self.projection += 1

    def nudge_dispatcher(self) -> None:
        self.dispatcher += 1

    def take(self) -> tuple[bool, bool]:
        """(projection nudged?, dispatcher nudged?) since the last call; resets both."""
        nudged = (self.projection > 0, self.dispatcher > 0)
        self.projection = self.dispatcher = 0
        return nudged


@dataclass(frozen=True)
class SentMail:
    request_id: str
    sender: str
    to: tuple[str, ...]
    subject: str
    body: str


class CapturedMailer:
    """A Mailer that keeps every mail; ``fail_next`` makes the next N sends raise."""

    def __init__(self) -> None:
        self.sent: list[SentMail] = []
        self.fail_next = 0

    def send_mail(
        self, request_id: str, sender: str, to: Sequence[str], subject: str, body: str
    ) -> str:
        if self.fail_next > 0:
            self.fail_next -= 1
            raise ConnectionError("simulated mail provider outage")
        self.sent.append(SentMail(request_id, sender, tuple(to), subject, body))
        return f"local-{len(self.sent)}"


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    url: str
    headers: dict[str, str]
    body: bytes
    timeout: float

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class RecordingHttpSender:
    """An HttpSender that records requests and answers with ``respond`` (default 200).

    ``respond`` may return an HttpResponse or raise (e.g. OSError for a network error).
    """

    respond: Callable[[RecordedRequest], HttpResponse] = field(
        default=lambda request: HttpResponse(200)
    )
    requests: list[RecordedRequest] = field(default_factory=list)

    def send(
        self, method: str, url: str, headers: dict[str, str], body: bytes, timeout: float
    ) -> HttpResponse:
        request = RecordedRequest(method, url, dict(headers), body, timeout)
        self.requests.append(request)
        return self.respond(request)


def build_inprocess_runtime(
    store: Store | Callable[[], Store],
    clock: Clock,
    settings: Settings | None = None,
    database_url: str = "postgresql:///local",
    webhook_resolver: Callable[[str, int], Sequence[str]] | None = None,
    registry: WorkflowRegistry | None = None,
) -> Runtime:
    """A Runtime of in-process ports around one Store.

    Args:
        store: a Store, or a function returning a healthy one.
        clock: business time (a ManualClock for time travel).
        settings: defaults to Settings(database_url=database_url, mail_sender=...).
        webhook_resolver: resolver for the dispatcher's SSRF guard; by default every
            host resolves to one public address (nothing is called: the HTTP sender
            only records).
        registry: the workflows the handlers run (default: WORKFLOW_MODULES).
    """
    settings = settings or Settings(database_url=database_url, mail_sender="noreply@example.com")
    guard = WebhookGuard(
        settings.webhook_allow_hosts, webhook_resolver or (lambda host, port: ["93.184.215.14"])
    )
    return Runtime(
        clock=clock,
        store=store if callable(store) else (lambda: store),
        resume_queue=InMemoryResumeQueue(clock),
        nudger=RecordingNudger(),
        mailer=CapturedMailer(),
        http=RecordingHttpSender(),
        settings=settings,
        registry=registry,
        webhook_guard=guard,
    )


@dataclass
class FakeLambdaContext:
    """Enough of a LambdaContext for the handlers (Powertools reads these fields)."""

    function_name: str = "workflow-runner-local"
    function_version: str = "$LATEST"
    invoked_function_arn: str = (
        "arn:aws:lambda:eu-central-1:123456789012:function:workflow-runner-local"
    )
    memory_limit_in_mb: int = 512
    aws_request_id: str = "00000000-0000-4000-8000-000000000000"
    log_group_name: str = "/aws/lambda/workflow-runner-local"
    log_stream_name: str = "local"
    remaining_ms: int = 60_000

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


class InProcessApp:
    """The deployed stack, in one process: EventBridge routing with the template's
    patterns, the functions' real handlers, the resume queue, nudges and schedules.

    Args:
        runtime: an in-process runtime (see build_inprocess_runtime), installed with
            set_runtime by the caller.
        handlers: logical id -> handler (``template.load_handlers``).
        routes: EventBridge rules (``template.event_routes``).
    """

    def __init__(
        self,
        runtime: Runtime,
        handlers: Mapping[str, Callable[[dict[str, Any], Any], Any]],
        routes: Sequence[Route],
    ) -> None:
        self.runtime = runtime
        self.handlers = handlers
        self.routes = list(routes)
        self.context = FakeLambdaContext()
        self.invocations: list[tuple[str, Any]] = []  # (function, result), in order

    @property
    def queue(self) -> InMemoryResumeQueue:
        queue = self.runtime.resume_queue
        assert isinstance(queue, InMemoryResumeQueue)
        return queue

    def invoke(self, function: str, event: Any) -> Any:
        """Invoke one function's handler (errors propagate, as Lambda would report them)."""
        result = self.handlers[function](event, self.context)
        self.invocations.append((function, result))
        return result

    def put_event(self, event: dict[str, Any]) -> dict[str, Any]:
        """Deliver an EventBridge event to every function whose rule matches, then settle.

        Returns:
            function -> its result.
        """
        results = {}
        for route in self.routes:
            if route.accepts(event):
                results[route.function] = self.invoke(route.function, event)
        self.settle()
        return results

    def settle(self, max_rounds: int = 1000) -> None:
        """Run nudged functions and deliver visible resume messages until all is quiet."""
        nudger = self.runtime.nudger
        assert isinstance(nudger, RecordingNudger)
        for _ in range(max_rounds):
            projection, dispatcher = nudger.take()
            messages = self.queue.receive()
            if not (projection or dispatcher or messages):
                return
            if projection:
                self.invoke("PendingProjectionFunction", {"source": "nudge"})
            if messages:
                self.invoke("ResumeRunFunction", self.queue.sqs_event(messages))
            if dispatcher:
                self.invoke("StepDispatcherFunction", {"source": "nudge"})
        raise DidNotSettle(f"the app did not settle within {max_rounds} rounds")

    def tick(self) -> None:
        """One minute's schedules: the due scan, the projection and dispatcher safety nets."""
        scheduled = {"source": "aws.events", "detail-type": "Scheduled Event", "detail": {}}
        self.invoke("PendingProjectionFunction", scheduled)
        self.invoke("DueScanFunction", scheduled)
        self.invoke("StepDispatcherFunction", scheduled)
        self.settle()

    def advance(self, delta: timedelta) -> None:
        """Move business time forward by ``delta``, stopping at every moment something is
        due (a timer, a delayed message, a dispatch retry) to run the schedules there."""
        clock = self.runtime.clock
        if not hasattr(clock, "set"):
            raise TypeError("advance() needs a ManualClock")
        target = clock.now() + delta
        while True:
            self.tick()
            upcoming = [
                t for t in (self._next_wake(), self.queue.next_visible_at()) if t is not None
            ]
            nearest = min(upcoming, default=None)
            if nearest is None or nearest > target:
                break
            clock.set(max(nearest, clock.now()))
        clock.set(target)
        self.tick()

    def _next_wake(self) -> datetime | None:
        store = self.runtime.store()
        now = self.runtime.clock.now()
        candidates = (
            store.pending.next_wake_at(now),
            store.outbox.next_due(),
            store.tasks.next_due(),
        )
        moments = [m for m in candidates if m]
        return min(moments, default=None)
