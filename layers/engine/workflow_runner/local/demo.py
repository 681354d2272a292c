"""`wfr demo`: the sample workflows end to end on the local runtime, with time travel.

Starts an embedded PostgreSQL (or uses DATABASE_URL), migrates, and plays one story
for a fresh tenant: two sign-ups (one engaged), two orders (one approved, one
cancelled), an inventory sync whose partner fails twice before it succeeds, two data
exports delivered as webhook tasks (one partner answers 503 once, then accepts; the
other sits at a private address the SSRF guard refuses, and the failure surfaces in the
run, its timeline and `wfr doctor`); a batch of eight orders fans out onto child runs,
then waits for finance to approve its invoice run through the callback token its mail
carried (the demo answers as `wfr callbacks complete` would); a parcel is quoted by three
carriers at once, one of which cannot quote (its completion policy tolerates one refusal);
a shipment asks two carriers for quotes, each request carrying its own created callback:
one carrier quotes while the run still awaits the other (the quote is kept for its
await), the other declines (a failure the run catches), and the run books the quote;
then eight days pass in a few seconds. Mail is
captured; every webhook is really sent over HTTP, to a sink the demo runs on 127.0.0.1:
the samples' hooks.example.com URLs are redirected there (WFR_WEBHOOK_REDIRECTS) and
127.0.0.1 is allow-listed for the SSRF guard. Everything it started is stopped before
it returns.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from ..callback_tokens import tokens_in
from ..definition import load_workflow_modules
from ..definition.branches import shown_child
from ..engine.cancel import cancel_run
from ..engine.doctor import DoctorReport, run_doctor
from ..graph import run_chart
from ..graph_render import to_mermaid
from ..store import Store, connect
from ..stream import NEVER
from ..timeline import activity_rows, describe_event
from . import routes as r
from .application import find_template, no_template_message
from .runtime import Activity, LocalRuntime
from .sink import WebhookSink, webhook_sink

START = datetime(2026, 1, 5, 8, 0, tzinfo=UTC)
# The export partner is down for the first call: the webhook task retries after 10 s.
SINK_ANSWERS = {"/exports": [503]}
REFUSED_EXPORT = "https://10.20.30.40/exports"
# The fan-out's batch: order o-4 is out of stock (its child run fails; the batch goes on).
BATCH_ORDERS = [
    {"orderId": f"o-{n}", "email": f"customer{n}@example.com", "outOfStock": n == 4}
    for n in range(1, 9)
]


def _entry(detail_type: str, detail: dict[str, Any]) -> dict[str, Any]:
    return {"Source": "demo.shop", "DetailType": detail_type, "Detail": json.dumps(detail)}


class Demo:
    """The story, scene by scene."""

    def __init__(self, out: Any, store: Store, runtime: LocalRuntime, sink: WebhookSink) -> None:
        self.out = out
        self.store = store
        self.rt = runtime
        self.sink = sink
        self.tenant = str(uuid.uuid4())
        self.runs: dict[str, str] = {}

    # --- printing -----------------------------------------------------------------

    def scene(self, title: str) -> None:
        self.out.line("")
        self.out.heading(f"▶ {title}")

    def show(self, activity: Activity, skip: frozenset[str] = frozenset()) -> None:
        rows = [row for row in activity_rows(self.store, activity.events) if row[2] not in skip]
        if rows:
            self.out.table(["TIME", "RUN", "WORKFLOW", "EVENT", "DETAIL"], rows)
        for m in activity.mail:
            self.out.line(
                self.out.paint("  ✉ ", "cyan") + f"to {', '.join(m.recipients)}: {m.subject}"
            )

    def put(self, label: str, detail_type: str, detail: dict[str, Any]) -> Activity:
        event = self.rt.envelope(_entry(detail_type, {"tenantId": self.tenant, **detail}))
        activity = self.rt.put_event(event)
        for _, answer in activity.answers:
            if isinstance(answer, dict):
                for started in answer.get("started") or []:
                    self.runs[label] = started["runId"]
        self.out.line(self.out.paint(f"  {detail_type}", "bold") + f"  {label}")
        self.show(activity)
        return activity

    def travel(self, until: datetime, every: timedelta, quiet: frozenset[str]) -> list[Activity]:
        activities = []
        for activity in self.rt.travel(until, every):
            activities.append(activity)
            self.out.progress(
                f"  ⏩ {activity.now:%a %d %b %H:%M:%S} UTC  (tick {len(activities)})"
            )
        self.out.progress(
            f"  ⏩ {len(activities)} ticks up to {self.rt.now():%a %d %b %H:%M} UTC", final=True
        )
        for activity in activities:
            self.show(activity, skip=quiet)
        return activities

    # --- the story --------------------------------------------------------------

    def play(self) -> int:
        out = self.out
        out.heading("workflow-runner demo: the sample workflows on the local runtime")
        out.line(
            f"tenant {self.tenant}; local time starts at {START:%Y-%m-%d %H:%M} UTC; "
            f"webhooks go to {self.sink.url}"
        )
        self.rt.set_now(START)

        self.scene(
            "Monday 08:00 — two sign-ups, two orders, an inventory change, two exports, "
            "a parcel to quote, three edits of an account"
        )
        self.put("ada", "user.signed-up", {"userId": "active-ada", "email": "ada@example.com"})
        self.put("bob", "user.signed-up", {"userId": "bob", "email": "bob@example.com"})
        self.put(
            "order o-1001",
            "order.placed",
            {"orderId": "o-1001", "total": 42, "email": "ada@example.com"},
        )
        self.put(
            "order o-1002",
            "order.placed",
            {"orderId": "o-1002", "total": 7, "email": "bob@example.com"},
        )
        self.put(
            "sku-42",
            "inventory.changed",
            {"sku": "sku-42", "revision": 3, "failAttempts": 2},
        )
        self.put(
            "export",
            "data.processed",
            {"webhookUrl": f"{self.sink.url}/exports", "data": {"rows": 1280}},
        )
        self.put(
            "export to a private address",
            "data.processed",
            {"webhookUrl": REFUSED_EXPORT, "data": {"rows": 3}},
        )
        self.put(
            "parcel p-1",
            "parcel.ready",
            {"parcelId": "p-1", "weightKg": 3, "carriersDown": ["slowpost"]},
        )

        self.put("shipment s-1", "shipment.ready", {"shipmentId": "s-1", "weightKg": 120})

        for revision in (1, 2, 3):  # a burst of edits: one sync, two minutes after the last
            self.put(
                f"account a-7 edit {revision}",
                "account.updated",
                {"accountId": "a-7", "revision": revision},
            )

        self.scene("A batch of 8 orders fans out: one fulfil-order run per order, 5 at a time")
        self.put("batch b-1", "batch.submitted", {"batchId": "b-1", "orders": BATCH_ORDERS})
        self.children_table(self.runs["batch b-1"])

        self.scene("Pending rows: who waits for what")
        self.pending_table()

        self.scene("08:00–08:03 — partners fail, tasks retry with backoff; a refused export fails")
        self.travel(START + timedelta(minutes=3), timedelta(seconds=30), frozenset())

        self.scene(
            "wfr doctor at 08:03: the refused export, the out-of-stock order and the carrier "
            "that could not quote are worth a look"
        )
        self.doctor()

        self.scene("08:10 — order o-1001 is approved: the waiting run wakes at once")
        self.rt.set_now(START + timedelta(minutes=10))
        self.put("approval", "order.approved", {"orderId": "o-1001", "approver": "carol"})

        self.scene("08:15 — order o-1002 is cancelled (what `wfr cancel` does)")
        self.rt.set_now(START + timedelta(minutes=15))
        cancelled = cancel_run(
            self.store, self.tenant, self.runs["order o-1002"], self.rt.now(), "customer asked"
        )
        out.line(f"  {out.status(cancelled.outcome)}  run {self.runs['order o-1002']}")
        self.show(self.rt.tick())

        self.scene(
            "08:20 — finance approves batch b-1's invoice run with the token its mail carried "
            "(what `wfr callbacks complete` does)"
        )
        self.rt.set_now(START + timedelta(minutes=20))
        self.approve("finance@example.com", {"approved": True, "by": "dana"})

        self.scene(
            "08:25 — shipment s-1: bay_haulage quotes while the run awaits north_freight "
            "(the quote is kept), then north_freight declines (what `wfr callbacks fail` does)"
        )
        self.rt.set_now(START + timedelta(minutes=25))
        self.carrier_answers("bay_haulage", {"price": 310})
        self.carrier_answers("north_freight", error="NoCapacity")

        self.scene("Eight days pass in a few seconds (a tick every 3 hours)")
        self.travel(
            START + timedelta(days=8, hours=1), timedelta(hours=3), frozenset({"daily-report"})
        )
        reports = self.store.runs.for_tenant(self.tenant, "daily-report")
        out.line(
            f"  daily-report (cron 0 9 * * *) ran {len(reports)} times, one per day at 09:00 UTC"
        )

        self.scene("Runs")
        rows = [
            r for r in self.store.runs.for_tenant(self.tenant) if r.workflow_name != "daily-report"
        ]
        out.table(
            ["RUN ID", "WORKFLOW", "STATUS", "LAST CHANGE"],
            [[r.run_id, r.workflow_name, r.status, f"{r.updated_at:%a %d %b %H:%M}"] for r in rows],
            colours=[None, None, "status"],
        )

        self.scene("Timeline of ada's onboarding (wfr runs show)")
        self.timeline(self.runs["ada"])

        self.scene("Timeline of the inventory sync: two failed attempts, then success")
        self.timeline(self.runs["sku-42"])

        self.scene("Timeline of the export: the partner answered 503, the retry was accepted")
        self.timeline(self.runs["export"])

        self.scene("Timeline of the export to a private address: refused, caught, ops told")
        self.timeline(self.runs["export to a private address"])

        self.scene("Timeline of batch b-1: the fan-out, the summary, finance's answer")
        self.timeline(self.runs["batch b-1"])

        self.scene(
            "Timeline of parcel p-1's quote: one carrier could not quote (tolerated), "
            "the cheapest answer was booked"
        )
        self.timeline(self.runs["parcel p-1"])
        steps = self.store.results.of_run(self.tenant, self.runs["parcel p-1"]).values
        out.line(f"  its batch result: {json.dumps(steps['quotes'])}")
        self.scene("Timeline of shipment s-1: two callbacks, a kept quote, a caught failure")
        self.timeline(self.runs["shipment s-1"])

        self.scene("Captured mail")
        out.table(
            ["SENT", "TO", "SUBJECT"],
            [
                [f"{m.sent_at:%a %d %b %H:%M}", ", ".join(m.recipients), m.subject]
                for m in self.store.local.mail()
            ],
        )

        self.scene(f"Webhook requests received by the local sink {self.sink.url}")
        out.table(
            ["METHOD", "PATH", "IDEMPOTENCY-KEY", "BODY"],
            [
                [q.method, q.path, q.idempotency_key[:8] + "…", json.dumps(q.body)[:60]]
                for q in self.sink.received
            ],
        )

        self.scene("Pending rows now")
        self.pending_table()

        self.scene("The graph of ada's run (wfr graph user-onboarding --run …): Mermaid")
        self.graph("user-onboarding", self.runs["ada"])

        self.scene("wfr doctor")
        report = self.doctor()
        expected = {
            "ada": "completed",
            "bob": "completed",
            "order o-1001": "completed",
            "order o-1002": "cancelled",
            "sku-42": "completed",
            "export": "completed",
            "export to a private address": "failed",
            "batch b-1": "completed",
            "parcel p-1": "completed",
            "shipment s-1": "completed",
            "account a-7 edit 1": "completed",  # one debounced run, revision 3
        }
        wrong = {
            label: status
            for label, want in expected.items()
            if (status := self._status(self.runs[label])) != want
        }
        out.line("")
        if wrong or not report.ok:
            out.line(out.status("problem") + f": the story did not end as expected: {wrong}")
            return 1
        out.line(out.status("ok") + ": every run ended as expected")
        return 0

    def approve(self, recipient: str, payload: dict[str, Any]) -> None:
        """Answer a callback with the token from the last mail to `recipient`."""
        mail = [m for m in self.store.local.mail() if m.recipients == [recipient]][-1]
        for line in mail.body.splitlines():
            self.out.line(self.out.paint(f"  ✉ {line}", "dim"))
        [token] = tokens_in(mail.body)
        completion, activity = self.rt.complete_callback(token, payload, source="demo")
        self.out.line(
            f"  {self.out.status('completed')}  callback of run {completion.run_id} "
            f"step {completion.step_index} with {json.dumps(payload)}"
        )
        self.show(activity)

    def carrier_answers(self, carrier: str, payload: Any = None, error: str | None = None) -> None:
        """Answer the callback a carrier's quote request carried: a quote, or (`error`)
        a failure."""
        [request] = [q for q in self.sink.received if q.path == f"/carriers/{carrier}"]
        [token] = tokens_in(str(request.body["answerTo"]))
        if error is None:
            completion, activity = self.rt.complete_callback(token, payload, source="demo")
            what = f"quoted {json.dumps(payload)}"
        else:
            completion, activity = self.rt.fail_callback(token, error, None, source="demo")
            what = f"failed {error}"
        then = "the run resumes" if completion.run_due else "kept for its await"
        self.out.line(
            f"  {self.out.status('completed' if error is None else 'failed')}  {carrier}: "
            f"callback of run {completion.run_id} {what}; {then}"
        )
        self.show(activity)

    def doctor(self) -> DoctorReport:
        routes = r.template_routes(self.rt.routing.template, self.rt.registry)
        report = run_doctor(self.store, self.rt.registry, self.tenant, routes, self.rt.now())
        for check in report.checks:
            self.out.line(f"  {self.out.status(check.status):<8} {check.name}: {check.summary}")
            if check.status != "ok":
                for item in check.items[:3]:
                    self.out.line(self.out.paint(f"           {item}", "dim"))
        return report

    def _status(self, run_id: str) -> str:
        summary = self.store.runs.get(self.tenant, run_id)
        return summary.status if summary else "missing"

    def children_table(self, run_id: str) -> None:
        children = self.store.children.of_run(self.tenant, run_id)
        self.out.table(
            ["ITEM", "CHILD RUN", "WORKFLOW", "STATUS", "REASON"],
            [
                [
                    c.item_index,
                    c.child_run_id[:8],
                    shown_child(c.child_workflow, c.item_index, c.kind)[0],
                    c.status,
                    c.reason or "",
                ]
                for c in children
            ],
            colours=[None, None, None, "status"],
        )
        done = self.store.streams.load(self.tenant, run_id)[-1].payload.get("result")
        self.out.line(f"  batch-fulfilment returned {done}")

    def pending_table(self) -> None:
        rows = self.store.pending.for_tenant(self.tenant)
        self.out.table(
            ["RUN", "WORKFLOW", "STEP", "WAITING", "WAKE AT"],
            [
                [
                    p.run_id[:8],
                    p.workflow_name,
                    p.step_index,
                    p.suspension_event_type.removeprefix("workflow.")
                    + (f" {p.wait_event_type}" if p.wait_event_type else ""),
                    "when its task ends"
                    if p.wake_at >= NEVER
                    else f"{p.wake_at:%a %d %b %H:%M:%S}",
                ]
                for p in rows
            ],
            empty="no pending rows: nothing is waiting",
        )

    def timeline(self, run_id: str) -> None:
        events = self.store.streams.load(self.tenant, run_id)
        self.out.table(
            ["V", "RECORDED", "EVENT", "DETAIL"],
            [
                [
                    e.version,
                    f"{e.recorded_at:%a %d %b %H:%M:%S}",
                    e.type.removeprefix("workflow."),
                    describe_event(e),
                ]
                for e in events
            ],
        )

    def graph(self, workflow: str, run_id: str) -> None:
        definition = self.rt.registry.latest(workflow)
        chart = run_chart(self.store, definition, self.tenant, run_id)
        for line in to_mermaid(chart).splitlines():
            self.out.line("  " + line)


def run_demo(
    out: Any,
    environ: Mapping[str, str],
    database_url: str | None = None,
    then: Callable[[str], object] | None = None,
) -> int:
    """Play the demo; return the exit code (0 when every run ended as expected).

    `then` is called with the database's URL after the demo, while its database still
    exists (`wfr demo --console` serves the console there).
    """
    started = time.monotonic()
    url = database_url or environ.get("DATABASE_URL")
    server = None
    if not url:
        from ..embedded import start_embedded_postgres

        out.line(out.paint("starting an embedded PostgreSQL…", "dim"))
        server, url = start_embedded_postgres(fast=True)
    try:
        store = connect(url)
        try:
            applied = store.migrate()
            if applied:
                out.line(out.paint(f"migrated: {', '.join(m.name for m in applied)}", "dim"))
            template = find_template()
            if template is None:
                out.line(f"wfr: error: {no_template_message()}")
                return 1
            registry = load_workflow_modules({"WORKFLOW_MODULES": "sample_workflows"})
            with webhook_sink(SINK_ANSWERS) as sink:
                env = {
                    "WEBHOOK_ALLOW_HOSTS": "127.0.0.1",
                    "WFR_WEBHOOK_REDIRECTS": f"hooks.example.com={sink.url}",
                }
                runtime = LocalRuntime(store, registry, template, start=START, environ=env)
                code = Demo(out, store, runtime, sink).play()
        finally:
            store.close()
        out.line(out.paint(f"demo finished in {time.monotonic() - started:.1f} s", "dim"))
        if then is not None:
            then(url)
    finally:
        if server is not None:
            server.cleanup()
    return code
