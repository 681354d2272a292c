"""WorkflowTestEnv: run your workflows in a test the way they run deployed, with a clock
you move.

It drives the very Lambda handlers of the SAM application (`functions/*/app.py`, routed
by template.yaml's EventPatterns: the local runtime of `wfr local`) on a fresh
PostgreSQL database, with captured mail and stubbable webhooks.
"""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import Any

from ..definition import StepContext, WorkflowDefinition, WorkflowRegistry, run_id_for
from ..definition.hosts import ArchivedDefinitions
from ..definition.registry import unknown_workflow_message
from ..durations import format_instant, parse_duration, parse_instant
from ..embedded import drop_database
from ..engine.operator_actions import Operator
from ..engine.pinning import PinnedDefinition, pinned_definitions
from ..engine.run_lookup import workflow_names
from ..engine.run_migration import MigrationReport, MigrationRequest, migrate_runs
from ..engine.step_mapping import parse_mapping
from ..envelope import MAX_DETAIL_DEPTH, MAX_EVENT_BYTES
from ..errors import (
    InvalidInput,
    NotConfigured,
    RunNotFound,
    UnknownWorkflow,
)
from ..json_input import check_json_value
from ..local.application import find_template, no_template_message
from ..local.runtime import LocalRuntime
from ..store import Store, connect
from ..stream import RunStarted
from ..suggest import did_you_mean, listing
from ..webhook_guard import WebhookGuard
from .callbacks import CallbackAnswers
from .records import RunSnapshot, SentMail, SentWebhook, StubbedHttp, snapshot
from .server import fresh_database, server_url
from .tasks import dying_at
from .workflows import registry_of, swap_task

DEFAULT_NOW = "2030-01-01T09:00:00Z"
# Webhook hosts resolve here in tests: a public address, so the SSRF guard judges URLs
# as in AWS (schemes, literal private addresses) without a DNS lookup.
_PUBLIC_ADDRESS = "93.184.216.34"


def _public_resolver(host: str, port: int) -> list[str]:
    return [_PUBLIC_ADDRESS]


