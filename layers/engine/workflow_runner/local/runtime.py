"""The local runtime: the Lambda handlers of `functions/`, wired the way template.yaml
wires them in AWS, on one database, with a business clock that moves only when told.

- A domain event goes to the functions whose template EventPatterns accept it.
- Nudges (PendingProjection, StepDispatcher) are recorded and acted on right after
  the handler that gave them returns; the resume queue is drained of every message
  visible at the current business time. `settle()` repeats that until nothing is left,
  so one `put_event` runs everything that follows at once.
- `tick()` is one scheduled cycle: PendingProjection, DueScan (every tenant, cron
  starts included), the resume queue, StepDispatcher.

The clock, the resume queue (with SQS-style delays in business time) and the captured
mail live in the database (see `state.py`), so separate `wfr local ...` commands
continue where the last one stopped. Handlers reach all of it through
`ports.get_runtime()`: the runtime installed here.
"""

from __future__ import annotations

import logging
import os
import sys
import uuid
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, redirect_stdout
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from .. import ports
from ..aws.inprocess import FakeLambdaContext, InMemoryResumeQueue, RecordingNudger
from ..aws.ports import PinnedHttpSender
from ..aws.template import load_handlers
from ..callback_tokens import checked_base_url
from ..clock import ManualClock, SystemClock
from ..cron import CronSchedule
from ..definition import CronTrigger, WorkflowRegistry
from ..definition.hosts import ArchivedDefinitions, DefinitionHosts
from ..durations import format_instant
from ..engine.callbacks import (
    CallbackCompletion,
    CallbackHeartbeatRecorded,
    complete_callback,
    enqueue_resume,
    fail_callback,
    heartbeat_callback,
)
from ..envelope import MAX_DETAIL_DEPTH, MAX_EVENT_BYTES
from ..errors import DidNotSettle
from ..json_input import parse_json
from ..ports import HttpSender, Runtime, set_runtime
from ..settings import Settings
from ..store import CapturedMail, LoggedLine, Store, StoredEvent
from ..webhook_guard import WebhookGuard
from . import routes as r
from .application import find_template, no_template_message
from .redirects import RedirectingHttpSender, parse_redirects, redirecting_resolver
from .run_log import keeping_run_log
from .state import CapturedMailer, LocalResumeQueue, as_request

# A runaway loop guard for settle(): far more rounds than any workflow needs.
MAX_SETTLE_ROUNDS = 1000
DEFAULT_MAIL_SENDER = "workflows@localhost"


class InvocationDied(BaseException):
    """Ends the function invocation it is raised in, as a Lambda timeout or a crash
    would: nothing after it runs in that invocation, and what it committed stays. The
    local runtime answers the invocation as died and goes on (the test kit's
    `crash_task` raises it). A BaseException, so that no `except Exception` in between
    takes it for an error to handle."""


@dataclass
class Activity:
    """What one step of the local runtime did: handler answers, new stream events, the
    mail captured and the lines of the local log about runs (run_log.py)."""

    now: datetime
    answers: list[tuple[str, Any]] = field(default_factory=list)
    events: list[StoredEvent] = field(default_factory=list)
    mail: list[CapturedMail] = field(default_factory=list)
    log: list[LoggedLine] = field(default_factory=list)


