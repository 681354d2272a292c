"""WorkflowTestEnv: run your workflows in a test the way they run deployed, with a clock
you move.

It drives the very Lambda handlers of the SAM application (`functions/*/app.py`, routed
by template.yaml's EventPatterns: the local runtime of `wfr local`) on a fresh
PostgreSQL database, with captured mail and stubbable webhooks.
"""

from __future__ import annotations

import dataclasses
import importlib
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import Any

from ..callback_tokens import is_token, tokens_in
from ..cron import CronSchedule
from ..definition import (
    Branch,
    CronTrigger,
    ForEach,
    Parallel,
    Retry,
    Step,
    StepContext,
    WorkflowDefinition,
    WorkflowRegistry,
    default_registry,
    run_id_for,
)
from ..definition.dsl import Task
from ..durations import format_instant, parse_duration, parse_instant
from ..embedded import drop_database
from ..engine.operator_actions import Operator
from ..engine.pinning import PinnedDefinition, pinned_definitions
from ..engine.run_migration import MigrationReport, MigrationRequest, migrate_runs
from ..engine.step_mapping import parse_mapping
from ..envelope import MAX_DETAIL_DEPTH, MAX_EVENT_BYTES
from ..errors import NotConfigured, RunNotFound, WorkflowDefinitionError
from ..json_input import check_json_value
from ..local.application import find_template, no_template_message
from ..local.runtime import LocalRuntime
from ..storable import DEFAULT_MAX_RESULT_BYTES
from ..store import Store, connect
from ..webhook_guard import WebhookGuard
from .records import RunSnapshot, SentMail, SentWebhook, StubbedHttp, snapshot
from .server import fresh_database, server_url

DEFAULT_NOW = "2030-01-01T09:00:00Z"
# Webhook hosts resolve here in tests: a public address, so the SSRF guard judges URLs
# as in AWS (schemes, literal private addresses) without a DNS lookup.
_PUBLIC_ADDRESS = "93.184.216.34"


def _public_resolver(host: str, port: int) -> list[str]:
    return [_PUBLIC_ADDRESS]


def registry_of(
    modules: Sequence[str] = (), workflows: Sequence[WorkflowDefinition] = ()
) -> WorkflowRegistry:
    """The workflows the modules register when imported (as WORKFLOW_MODULES would load
    them), plus `workflows`.

    Raises:
        WorkflowDefinitionError: a module cannot be imported, or registers no workflow.
    """
    registry = WorkflowRegistry()
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as error:
            raise WorkflowDefinitionError(
                f"module {module!r} cannot be imported: {error}"
            ) from error
        found = default_registry().defined_in(module)
        if not found:
            raise WorkflowDefinitionError(
                f"module {module!r} registers no workflow (define_workflow(...) at import)"
            )
        for definition in found:
            registry.register(definition)
    for definition in workflows:
        registry.register(definition)
    return registry


def _with_task_fn(
    steps: tuple[Step, ...], key: str, fn: Callable[[StepContext], Any]
) -> tuple[tuple[Step, ...], int]:
    """`steps` with the function of every task `key` (nested ones too) replaced, and how
    many were."""
    replaced = 0
    out: list[Step] = []
    for step in steps:
        if isinstance(step, Task) and step.key == key:
            step = dataclasses.replace(step, fn=fn)
            replaced += 1
        elif isinstance(step, Branch):
            on_true, in_true = _with_task_fn(step.on_true, key, fn)
            on_false, in_false = _with_task_fn(step.on_false, key, fn)
            step = dataclasses.replace(step, on_true=on_true, on_false=on_false)
            replaced += in_true + in_false
        elif isinstance(step, (ForEach, Retry)):
            do, inside = _with_task_fn(step.do, key, fn)
            step = dataclasses.replace(step, do=do)
            replaced += inside
        elif isinstance(step, Parallel):
            tasks, inside = _with_task_fn(step.steps, key, fn)
            step = dataclasses.replace(step, steps=tasks)
            replaced += inside
        out.append(step)
    return tuple(out), replaced