class WorkflowTestEnv(CallbackAnswers):
    """A test environment: your workflows, the engine's handlers, a database of its own.

    Use it as a context manager; everything happens at business time `now`, which only
    moves with `advance`::

        with WorkflowTestEnv(modules=["my_flows"], now="2030-01-01T09:00:00Z") as env:
            env.put_event(tenant=TENANT, type="order.placed", payload={"orderId": "o-1"})
            env.advance("PT1H")
            assert env.run(tenant=TENANT, workflow="order-approval", key="o-1").status == "waiting"

    Args:
        modules: modules whose import registers the workflows (as in WORKFLOW_MODULES).
        now: business time at the start, an ISO-8601 instant (or an aware datetime).
        workflows: further definitions (e.g. `define_workflow(..., register=False)`).
        template: the SAM template (default: as `wfr local` finds it: the project's
            template.yaml in the current folder or a parent, which defines the engine's
            functions or nests the engine application; else the application packaged
            in the installed engine).
        database_url: a PostgreSQL server the kit may create databases on (default:
            DATABASE_URL, else an embedded server shared by the process).
        environ: settings of the functions (MAIL_SENDER, WEBHOOK_ALLOW_HOSTS, ...);
            the process environment is not read.

    Raises:
        WorkflowDefinitionError: a module cannot be imported or defines no workflow.
        NotConfigured: no template.yaml was found (the message says what to do).
        ApplicationError: on entering, the template names no engine application to run
            (e.g. a nested one not exported yet; the message says what to do).
    """

    def __init__(
        self,
        modules: Sequence[str] = (),
        now: str | datetime = DEFAULT_NOW,
        *,
        workflows: Sequence[WorkflowDefinition] = (),
        template: str | Path | None = None,
        database_url: str | None = None,
        environ: dict[str, str] | None = None,
    ) -> None:
        if isinstance(modules, str):
            raise TypeError("modules must be a list of module names, e.g. ['my_flows']")
        self.registry = registry_of(modules, workflows)
        self._start = parse_instant(now) if isinstance(now, str) else now
        found = Path(template) if template is not None else find_template()
        if found is None:
            raise NotConfigured(f"WorkflowTestEnv: {no_template_message()} (template=PATH)")
        if not found.is_file():
            raise NotConfigured(f"WorkflowTestEnv: template={found}: no such file")
        self._template = found
        self._database_url = database_url
        self._environ = dict(environ or {})
        self._store: Store | None = None
        self._runtime: LocalRuntime | None = None
        self._database: tuple[str, str] | None = None  # (admin URL, name)
        self._http = StubbedHttp(self._clock_now)
        # The definitions of earlier deploys, kept loaded as AWS keeps their versions.
        self._kept = ArchivedDefinitions()
        self._deploys = 0

    # --- lifecycle ----------------------------------------------------------------

    def __enter__(self) -> WorkflowTestEnv:
        admin = server_url(self._database_url)
        name, url = fresh_database(admin)
        self._database = (admin, name)
        try:
            self._store = connect(url)
            self._runtime = LocalRuntime(
                self._store,
                self.registry,
                self._template,
                http=self._http,
                guard=WebhookGuard(
                    self._environ.get("WEBHOOK_ALLOW_HOSTS", "").split(","), _public_resolver
                ),
                start=self._start,
                environ=self._environ,
                kept=self._kept,
            )
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Drop the environment's database (the context manager does it on exit)."""
        if self._store is not None and not self._store.closed:
            self._store.close()
        if self._database is not None:
            drop_database(*self._database)
            self._database = None

    @property
    def runtime(self) -> LocalRuntime:
        if self._runtime is None:
            raise NotConfigured("use WorkflowTestEnv as a context manager: with ... as env:")
        return self._runtime

    @property
    def store(self) -> Store:
        """The environment's database (for what the kit does not show)."""
        self.runtime  # noqa: B018 - raises outside the context manager
        assert self._store is not None
        return self._store

    # --- time and events ------------------------------------------------------------

    def _clock_now(self) -> datetime:
        return self._runtime.now() if self._runtime is not None else self._start

    @property
    def now(self) -> datetime:
        """Business time."""
        return self.runtime.now()

    def put_event(
        self,
        *,
        tenant: str,
        type: str,
        payload: dict[str, Any],
        event_id: str | None = None,
        source: str = "tests",
    ) -> str:
        """Put a domain event on the (local) bus and run everything that follows at once:
        runs it triggers or wakes, their passes, mail and webhooks.

        Args:
            tenant: the tenant (a UUID); set at the tenant id path of the event's detail.
            type: the EventBridge detail-type.
            payload: the event's detail.
            event_id: the EventBridge id (default: a new one); the same id again is a
                redelivery.
            source: the EventBridge source.

        Returns:
            The event id.

        Warns:
            UserWarning: no registered workflow starts on or waits for `type` (the event
                is put all the same, and ignored), with the closest types.

        Raises:
            InvalidInput: `tenant` is not a UUID, `payload` is not a JSON object, nested
                deeper than an event's detail may be (99 levels) or larger than an event
                (256 KB).
        """
        if not isinstance(payload, dict):
            raise InvalidInput(
                f"put_event: payload must be a JSON object (a dict: the event's detail), "
                f"got {payload.__class__.__name__}"
            )
        try:
            tenant = str(uuid.UUID(tenant))
        except (TypeError, ValueError, AttributeError):
            raise InvalidInput(f"put_event: tenant must be a UUID, got {tenant!r}") from None
        known = self.registry.trigger_types() | self.registry.awaited_types()
        if type not in known:
            warnings.warn(
                f"put_event: no registered workflow starts on or waits for {type!r}; it is "
                f"ignored{did_you_mean(type, sorted(known))}",
                UserWarning,
                stacklevel=2,
            )
        check_json_value(
            payload,
            "put_event(payload=...)",
            max_bytes=MAX_EVENT_BYTES,
            max_depth=MAX_DETAIL_DEPTH,
        )
        detail = dict(payload)
        path = self.runtime.settings.tenant_id_path.split(".")
        holder = detail
        for key in path[:-1]:
            holder = holder.setdefault(key, {})
        holder[path[-1]] = tenant
        event_id = event_id or str(uuid.uuid4())
        event = {
            "id": event_id,
            "detail-type": type,
            "source": source,
            "time": format_instant(self.now),
            "detail": detail,
        }
        self.runtime.put_event(self.runtime.envelope(event))
        return event_id

    def advance(self, duration: str | timedelta) -> None:
        """Move business time forward by `duration` ("PT1H", "1h", "3d": durations.py; or a
        timedelta) and run everything that becomes due on the way, each at its instant:
        timers, timeouts, retries, cron starts, webhook redeliveries. `advance("PT0S")`
        runs one scheduled cycle without moving the clock.

        Raises:
            InvalidDuration: `duration` is not a duration.
        """
        delta = parse_duration(duration) if isinstance(duration, str) else duration
        if delta < timedelta(0):
            raise ValueError("advance: time only moves forward")
        self.advance_to(self.now + delta)

    def advance_to(self, moment: str | datetime) -> None:
        """Move business time to `moment` (an instant), running what becomes due."""
        until = parse_instant(moment) if isinstance(moment, str) else moment
        if until < self.now:
            raise ValueError(f"advance_to: {format_instant(until)} is in the past")
        # The same time travel as `wfr local tick --until`: a cycle now, then one at
        # each instant something falls due (timers, retries, cron instants).
        for _ in self.runtime.travel(until):
            pass

    # --- what happened -----------------------------------------------------------------

    def run(
        self,
        *,
        tenant: str,
        workflow: str,
        key: str | None = None,
        run_id: str | None = None,
    ) -> RunSnapshot:
        """The run of `workflow` with idempotency key `key` (or `run_id`; neither: the
        tenant's only run of that workflow), as its stream records it now.

        Raises:
            UnknownWorkflow: no workflow of that name is registered or has runs (the
                message offers the closest names).
            RunNotFound: there is no such run for this tenant (or several, without a
                key); the message lists the keys of the workflow's runs there.
        """
        known = workflow_names(self.store, self.registry)
        if workflow not in known:
            raise UnknownWorkflow(unknown_workflow_message(workflow, known, "registered"))
        if run_id is None and key is not None:
            run_id = run_id_for(workflow, key)
        if run_id is None:
            runs = self.store.runs.for_tenant(tenant, workflow_name=workflow, limit=2)
            if len(runs) != 1:
                raise self._not_found(tenant, workflow, None, f"{len(runs)} runs")
            run_id = runs[0].run_id
        events = self.store.streams.load(tenant, run_id)
        if not events:
            raise self._not_found(tenant, workflow, key, run_id)
        return snapshot(self.store, tenant, run_id, events)

    def _not_found(self, tenant: str, workflow: str, key: str | None, found: str) -> RunNotFound:
        """What env.run could not find, with the keys the tenant's runs of it have."""
        runs = self.store.runs.for_tenant(tenant, workflow_name=workflow, limit=50)
        if not runs:
            return RunNotFound(tenant, found, f"tenant {tenant} has no runs of {workflow!r}")
        keys = []
        for run in runs:
            first = self.store.streams.load(tenant, run.run_id)[:1]
            started = first[0].fact if first else None
            if isinstance(started, RunStarted) and started.idempotency_key is not None:
                keys.append(started.idempotency_key)
        wanted = f"with key {key!r}" if key is not None else "(pass key=)"
        hint = did_you_mean(key, keys) if key is not None else ""
        return RunNotFound(
            tenant,
            found,
            f"no run of {workflow!r} {wanted} for tenant {tenant}{hint} "
            f"(its {len(runs)} run(s) there have the keys: {listing(keys)})",
        )

    def runs(self, *, tenant: str, workflow: str | None = None) -> list[RunSnapshot]:
        """Every run of a tenant (of one workflow), most recently updated first."""
        return [
            self.run(tenant=tenant, workflow=r.workflow_name, run_id=r.run_id)
            for r in self.store.runs.for_tenant(tenant, workflow_name=workflow)
        ]

    @property
    def mails(self) -> list[SentMail]:
        """Mail delivered so far, oldest first (captured; nothing is sent)."""
        return [
            SentMail(
                m.recipients, m.subject, m.body, m.sender, m.request_id, m.sent_at.astimezone(UTC)
            )
            for m in self.store.local.mail()
        ]

    @property
    def webhooks(self) -> list[SentWebhook]:
        """Webhook delivery attempts so far, oldest first (nothing leaves the process)."""
        return list(self._http.sent)

    def stub_webhook(self, url: str, *statuses: int | None) -> None:
        """Answer webhooks to `url` with `statuses` in turn, the last one repeating
        (default for every URL: 200). None: the connection fails. A trailing `*` in
        `url` matches every URL with that prefix. 5xx, 429 and failed connections are
        retried by the dispatcher with backoff; other 4xx fail the delivery for good."""
        self._http.stub(url, statuses)

    def stub_task(
        self, key: str, fn: Callable[[StepContext], Any], *, workflow: str | None = None
    ) -> None:
        """Run `fn(ctx)` instead of the function of task `key` (in `workflow`, or in every
        workflow that has one), e.g. a payment provider's stand-in that returns a result
        or raises. The definition keeps its fingerprint: runs stay pinned to it.

        Raises:
            ValueError: no registered workflow has a task with this key (the message
                offers the closest task keys).
        """
        self._use(swap_task(self.registry, "stub_task", key, lambda _: fn, workflow))

    def crash_task(self, key: str, attempt: int = 1, *, workflow: str | None = None) -> None:
        """Let the worker die during attempt `attempt` of task `key` (in `workflow`, or in
        every workflow that has one), as a Lambda timeout would: the task's function runs
        (what it does stays done), then the worker's invocation ends before the outcome is
        recorded. The attempt's lease ends after the task's timeout plus a few seconds:
        `advance` past it, and the next claim finds the attempt interrupted. It is then
        retried at once (at least once, the default), or, with
        `RetryPolicy(at_most_once=True)`, recorded as failed with `TaskInterrupted`
        (reason `task_interrupted`), which the policy judges like any error.

        Raises:
            ValueError: no registered workflow has a task with this key, or `attempt` is
                not a whole number from 1.
        """
        if isinstance(attempt, bool) or not isinstance(attempt, int) or attempt < 1:
            raise ValueError(f"crash_task: attempt must be a whole number from 1, not {attempt!r}")
        self._use(swap_task(self.registry, "crash_task", key, dying_at(attempt, key), workflow))

    def _use(self, registry: WorkflowRegistry) -> None:
        self.registry = registry
        self.runtime.registry = registry

    # --- versions ---------------------------------------------------------------------

    def pinned_definitions(self) -> list[PinnedDefinition]:
        """The definitions waiting runs are pinned to, judged against the registered
        workflows and the code kept from earlier deploys (what `wfr doctor` checks):
        each says how many of its runs resume on their own definition (`exact`), on one
        whose shape agrees (`by_shape`), stay on kept code (`kept`) or fail."""
        return pinned_definitions(self.store, self.registry, hosts=self._kept)

    def migrate_runs(
        self,
        *,
        workflow: str,
        to_version: int,
        mapping: Sequence[str] = (),
        tenant: str | None = None,
        dry_run: bool = False,
    ) -> MigrationReport:
        """Move the waiting runs of `workflow` onto its registered version `to_version`,
        as `wfr runs migrate` does after a structural change (a step inserted before
        where they wait, say), then run what follows.

        Args:
            workflow: the workflow whose waiting runs to move.
            to_version: a version of it registered in the environment now.
            mapping: `FROM=TO` step places (`"0=1"`, `"2.true.0=3.true.0"`); default:
                every run keeps its own place.
            tenant: only this tenant's runs.
            dry_run: only judge them; write nothing.

        Returns:
            What happened (or would) to each waiting run not on that version yet:
            `report.complete` is True when every one moved.

        Raises:
            InvalidInput: an unknown workflow or version, or a malformed mapping.
        """
        request = MigrationRequest(workflow, to_version, tenant, parse_mapping(mapping), dry_run)
        operator = Operator("tests (WorkflowTestEnv)")
        report = migrate_runs(self.store, self.registry, request, self.now, operator)
        self.runtime.tick()
        return report

    def redeploy(
        self,
        modules: Sequence[str] = (),
        workflows: Sequence[WorkflowDefinition] = (),
        *,
        keep_previous: bool = True,
    ) -> list[PinnedDefinition]:
        """Replace the registered workflows, as a deploy of new code would, and return
        the definitions whose waiting runs will now fail (empty: the change is safe for
        the runs in this database). The environment goes on with the new workflows.

        As in AWS, where every deploy publishes a function version and older ones are
        kept, the definitions registered until now stay loaded: a waiting run whose
        definition the new code lacks, and whose shape no longer agrees, goes on on its
        old code (its entry's `kept` count) instead of failing.

        Args:
            keep_previous: False: the code before this deploy is gone, with that of every
                earlier one (as if their versions were deleted): such runs fail loud
                with workflow_definition_changed.

        Raises:
            WorkflowDefinitionError: a module cannot be imported or defines no workflow.
        """
        registry = registry_of(modules, workflows)
        self._deploys += 1
        if keep_previous:
            self._kept.keep(self.registry, f"the code before redeploy {self._deploys}")
        else:
            self._kept.clear()
        self._use(registry)
        return [p for p in self.pinned_definitions() if p.fails]