@contextmanager
def quiet_powertools() -> Iterator[None]:
    """Keep the handlers' output off stdout while they run locally, where stdout carries
    only what a `wfr` command answers (its `--json` document): logs at WARNING and above
    go to stderr, EMF metrics are neither printed nor kept (in Lambda they are stdout
    lines by design: that is how CloudWatch receives them), anything else printed (a
    workflow's own `print`) goes to stderr, and the warning Metrics gives when a flush
    has nothing to publish is not shown (it is about CloudWatch, which a local run has
    none of)."""
    from ..aws import lambda_support  # imports Powertools: only when handlers run here

    saved_env = os.environ.get("POWERTOOLS_METRICS_DISABLED")
    os.environ["POWERTOOLS_METRICS_DISABLED"] = "true"
    logger = lambda_support.logger
    handler = logger.registered_handler
    saved_level = logger.log_level
    saved_stream = getattr(handler, "stream", None)
    logger.setLevel(logging.WARNING)
    if isinstance(handler, logging.StreamHandler):
        handler.setStream(sys.stderr)
    try:
        with warnings.catch_warnings(), redirect_stdout(sys.stderr):
            warnings.filterwarnings("ignore", message="No application metrics to publish")
            yield
    finally:
        # Disabled metrics are not flushed, so drop them: the process may serve real
        # handler calls (tests) after us, whose flush must not carry our counts.
        lambda_support.metrics.clear_metrics()
        logger.setLevel(saved_level)
        if isinstance(handler, logging.StreamHandler) and saved_stream is not None:
            handler.setStream(saved_stream)
        if saved_env is None:
            os.environ.pop("POWERTOOLS_METRICS_DISABLED", None)
        else:
            os.environ["POWERTOOLS_METRICS_DISABLED"] = saved_env