class WorkflowTestEnv:
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

        Raises:
            InvalidInput: `payload` is nested deeper than an event's detail may be (99
                levels) or larger than an event (256 KB).
        """
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
        """Move business time forward by `duration` (ISO-8601, e.g. "PT1H", or a
        timedelta) and run everything that becomes due on the way, each at its instant:
        timers, timeouts, retries, cron starts, webhook redeliveries. `advance("PT0S")`
        runs one scheduled cycle without moving the clock.

        Raises:
            InvalidDuration: `duration` is not an ISO-8601 duration.
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
        # A cycle now first, as the minutely schedules would have run one since the last
        # event: it starts the cron clocks of tenants seen for the first time.
        self.runtime.tick()
        while self.now < until:
            stops = [until, self.runtime.next_due_after(self.now), self._next_cron(self.now)]
            self.runtime.set_now(min(s for s in stops if s is not None))
            self.runtime.tick()

    def _next_cron(self, after: datetime) -> datetime | None:
        instants = [
            CronSchedule.parse(wf.trigger.schedule).next_after(after)
            for wf in self.registry.cron_workflows()
            if isinstance(wf.trigger, CronTrigger)
        ]
        return min(instants) if instants else None

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
            RunNotFound: there is no such run for this tenant (or several, without a key).
        """
        if run_id is None and key is not None:
            run_id = run_id_for(workflow, key)
        if run_id is None:
            runs = self.store.runs.for_tenant(tenant, workflow_name=workflow, limit=2)
            if len(runs) != 1:
                raise RunNotFound(tenant, f"<{len(runs)} runs of {workflow}: pass key=>")
            run_id = runs[0].run_id
        events = self.store.streams.load(tenant, run_id)
        if not events:
            raise RunNotFound(tenant, run_id)
        return snapshot(self.store, tenant, run_id, events)

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

    def complete_callback(self, token: str, payload: Any) -> None:
        """Complete a wait_for_callback as an outside system would through the callback
        endpoint, and run what follows at once (the resumed pass, its mail, webhooks).

        Args:
            token: the token, or the text that carried it to the outside system (a mail
                body, a link, a webhook body) holding exactly one.
            payload: the JSON the outside system sends (not null); it lands under the
                wait's result key.

        Raises:
            ValueError: `token` holds no token, or several.
            CallbackRefused: unknown token, used before, expired, or the run moved on.
            InvalidInput: the payload is null, not JSON, too large (256 KB) or nested
                too deeply (100 levels).
        """
        check_json_value(
            payload, "complete_callback(payload=...)", max_bytes=DEFAULT_MAX_RESULT_BYTES
        )
        found = [token] if is_token(token) else tokens_in(token)
        if len(found) != 1:
            raise ValueError(
                f"complete_callback: expected one callback token (wfrcb_...), found {len(found)} "
                f"in {token[:80]!r}"
            )
        self.runtime.complete_callback(found[0], payload, source="tests")

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
            ValueError: no registered workflow has a task with this key.
        """
        registry = WorkflowRegistry()
        replaced = 0
        for definition in self.registry:
            if workflow is None or definition.name == workflow:
                steps, count = _with_task_fn(definition.steps, key, fn)
                definition = dataclasses.replace(definition, steps=steps)
                replaced += count
            registry.register(definition)
        if not replaced:
            where = f"workflow {workflow!r}" if workflow else "any registered workflow"
            raise ValueError(f"stub_task: {where} has no task {key!r}")
        self.registry = registry
        self.runtime.registry = registry

    # --- versions ---------------------------------------------------------------------

    def pinned_definitions(self) -> list[PinnedDefinition]:
        """The definitions waiting runs are pinned to, judged against the registered
        workflows (what `wfr doctor` checks)."""
        return pinned_definitions(self.store, self.registry)

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
        self, modules: Sequence[str] = (), workflows: Sequence[WorkflowDefinition] = ()
    ) -> list[PinnedDefinition]:
        """Replace the registered workflows, as a deploy of new code would, and return
        the definitions whose waiting runs will now fail (empty: the change is safe for
        the runs in this database). The environment goes on with the new workflows.

        Raises:
            WorkflowDefinitionError: a module cannot be imported or defines no workflow.
        """
        registry = registry_of(modules, workflows)
        self.registry = registry
        self.runtime.registry = registry
        return [p for p in pinned_definitions(self.store, registry) if p.fails]