class LocalRuntime:
    """Drives the functions of template.yaml on one database with a manual clock.

    Args:
        store: the database (migrated).
        registry: the workflows the functions run.
        template: the SAM template whose routes and handlers to use.
        http: how webhooks are sent (default: for real, through the SSRF guard).
        guard: the dispatcher's SSRF guard (default: WEBHOOK_ALLOW_HOSTS from environ).
        start: business time when this database has no local clock yet (default: now).
        environ: WEBHOOK_ALLOW_HOSTS, WFR_WEBHOOK_REDIRECTS, MAIL_SENDER, CALLBACK_BASE_URL.
        kept: where definitions gone from `registry` still run, loaded in this process
            (definition/hosts.py: the test kit's archive, `wfr local`'s kept modules; default:
            nothing is kept).
    """

    def __init__(
        self,
        store: Store,
        registry: WorkflowRegistry,
        template: Path,
        http: HttpSender | None = None,
        guard: WebhookGuard | None = None,
        start: datetime | None = None,
        environ: Mapping[str, str] | None = None,
        kept: DefinitionHosts | None = None,
    ) -> None:
        env = dict(os.environ if environ is None else environ)
        self.store = store
        self.registry = registry
        self.kept = kept if kept is not None else ArchivedDefinitions()
        self.routing = r.load_routes(template)
        # The functions of the application the template names (see local/application).
        application = self.routing.application
        by_name = load_handlers(application.template if application else template)
        self.handlers = {self.routing.folders[name]: h for name, h in by_name.items()}
        self._context = FakeLambdaContext
        self.clock = ManualClock(store.local.clock() or start or SystemClock().now())
        self.queue = LocalResumeQueue(store, self.clock.now)
        self.nudger = RecordingNudger()
        self.mailer = CapturedMailer(store, self.clock.now)
        redirects = parse_redirects(env.get("WFR_WEBHOOK_REDIRECTS"))
        allow = {h.strip().lower() for h in env.get("WEBHOOK_ALLOW_HOSTS", "").split(",")}
        # Redirected hosts are explicitly pointed at a local target: allow them, and it.
        allow |= set(redirects) | {urlsplit(u).hostname or "" for u in redirects.values()}
        allow.discard("")
        self.guard = guard or WebhookGuard(allow, redirecting_resolver(redirects))
        sender: HttpSender = http or PinnedHttpSender(self.guard)
        self.http = RedirectingHttpSender(sender, redirects) if redirects else sender
        self.settings = Settings(
            database_url=store.dsn or "postgresql:///local",
            mail_sender=env.get("MAIL_SENDER") or DEFAULT_MAIL_SENDER,
            webhook_allow_hosts=frozenset(allow),
            # Locally, exception text is what a developer needs (run_log.py): in full
            # unless LOG_EXCEPTION_TEXT says otherwise. Stored events stay as in AWS.
            log_exception_text=(env.get("LOG_EXCEPTION_TEXT") or "true").strip().lower()
            in ("1", "true", "yes", "on"),
            callback_base_url=checked_base_url(env.get("CALLBACK_BASE_URL")),
        )
        store.local.set_clock(self.clock.now())

    # --- wiring -------------------------------------------------------------

    @contextmanager
    def installed(self) -> Iterator[None]:
        """Install this runtime for the handlers (and restore the previous one after)."""
        # The runtime installed before (if any), without building the AWS default.
        previous = ports.installed_runtime()
        set_runtime(
            Runtime(
                clock=self.clock,
                store=lambda: self.store,
                resume_queue=self.queue,
                nudger=self.nudger,
                mailer=self.mailer,
                http=self.http,
                settings=self.settings,
                registry=self.registry,
                webhook_guard=self.guard,
                definition_hosts=self.kept,
            )
        )
        try:
            with quiet_powertools():
                yield
        finally:
            set_runtime(previous)

    def call(self, folder: str, event: Any) -> Any:
        """Invoke one function's handler as Lambda would."""
        handler = self.handlers.get(folder)
        if handler is None:
            raise r.RoutingError(f"template.yaml has no function with CodeUri functions/{folder}")
        with self.installed(), keeping_run_log(self.store, self.clock.now):
            try:
                return handler(event, self._context(function_name=f"local-{folder}"))
            except InvocationDied as died:
                return {"died": str(died)}

    # --- time -----------------------------------------------------------------

    def now(self) -> datetime:
        return self.clock.now()

    def set_now(self, moment: datetime) -> None:
        """Move business time (persisted for the next command)."""
        self.clock.set(moment)
        self.store.local.set_clock(self.clock.now())

    def next_due_after(self, moment: datetime) -> datetime | None:
        """The first instant after `moment` at which something becomes due: a pending
        row, a delayed resume message, a dispatch or task retry, or a cron instant of a
        registered workflow (None: nothing scheduled)."""
        due = [self.store.local.next_due(moment), next_cron_instant(self.registry, moment)]
        return min((d for d in due if d is not None), default=None)

    def travel(self, until: datetime, every: timedelta | None = None) -> Iterator[Activity]:
        """Run cycles up to `until`: one at once (the minutely schedules would have run
        one since the last command: it starts the cron clock of a tenant seen since),
        then at most `every` apart (None: only when something falls due), and exactly
        when something falls due in between — a timer, a retry, a cron instant — so
        everything fires at its own instant however coarse `every` (`wfr local tick
        --until`, the test kit's `advance`).

        Raises:
            ValueError: `every` is not positive.
        """
        if every is not None and every <= timedelta(0):
            raise ValueError("every must be positive")
        yield self.tick()
        while self.now() < until:
            step = until if every is None else min(self.now() + every, until)
            due = self.next_due_after(self.now())
            if due is not None and due < step:
                step = due
            self.set_now(step)
            yield self.tick()

    # --- events -----------------------------------------------------------------

    def envelope(self, entry: Mapping[str, Any]) -> dict[str, Any]:
        """A full EventBridge event from a put-events entry or an event (id assigned)."""
        return to_eventbridge_event(entry, self.clock.now())

    def put_event(self, event: Mapping[str, Any]) -> Activity:
        """Route a full EventBridge event to its functions and run what follows."""
        mark = self._mark()
        activity = Activity(self.now())
        for folder in self.routing.targets(event):
            activity.answers.append((folder, self.call(folder, dict(event))))
        self._settle(activity)
        self._collect(activity, mark)
        return activity

    # --- cycles -----------------------------------------------------------------

    def tick(self) -> Activity:
        """One scheduled cycle at the current business time."""
        mark = self._mark()
        activity = Activity(self.now())
        scheduled = {"source": "aws.events", "detail-type": "Scheduled Event"}
        activity.answers.append((r.PENDING_PROJECTION, self.call(r.PENDING_PROJECTION, scheduled)))
        activity.answers.append((r.DUE_SCAN, self.call(r.DUE_SCAN, scheduled)))
        self._settle(activity)
        activity.answers.append((r.STEP_DISPATCHER, self.call(r.STEP_DISPATCHER, scheduled)))
        self._settle(activity)
        self._collect(activity, mark)
        return activity

    def catch_up(self) -> Activity:
        """Nudge PendingProjection and StepDispatcher, as the functions do after they
        append, and run what follows: for appends made outside the functions (an
        operator's cancel, resume or redrive), so their effects show at once."""
        mark = self._mark()
        activity = Activity(self.now())
        self.nudger.nudge_projection()
        self.nudger.nudge_dispatcher()
        self._settle(activity)
        self._collect(activity, mark)
        return activity

    def complete_callback(
        self, token: str, payload: Any, source: str = "wfr.local"
    ) -> tuple[CallbackCompletion, Activity]:
        """Complete a callback as the callback endpoint does (record it, send the run to
        the resume queue) and run what follows: the resumed pass, its mail and webhooks.

        Raises:
            CallbackRefused: unknown token, used before, expired, or the run moved on.
            InvalidInput: the payload is not JSON or too large (null is no payload: it completes).
        """
        return self._answered(
            lambda: complete_callback(self.store, token, payload, self.now(), source)
        )

    def fail_callback(
        self, token: str, error: str, message: str | None, source: str = "wfr.local"
    ) -> tuple[CallbackCompletion, Activity]:
        """Report a callback failed as the callback endpoint does, and run what follows.

        Raises:
            CallbackRefused: unknown token, answered before, expired, or the run moved on.
            InvalidInput: the error name or message is not what a failure takes.
        """
        return self._answered(
            lambda: fail_callback(self.store, token, error, message, self.now(), source)
        )

    def heartbeat_callback(self, token: str) -> tuple[CallbackHeartbeatRecorded, Activity]:
        """A callback's heartbeat, as the callback endpoint records it.

        Raises:
            CallbackRefused: unknown token, answered before, expired, the run moved on,
                or the callback takes no heartbeats.
        """
        mark = self._mark()
        activity = Activity(self.now())
        beat = heartbeat_callback(self.store, token, self.now())
        self.nudger.nudge_projection()
        self._settle(activity)
        self._collect(activity, mark)
        return beat, activity

    def _answered(
        self, answer: Callable[[], CallbackCompletion]
    ) -> tuple[CallbackCompletion, Activity]:
        mark = self._mark()
        activity = Activity(self.now())
        completion = answer()
        enqueue_resume(self.store, self.queue, completion, self.now())
        self.nudger.nudge_projection()
        self._settle(activity)
        self._collect(activity, mark)
        return completion, activity

    def _settle(self, activity: Activity) -> None:
        """Act on nudges and drain the visible resume messages until nothing is left."""
        for _ in range(MAX_SETTLE_ROUNDS):
            projection, dispatcher = self.nudger.take()
            nudge = {"source": "wfr.local", "detail-type": "nudge"}
            if projection:
                answer = self.call(r.PENDING_PROJECTION, nudge)
                activity.answers.append((r.PENDING_PROJECTION, answer))
            if dispatcher:
                activity.answers.append((r.STEP_DISPATCHER, self.call(r.STEP_DISPATCHER, nudge)))
            messages = self.queue.receive(self.now(), limit=10)
            if messages:
                batch = InMemoryResumeQueue.sqs_event([as_request(m) for m in messages])
                activity.answers.append((r.RESUME_RUN, self.call(r.RESUME_RUN, batch)))
            if not (projection or dispatcher or messages):
                return
        raise DidNotSettle(f"the local runtime did not settle in {MAX_SETTLE_ROUNDS} rounds")

    def _mark(self) -> tuple[int, int, int]:
        return self.store.local.activity_mark()

    def _collect(self, activity: Activity, mark: tuple[int, int, int]) -> None:
        activity.events = self.store.local.events_since(mark[0])
        activity.mail = self.store.local.mail(mark[1])
        activity.log = self.store.local.log_since(mark[2])


def catch_up_local(
    store: Store,
    registry: WorkflowRegistry,
    environ: Mapping[str, str] | None = None,
    template: Path | None = None,
    kept: DefinitionHosts | None = None,
) -> Activity | None:
    """After an operator's action on a local database (one with a local clock), run
    the nudges the functions would have sent (see LocalRuntime.catch_up).

    Returns None on any other database (Aurora: its own functions are nudged there).

    Raises:
        RoutingError: no template.yaml was given or found to load the functions from.
    """
    if store.local.clock() is None:
        return None
    found = template or find_template()
    if found is None:
        raise r.RoutingError(no_template_message())
    return LocalRuntime(store, registry, found, environ=environ, kept=kept).catch_up()


def next_cron_instant(registry: WorkflowRegistry, after: datetime) -> datetime | None:
    """The first instant after `after` at which a registered cron workflow is due."""
    instants = [
        CronSchedule.parse(wf.trigger.schedule).next_after(after)
        for wf in registry.cron_workflows()
        if isinstance(wf.trigger, CronTrigger)
    ]
    return min(instants, default=None)


def to_eventbridge_event(entry: Mapping[str, Any], now: datetime) -> dict[str, Any]:
    """A full EventBridge event from a `put-events` entry ({Source, DetailType, Detail,
    EventBusName?, Time?, Resources?}) or from a full event (kept, id and time filled in).

    Raises:
        InvalidInput (RoutingError): the entry has neither shape, or an entry's Detail is
            not a string holding a JSON object (of at most MAX_EVENT_BYTES and
            MAX_DETAIL_DEPTH levels).
    """
    import json

    if not isinstance(entry, Mapping):
        raise r.RoutingError(f"expected an object, got {type(entry).__name__}")
    if "detail-type" in entry:
        event = dict(entry)
        event.setdefault("id", str(uuid.uuid4()))
        event.setdefault("version", "0")
        event.setdefault("time", format_instant(now))
        event.setdefault("account", "123456789012")
        event.setdefault("region", "eu-central-1")
        event.setdefault("resources", [])
        return event
    if "DetailType" not in entry or "Source" not in entry:
        raise r.RoutingError(
            "needs Source, DetailType and Detail (a put-events entry) or detail-type, "
            "source and detail (an EventBridge event)"
        )
    detail = entry.get("Detail", "{}")
    if not isinstance(detail, str):
        # The PutEvents API takes Detail as a string of JSON; an object would be refused
        # by `aws events put-events` too, so it is refused here rather than fixed up.
        raise r.RoutingError(
            f"Detail must be a string of JSON, as in the PutEvents API, got a "
            f'{type(detail).__name__}: write it as "Detail": '
            f"{json.dumps(json.dumps(detail))[:80]}"
        )
    detail = parse_json(detail, "Detail", max_bytes=MAX_EVENT_BYTES, max_depth=MAX_DETAIL_DEPTH)
    if not isinstance(detail, dict):
        raise r.RoutingError("Detail must be a JSON object (in a string)")
    time = entry.get("Time")
    return {
        "version": "0",
        "id": str(entry.get("Id") or uuid.uuid4()),
        "detail-type": entry["DetailType"],
        "source": entry["Source"],
        "account": "123456789012",
        "time": str(time) if time else format_instant(now),
        "region": "eu-central-1",
        "resources": list(entry.get("Resources") or []),
        "detail": detail,
    }
