"""What a million `user-onboarding` runs cost on AWS, and what a month costs before any.

    python -m bench.cost              # make cost: measure, then write bench/cost.json
                                      # and docs/COST.md
    python -m bench.cost --runs 400   # a larger sample

Two parts, kept apart so every figure can be traced:

1. **Measured per run** on this machine: N onboarding runs (signed up, welcome mail,
   a day's wait, tips or reminder mail, a week's wait, CRM webhook) driven through the
   real Lambda handlers of template.yaml on an embedded PostgreSQL, delivered the way
   AWS delivers them: each event through both intake queues (one SQS record per
   invocation), every nudge as its own asynchronous invocation, every resume request as
   its own batch. Counted: invocations per function, the handlers' own CPU time, SQL
   statements and transactions, AWS API calls (SQS sends, Lambda invokes, SES, HTTP),
   application log bytes (Powertools JSON lines and EMF metric records, at INFO),
   write-ahead-log bytes and table growth.
2. **Priced** with list prices (us-east-1, Lambda arm64; check the current price pages)
   and the assumptions in ASSUMPTIONS, which turn local measurements into Lambda
   billed time, Aurora I/O, NAT bytes and X-Ray traces. Change them and re-run.

The scheduled functions (three one-minute schedules) are fixed monthly cost; the runs'
share of the due scan's work is counted in the resume path (a tick that finds rows
sends them; its idle cost is in the fixed part).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import sys
import time
import uuid
from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench import cost_durable

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "cost.json"
REPORT = ROOT / "docs" / "COST.md"

# --- prices and assumptions ---------------------------------------------------------------


@dataclass(frozen=True)
class Prices:
    """List prices, us-east-1, USD (checked against the AWS price pages, 2026-11)."""

    lambda_request: float = 0.20 / 1e6
    lambda_gb_s_arm64: float = 0.0000133334
    lambda_gb_s_x86: float = 0.0000166667
    sqs_request: float = 0.40 / 1e6
    logs_ingest_gb: float = 0.50
    xray_trace: float = 5.00 / 1e6
    aurora_acu_hour: float = 0.12
    aurora_storage_gb_month: float = 0.10
    aurora_io: float = 0.20 / 1e6
    nat_hour: float = 0.045
    nat_gb: float = 0.045
    public_ipv4_hour: float = 0.005
    endpoint_az_hour: float = 0.01
    endpoint_gb: float = 0.01
    secrets_call: float = 0.05 / 10_000
    secret_month: float = 0.40
    metric_month: float = 0.30
    alarm_month: float = 0.10
    sfn_transition: float = 0.025 / 1000
    sfn_express_request: float = 1.00 / 1e6
    sfn_express_gb_s: float = 0.00001667
    scheduler_invocation: float = 1.00 / 1e6
    # Lambda durable functions, from aws.amazon.com/lambda/pricing/ as transcribed by two
    # secondary copies of that page (api-evangelist/aws-lambda's price harvest of
    # 2026-09-20: "$8.00/M"; a survey citing it: $8.00 per million durable operations,
    # $0.25 per GB written, $0.15 per GB-month retained). Not read from AWS's page here.
    durable_operation: float = 8.00 / 1e6
    durable_data_written_gb: float = 0.25
    durable_data_retained_gb_month: float = 0.15


@dataclass(frozen=True)
class Assumptions:
    """What turns a local measurement into an AWS bill; every one is a stated guess."""

    memory_gb: float = 0.5  # MemorySize 512
    # A 512 MB function gets about 0.29 of a vCPU (1,769 MB = one vCPU); Graviton2 single
    # thread is taken as fast as this machine's core.
    cpu_slowdown: float = 1769 / 512
    api_call_ms: float = 20.0  # SQS send batch, async Lambda invoke, SES send, from a VPC
    webhook_ms: float = 150.0  # the CRM endpoint's answer
    sql_round_trip_ms: float = 0.8  # Lambda to Aurora in one VPC
    platform_log_bytes: int = 700  # START/END/REPORT as JSON (LogFormat JSON)
    api_call_bytes: int = 4000  # request + response through NAT, TLS on a kept connection
    cold_start_share: float = 0.02  # invocations that pay INIT (billed since 2025-08)
    init_s: float = 1.7  # import app (0.47 s here, bench/cold_start.py) x cpu_slowdown
    # Aurora Standard bills I/O: a commit writes its WAL in 4 KB units (at least one);
    # reads come from the buffer cache once the working set is warm.
    aurora_write_unit: int = 4096
    # X-Ray samples for Lambda 1 request per second and 5% beyond (not configurable for
    # Lambda); taken here as applying per function, the costlier reading.
    xray_reservoir_per_s: float = 1.0
    xray_rate: float = 0.05
    runs_per_month: int = 1_000_000
    hours_per_month: float = 730.0
    # Fixed-cost inventory of the template as shipped (alarms are counted from it).
    # Metric names x dimension sets the functions emit: 27 before durable tasks, plus the
    # worker's DeliveriesFailed, TasksCompleted, TasksFailed and TaskAttemptsFailed, the
    # callback endpoint's CallbacksCompleted and CallbacksRefused, and the purge's
    # RunsPurged, PurgedEvents, PurgedInboxRows and PurgeBacklogLeft.
    custom_metrics: int = 37
    # RUN_RETENTION's default: a settled run is purged this long after it settled, so a
    # run's rows are stored about this long (plus its own lifetime, a week here).
    retention_days: float = 30.0
    sqs_pollers_per_queue: int = 5  # Lambda's SQS pollers, long-polling 20 s
    warm_environments: int = 8  # each refetches the DB secret every 5 minutes
    idle_tick_ms: float = 60.0  # a schedule tick that finds nothing: ~6 statements


PRICES = Prices()
ASSUMPTIONS = Assumptions()
FUNCTIONS = [
    "TriggerProjectionFunction",
    "EventWakeupFunction",
    "PendingProjectionFunction",
    "DueScanFunction",
    "ResumeRunFunction",
    "StepDispatcherFunction",
]

# --- measurement ----------------------------------------------------------------------------


@dataclass
class Measured:
    """Totals over the measured runs (divide by `runs` for per run)."""

    runs: int = 0
    invocations: Counter[str] = field(default_factory=Counter)
    cpu_s: Counter[str] = field(default_factory=Counter)
    statements: Counter[str] = field(default_factory=Counter)
    log_bytes: Counter[str] = field(default_factory=Counter)
    api_calls: Counter[str] = field(default_factory=Counter)  # sqs_send, lambda_invoke, ses, http
    sqs_requests: int = 0  # every SQS request of the data path (sends, receives, deletes)
    transactions: int = 0
    wal_bytes: int = 0
    write_units: int = 0
    storage_bytes: int = 0


class _Counting(io.TextIOBase):
    def __init__(self) -> None:
        self.bytes = 0

    def write(self, text: str) -> int:
        self.bytes += len(text.encode())
        return len(text)


_STATEMENTS = [0]


def _count_statements() -> list[int]:
    """Count every Connection.execute (the store's only way to send SQL); patched once."""
    import psycopg

    original = psycopg.Connection.execute
    if not getattr(original, "counting", False):

        def execute(self: Any, *args: Any, **kwargs: Any) -> Any:
            _STATEMENTS[0] += 1
            return original(self, *args, **kwargs)

        execute.counting = True  # type: ignore[attr-defined]
        psycopg.Connection.execute = execute  # type: ignore[method-assign]
    return _STATEMENTS


def _db_counters(admin: Any, dbname: str) -> tuple[int, int]:
    row = admin.execute(
        "SELECT xact_commit, pg_current_wal_lsn() - '0/0'::pg_lsn "
        "FROM pg_stat_database WHERE datname = %s",
        (dbname,),
    ).fetchone()
    return int(row[0]), int(row[1])


def measure(runs: int = 200, narrowed: bool = False) -> Measured:
    """Drive `runs` onboarding runs through the handlers; count what AWS would bill.

    Args:
        runs: how many onboarding runs.
        narrowed: the rules list the registered detail-types (TriggerDetailTypes,
            AwaitedDetailTypes), so a trigger event reaches TriggerProjection only;
            by default both rules take every event.
    """
    os.environ.update(
        {
            "POWERTOOLS_TRACE_DISABLED": "true",
            "POWERTOOLS_SERVICE_NAME": "workflow-runner",
            "POWERTOOLS_METRICS_NAMESPACE": "WorkflowRunner",
            "POWERTOOLS_LOG_LEVEL": "INFO",
            "AWS_DEFAULT_REGION": "eu-central-1",
        }
    )
    import psycopg
    from workflow_runner.aws.inprocess import FakeLambdaContext, build_inprocess_runtime
    from workflow_runner.aws.lambda_support import logger
    from workflow_runner.aws.template import load_handlers
    from workflow_runner.clock import ManualClock
    from workflow_runner.embedded import database_url, start_embedded_postgres
    from workflow_runner.ports import set_runtime
    from workflow_runner.settings import Settings
    from workflow_runner.store import apply_migrations, connect

    statements = _count_statements()
    handlers = load_handlers(ROOT / "template.yaml")
    # Durability off is closer to Aurora here: its log-structured storage writes no
    # full-page images, and commit latency is not what is measured.
    server, admin_url = start_embedded_postgres(fast=True)
    result = Measured(runs=runs)
    try:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute("CREATE DATABASE cost")
            url = database_url(admin_url, "cost")
            with psycopg.connect(url, autocommit=True) as conn:
                apply_migrations(conn)  # type: ignore[arg-type]
            store = connect(url)
            start = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
            clock = ManualClock(start)
            settings = Settings(database_url=url, mail_sender="noreply@example.com")
            # Only the onboarding workflow: the samples' daily cron would add its own runs.
            from sample_workflows.user_onboarding import user_onboarding
            from workflow_runner.definition import WorkflowRegistry

            registry = WorkflowRegistry()
            registry.register(user_onboarding)
            rt = build_inprocess_runtime(store, clock, settings, registry=registry)
            set_runtime(rt)
            queue, nudger = rt.resume_queue, rt.nudger
            mailer, http = rt.mailer, rt.http
            logs = _Counting()
            logger.registered_handler.setStream(logs)  # type: ignore[attr-defined]

            def invoke(name: str, event: Any) -> None:
                before_logs, before_sql = logs.bytes, statements[0]
                cpu = time.thread_time()
                with contextlib.redirect_stdout(logs):  # EMF metric records
                    handlers[name](event, FakeLambdaContext())
                result.cpu_s[name] += time.thread_time() - cpu
                result.invocations[name] += 1
                result.log_bytes[name] += logs.bytes - before_logs
                result.statements[name] += statements[0] - before_sql

            def settle() -> None:
                # Every nudge is its own asynchronous invocation, every visible resume
                # request its own batch, until nothing is left.
                while True:
                    projection, dispatcher = nudger.projection, nudger.dispatcher  # type: ignore[attr-defined]
                    nudger.take()  # type: ignore[attr-defined]
                    for _ in range(projection):
                        invoke("PendingProjectionFunction", {"source": "nudge"})
                    for _ in range(dispatcher):
                        invoke("StepDispatcherFunction", {"source": "nudge"})
                    requests = queue.receive(limit=1)  # type: ignore[attr-defined]
                    if requests:
                        result.sqs_requests += 2  # the poller's receive and delete
                        invoke("ResumeRunFunction", queue.sqs_event(requests))  # type: ignore[attr-defined]
                    if not (projection or dispatcher or requests):
                        return

            def intake_record(event: dict[str, Any]) -> dict[str, Any]:
                body = json.dumps(event)
                return {"Records": [{"messageId": str(uuid.uuid4()), "body": body}]}

            tick = {"source": "aws.events", "detail-type": "Scheduled Event", "detail": {}}
            commits0, wal0 = _db_counters(admin, "cost")
            mail0, http0 = len(mailer.sent), len(http.requests)  # type: ignore[attr-defined]
            sent_batches = _count_send_batches(queue)
            tenant = str(uuid.uuid4())
            for i in range(runs):
                event = {
                    "version": "0",
                    "id": str(uuid.uuid4()),
                    "detail-type": "user.signed-up",
                    "source": "com.example.accounts",
                    "account": "123456789012",
                    "time": clock.now().isoformat().replace("+00:00", "Z"),
                    "region": "eu-central-1",
                    "resources": [],
                    "detail": {
                        "tenantId": tenant,
                        "userId": f"{'active' if i % 2 else 'new'}-{i}",
                        "email": f"user{i}@example.com",
                    },
                }
                # One record in each intake queue whose rule matches (sent by EventBridge,
                # received and deleted by the poller); by default both rules match.
                result.sqs_requests += 3
                invoke("TriggerProjectionFunction", intake_record(event))
                if not narrowed:
                    result.sqs_requests += 3
                    invoke("EventWakeupFunction", intake_record(event))
                settle()
            for days in (1, 8):
                # The tick before the wait ends leases the rows and sends them delayed.
                clock.set(start + timedelta(days=days, seconds=-30))
                invoke("DueScanFunction", tick)
                clock.set(start + timedelta(days=days))  # the messages' delay ends
                settle()
            # Sessions flush their statistics at most once a second: make this one's due.
            store.conn.execute("SELECT pg_stat_force_next_flush()")
            store.conn.commit()
            time.sleep(1.2)
            commits1, wal1 = _db_counters(admin, "cost")
            result.transactions = commits1 - commits0
            result.wal_bytes = wal1 - wal0
            result.write_units = max(
                result.transactions, math.ceil(result.wal_bytes / ASSUMPTIONS.aurora_write_unit)
            )
            batches = sent_batches[0]
            result.api_calls["sqs_send"] = batches
            result.sqs_requests += batches
            result.api_calls["lambda_invoke"] = (
                result.invocations["PendingProjectionFunction"]
                + result.invocations["StepDispatcherFunction"]
            )
            result.api_calls["ses"] = len(mailer.sent) - mail0  # type: ignore[attr-defined]
            result.api_calls["http"] = len(http.requests) - http0  # type: ignore[attr-defined]
            statuses = Counter(
                r["status"]
                for r in store.conn.execute("SELECT status FROM workflow_runs").fetchall()
            )
            if statuses != Counter({"completed": runs}):
                raise RuntimeError(f"the runs did not complete: {dict(statuses)}")
            result.storage_bytes = int(
                store.conn.execute(
                    "SELECT sum(pg_total_relation_size(c.oid)) AS bytes FROM pg_class c "
                    "JOIN pg_namespace n ON n.oid = c.relnamespace "
                    "WHERE n.nspname = 'public' AND c.relkind = 'r'"
                ).fetchone()["bytes"]
            )
            set_runtime(None)
            store.close()
    finally:
        server.cleanup()
    return result


def _count_send_batches(queue: Any) -> list[int]:
    """Count the SendMessageBatch calls the SQS port would make (ten requests each)."""
    batches = [0]
    send = queue.send

    def counted(requests: Any) -> Any:
        batches[0] += math.ceil(len(requests) / 10)
        return send(requests)

    queue.send = counted
    return batches


# --- per run -----------------------------------------------------------------------------


def per_run(m: Measured) -> dict[str, Any]:
    """The measured totals divided by the number of runs, in the units prices use."""
    n = m.runs
    return {
        "invocations": {f: m.invocations[f] / n for f in FUNCTIONS if m.invocations[f]},
        "cpu_ms": {f: 1000 * m.cpu_s[f] / n for f in FUNCTIONS if m.invocations[f]},
        "sql_statements": {f: m.statements[f] / n for f in FUNCTIONS if m.invocations[f]},
        "app_log_bytes": {f: m.log_bytes[f] / n for f in FUNCTIONS if m.invocations[f]},
        "api_calls": {k: v / n for k, v in m.api_calls.items()},
        "sqs_requests": m.sqs_requests / n,
        "transactions": m.transactions / n,
        "wal_bytes": m.wal_bytes / n,
        "aurora_write_ios": m.write_units / n,
        "storage_bytes": m.storage_bytes / n,
    }


def lambda_ms(run: dict[str, Any], a: Assumptions) -> dict[str, float]:
    """Billed milliseconds per run and function: the handler's CPU slowed to the
    function's vCPU share, plus its SQL round trips and AWS calls (counted per function:
    nudges by the functions that nudge, SQS sends by the ones that send, mail and
    webhooks by the dispatcher)."""
    calls = run["api_calls"]
    invocations = run["invocations"]
    ms = {}
    for f in invocations:
        ms[f] = run["cpu_ms"][f] * a.cpu_slowdown + run["sql_statements"][f] * a.sql_round_trip_ms
    # Who makes the AWS calls: nudges come from the functions that run passes or wake
    # runs; sends from the due scan and the projection; mail and webhooks from the
    # dispatcher. Spread evenly over the senders (a model, not a measurement).
    nudgers = [f for f in ("TriggerProjectionFunction", "ResumeRunFunction") if f in ms]
    for f in nudgers:
        ms[f] += calls.get("lambda_invoke", 0) / len(nudgers) * a.api_call_ms
    senders = [f for f in ("DueScanFunction", "PendingProjectionFunction") if f in ms]
    for f in senders:
        ms[f] += calls.get("sqs_send", 0) / len(senders) * a.api_call_ms
    if "StepDispatcherFunction" in ms:
        ms["StepDispatcherFunction"] += (
            calls.get("ses", 0) * a.api_call_ms + calls.get("http", 0) * a.webhook_ms
        )
    # A share of invocations starts cold and pays the INIT phase.
    for f, count in invocations.items():
        ms[f] += count * a.cold_start_share * a.init_s * 1000
    return ms


def xray_traces_per_run(run: dict[str, Any], a: Assumptions) -> float:
    """Traces recorded per run with TracingMode=Active, at the assumed monthly volume."""
    seconds = a.hours_per_month * 3600
    traced = 0.0
    for count in run["invocations"].values():
        rate = count * a.runs_per_month / seconds  # invocations per second of one function
        sampled = min(rate, a.xray_reservoir_per_s) + a.xray_rate * max(
            0.0, rate - a.xray_reservoir_per_s
        )
        traced += sampled * seconds / a.runs_per_month
    return traced


def variable_cost(
    run: dict[str, Any], p: Prices, a: Assumptions, *, tracing: bool, endpoints: bool
) -> dict[str, float]:
    """USD per million runs, by item."""
    million = 1e6
    ms = lambda_ms(run, a)
    invocations = sum(run["invocations"].values())
    log_bytes = sum(run["app_log_bytes"].values()) + invocations * a.platform_log_bytes
    calls = run["api_calls"]
    # Through NAT: our own API calls and webhooks. With interface endpoints, SQS and
    # Lambda calls use the endpoints instead; SES and webhooks still need NAT.
    private = calls.get("sqs_send", 0) + calls.get("lambda_invoke", 0)
    public = calls.get("ses", 0) + calls.get("http", 0)
    nat_gb = (public + (0 if endpoints else private)) * a.api_call_bytes / 1e9
    endpoint_gb = (private if endpoints else 0) * a.api_call_bytes / 1e9
    items = {
        "Lambda requests": invocations * p.lambda_request,
        "Lambda duration (arm64)": sum(ms.values()) / 1000 * a.memory_gb * p.lambda_gb_s_arm64,
        "SQS requests": run["sqs_requests"] * p.sqs_request,
        "CloudWatch Logs ingestion": log_bytes / 1e9 * p.logs_ingest_gb,
        "X-Ray traces": xray_traces_per_run(run, a) * p.xray_trace if tracing else 0.0,
        "NAT data processing": nat_gb * p.nat_gb + endpoint_gb * p.endpoint_gb,
        "Aurora I/O (Standard)": run["aurora_write_ios"] * p.aurora_io,
        "Aurora storage, first month": run["storage_bytes"] / 1e9 * p.aurora_storage_gb_month,
    }
    return {k: round(v * million, 2) for k, v in items.items()}


def fixed_cost(p: Prices, a: Assumptions, *, ha: bool) -> dict[str, float]:
    """USD per month before any run: the template as shipped, or in the HA shape
    (NatGateways=per-az, InterfaceEndpoints=true, DatabaseFailoverReplica=true)."""
    h = a.hours_per_month
    ticks = 3 * 60 * h  # three one-minute schedules
    items = {
        "Aurora writer, 0.5 ACU minimum": 0.5 * h * p.aurora_acu_hour,
        "NAT gateway (one AZ)": h * p.nat_hour,
        "NAT public IPv4 address": h * p.public_ipv4_hour,
        "Schedules: 3 x 43,800 idle ticks (requests, duration, logs)": ticks
        * (p.lambda_request + a.memory_gb * a.idle_tick_ms / 1000 * p.lambda_gb_s_arm64)
        + ticks * (a.platform_log_bytes + 400) / 1e9 * p.logs_ingest_gb,
        "SQS pollers' empty receives (3 queues)": 3
        * a.sqs_pollers_per_queue
        * 3
        * 60
        * h
        * p.sqs_request,
        "CloudWatch alarms": alarm_count() * p.alarm_month,
        "CloudWatch custom metrics": a.custom_metrics * p.metric_month,
        "Secrets Manager (secret + refetches)": p.secret_month
        + a.warm_environments * 12 * h * p.secrets_call,
    }
    if ha:
        items |= {
            "Aurora failover replica, 0.5 ACU minimum": 0.5 * h * p.aurora_acu_hour,
            "Second NAT gateway": h * p.nat_hour,
            "Second NAT public IPv4 address": h * p.public_ipv4_hour,
            "Interface endpoints (SQS, Lambda, Secrets Manager x 2 AZs)": 6
            * h
            * p.endpoint_az_hour,
        }
    return {k: round(v, 2) for k, v in items.items()}


def _steady_gb(run: dict[str, Any], a: dict[str, Any]) -> float:
    """GB held at a steady monthly volume: each run stored its week of life plus the
    retention after it settles (the onboarding workflow waits a day and a week)."""
    days_kept = 8.0 + float(a["retention_days"])
    return float(run["storage_bytes"]) * a["runs_per_month"] * days_kept / 30.4 / 1e9


def alarm_count() -> int:
    """Alarms template.yaml creates with its default parameters (a database included)."""
    from workflow_runner.aws.template import load_template

    resources = load_template(ROOT / "template.yaml")["Resources"]
    return sum(1 for r in resources.values() if r["Type"] == "AWS::CloudWatch::Alarm")


def step_functions(p: Prices) -> dict[str, Any]:
    """The same workflow on Step Functions, per million runs."""
    # Standard: SendWelcome (SES task) -> WaitDay -> Engaged (Pass) -> Choice ->
    # SendTips | SendGettingStarted (task) -> WaitWeek -> CallCrm (HTTP task) -> Succeed.
    transitions = 8
    standard = transitions * p.sfn_transition * 1e6
    # Express runs at most five minutes, so it cannot wait a week: the same workflow as
    # three Express executions (one per stretch between waits), chained by two
    # EventBridge Scheduler one-time schedules. Each execution: about 0.3 s at 64 MB.
    express_segments, scheduler_hops, seconds, gb = 3, 2, 0.3, 0.064
    express = (
        express_segments * (p.sfn_express_request + seconds * gb * p.sfn_express_gb_s)
        + scheduler_hops * p.scheduler_invocation
    ) * 1e6
    return {
        "standard_transitions_per_run": transitions,
        "standard_per_million": round(standard, 2),
        "express_with_scheduler_per_million": round(express, 2),
    }


def price(m: Measured, narrowed: Measured) -> dict[str, Any]:
    """Everything the report shows, from the measurements, PRICES and ASSUMPTIONS."""
    run = per_run(m)
    shipped = variable_cost(run, PRICES, ASSUMPTIONS, tracing=False, endpoints=False)
    traced = variable_cost(run, PRICES, ASSUMPTIONS, tracing=True, endpoints=False)
    ha = variable_cost(run, PRICES, ASSUMPTIONS, tracing=False, endpoints=True)
    fixed = fixed_cost(PRICES, ASSUMPTIONS, ha=False)
    fixed_ha = fixed_cost(PRICES, ASSUMPTIONS, ha=True)
    sfn = step_functions(PRICES)
    ours = sum(shipped.values())
    fixed_total = sum(fixed.values())
    saving_per_run = (sfn["standard_per_million"] - ours) / 1e6
    from sample_workflows.user_onboarding import user_onboarding

    durable = cost_durable.durable_function(user_onboarding.steps, PRICES, ASSUMPTIONS)
    durable["per_month_at_runs_per_month"] = round(
        durable["variable_per_million_total"] * ASSUMPTIONS.runs_per_month / 1e6, 2
    )
    durable["break_even_runs_per_month_vs_shipped"] = cost_durable.break_even_runs(
        durable["variable_per_million_total"], ours, fixed_total
    )
    result: dict[str, Any] = {
        "assumptions": asdict(ASSUMPTIONS),
        "prices": asdict(PRICES),
        "measured_runs": m.runs,
        "per_run": run,
        "lambda_ms_per_run": {k: round(v, 1) for k, v in lambda_ms(run, ASSUMPTIONS).items()},
        "xray_traces_per_run": round(xray_traces_per_run(run, ASSUMPTIONS), 2),
        "variable_per_million": shipped,
        "variable_per_million_total": round(ours, 2),
        "variable_per_million_traced": traced,
        "variable_per_million_traced_total": round(sum(traced.values()), 2),
        "variable_per_million_ha_total": round(sum(ha.values()), 2),
        "fixed_per_month": fixed,
        "fixed_per_month_total": round(fixed_total, 2),
        "fixed_per_month_ha": fixed_ha,
        "fixed_per_month_ha_total": round(sum(fixed_ha.values()), 2),
        "step_functions": sfn,
        "durable_functions": durable,
        "ratio_vs_standard": round(ours / sfn["standard_per_million"], 3),
        "break_even_runs_per_month_vs_standard": round(fixed_total / saving_per_run),
        "break_even_runs_per_month_vs_standard_ha": round(
            sum(fixed_ha.values()) / ((sfn["standard_per_million"] - sum(ha.values())) / 1e6)
        ),
    }
    # What the design allows beyond the defaults: rules narrowed to the registered types
    # (samconfig does it for the samples) and PlatformLogLevel=WARN.
    lean_run = per_run(narrowed)
    lean = variable_cost(lean_run, PRICES, ASSUMPTIONS, tracing=False, endpoints=False)
    quiet_logs = replace(ASSUMPTIONS, platform_log_bytes=0)
    leanest = variable_cost(lean_run, PRICES, quiet_logs, tracing=False, endpoints=False)
    result["narrowed"] = {
        "per_run": lean_run,
        "variable_per_million": lean,
        "variable_per_million_total": round(sum(lean.values()), 2),
        "variable_per_million_without_platform_logs": leanest,
        "variable_per_million_without_platform_logs_total": round(sum(leanest.values()), 2),
    }
    return result


def as_json(m: Measured) -> dict[str, Any]:
    return {
        k: (dict(v) if isinstance(v, Counter) else v)
        for k, v in ((f, getattr(m, f)) for f in m.__dataclass_fields__)
    }


# --- report ----------------------------------------------------------------------------------


def _usd(value: float) -> str:
    return f"${value:,.2f}"


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return lines


def write_report(r: dict[str, Any], path: Path) -> None:
    """docs/COST.md from one `price()` result."""
    a, p, run = r["assumptions"], r["prices"], r["per_run"]
    sfn = r["step_functions"]
    narrowed = r["narrowed"]
    ms = r["lambda_ms_per_run"]
    invocations = sum(run["invocations"].values())
    app_logs = sum(run["app_log_bytes"].values())
    out = [
        "# Cost",
        "",
        "Generated by `make cost` (`python -m bench.cost`) from `bench/cost.json`; do not edit",
        f"by hand. Per-run figures were measured on {r['measured_runs']} `user-onboarding` runs",
        "driven through the real handlers (see the module's docstring for what is measured and",
        "what is assumed); prices are us-east-1 list prices. Mail (SES, two per run: $200 per",
        "million runs) and the domain event itself (EventBridge, $1 per million) are the same",
        "for every design compared here and are left out.",
        "",
        "## Summary",
        "",
    ]
    rows = [
        [
            "workflow-runner as shipped (TracingMode=PassThrough, rules take every event)",
            _usd(r["variable_per_million_total"]),
            _usd(r["fixed_per_month_total"]),
        ],
        [
            "... rules listing the registered types (TriggerDetailTypes, AwaitedDetailTypes; "
            "samconfig does)",
            _usd(narrowed["variable_per_million_total"]),
            _usd(r["fixed_per_month_total"]),
        ],
        [
            "... and PlatformLogLevel=WARN",
            _usd(narrowed["variable_per_million_without_platform_logs_total"]),
            _usd(r["fixed_per_month_total"]),
        ],
        [
            f"as shipped with TracingMode=Active, at {a['runs_per_month']:,} runs a month",
            _usd(r["variable_per_million_traced_total"]),
            _usd(r["fixed_per_month_total"]),
        ],
        [
            "HA shape (NAT per AZ, interface endpoints, failover replica)",
            _usd(r["variable_per_million_ha_total"]),
            _usd(r["fixed_per_month_ha_total"]),
        ],
        [
            f"Step Functions Standard ({sfn['standard_transitions_per_run']} transitions)",
            _usd(sfn["standard_per_million"]),
            "$0.00",
        ],
        [
            "Step Functions Express + EventBridge Scheduler for the waits",
            _usd(sfn["express_with_scheduler_per_million"]),
            "$0.00",
        ],
        [
            f"Lambda durable functions ({r['durable_functions']['operations_per_run']} durable "
            f"operations, {r['durable_functions']['invocations_per_run']} invocations)",
            _usd(r["durable_functions"]["variable_per_million_total"]),
            "$0.00",
        ],
    ]
    out += _table(["design", "variable, per million runs", "fixed, per month"], rows)
    out += [
        "",
        f"- **Against Step Functions Standard:** {r['ratio_vs_standard']:.0%} of its variable "
        f"cost as shipped ({_usd(r['variable_per_million_total'])} against "
        f"{_usd(sfn['standard_per_million'])} per million runs; the goal was at most 20%).",
        f"- **Break-even against Standard:** the fixed {_usd(r['fixed_per_month_total'])} a "
        f"month is recovered at {r['break_even_runs_per_month_vs_standard']:,} runs a month "
        f"({_usd(r['fixed_per_month_total'])} / ({_usd(sfn['standard_per_million'])} - "
        f"{_usd(r['variable_per_million_total'])}) per million); in the HA shape at "
        f"{r['break_even_runs_per_month_vs_standard_ha']:,}. Below that, Standard is cheaper.",
        "- **Against Express:** Express executions end after five minutes, so this workflow "
        "(a day's and a week's wait) needs three executions chained by EventBridge Scheduler "
        f"one-time schedules: {_usd(sfn['express_with_scheduler_per_million'])} per million "
        "runs, below our variable cost. There is no break-even: that design is cheaper at "
        "every volume, and what it costs instead is building what the engine provides (state "
        "carried between executions, waits for events with timeouts and correlation, "
        "retries across executions, idempotent triggers, a run history to query).",
        cost_durable.summary_line(r),
        "- **X-Ray** is the largest single item when on: Lambda samples one request per second "
        "and 5% beyond, so at low volume nearly every invocation is traced "
        f"({r['xray_traces_per_run']} traces per run at {a['runs_per_month']:,} runs a month, "
        "$5 per million traces). TracingMode defaults to PassThrough for that reason; turn it "
        "on per stage to debug.",
        f"- **Storage is bounded by retention:** {run['storage_bytes'] / 1024:.1f} KB per run "
        "(streams, inbox, summaries, outbox, indexes), kept RUN_RETENTION "
        f"({a['retention_days']:.0f} days) after the run settles, then purged by the due scan. "
        f"At {a['runs_per_month']:,} runs a month the database holds about "
        f"{_steady_gb(run, a):.1f} GB once the first runs are purged, "
        f"{_usd(_steady_gb(run, a) * p['aurora_storage_gb_month'])} a month, and stops "
        "growing; a longer retention scales it in proportion.",
        "",
        "## Measured per run",
        "",
    ]
    frows = [
        [
            f,
            f"{run['invocations'][f]:.2f}",
            f"{run['cpu_ms'][f]:.2f}",
            f"{run['sql_statements'][f]:.1f}",
            f"{run['app_log_bytes'][f]:.0f}",
            f"{ms[f]:.1f}",
        ]
        for f in run["invocations"]
    ]
    out += _table(
        [
            "function",
            "invocations",
            "handler CPU ms (here)",
            "SQL statements",
            "app log bytes",
            "billed ms (model)",
        ],
        frows,
    )
    calls = run["api_calls"]
    out += [
        "",
        f"Per run: {invocations:.2f} invocations, {run['sqs_requests']:.2f} SQS requests "
        "(each event: EventBridge's send, the poller's receive and delete, per intake queue; "
        "each resume: a share of the due scan's batch send, a receive and a delete), "
        f"{calls.get('lambda_invoke', 0):.2f} nudges (asynchronous invokes), "
        f"{calls.get('sqs_send', 0):.2f} SendMessageBatch calls, {calls.get('ses', 0):.2f} "
        f"SES sends, {calls.get('http', 0):.2f} webhooks, {run['transactions']:.2f} database "
        f"transactions writing {run['wal_bytes']:.0f} bytes of WAL "
        f"({run['aurora_write_ios']:.2f} Aurora write I/Os at one 4 KB unit per commit), "
        f"{app_logs:.0f} bytes of application logs.",
        "",
        "Billed milliseconds are modelled, not measured on Lambda: handler CPU here x "
        f"{a['cpu_slowdown']:.2f} (512 MB is {512 / 1769:.2f} of a vCPU) + "
        f"{a['sql_round_trip_ms']} ms per SQL statement + {a['api_call_ms']:.0f} ms per AWS "
        f"call + {a['webhook_ms']:.0f} ms per webhook + {a['cold_start_share']:.0%} of "
        f"invocations paying a {a['init_s']} s INIT phase.",
        "",
        "## Variable cost per million runs, item by item",
        "",
    ]
    v = r["variable_per_million"]
    log_bytes = app_logs + invocations * a["platform_log_bytes"]
    arithmetic = {
        "Lambda requests": f"{invocations:.2f} x 1M x $0.20/M",
        "Lambda duration (arm64)": f"{sum(ms.values()):.0f} ms x {a['memory_gb']} GB x 1M x "
        f"${p['lambda_gb_s_arm64']}/GB-s",
        "SQS requests": f"{run['sqs_requests']:.2f} x 1M x $0.40/M",
        "CloudWatch Logs ingestion": f"({app_logs:.0f} + {invocations:.2f} x "
        f"{a['platform_log_bytes']}) bytes = {log_bytes / 1024:.1f} KB x 1M x $0.50/GB",
        "X-Ray traces": "TracingMode=PassThrough: none (Active: "
        f"{_usd(r['variable_per_million_traced']['X-Ray traces'])})",
        "NAT data processing": f"{sum(calls.values()):.2f} calls x {a['api_call_bytes']} "
        "bytes x 1M x $0.045/GB",
        "Aurora I/O (Standard)": f"{run['aurora_write_ios']:.2f} write I/Os x 1M x $0.20/M",
        "Aurora storage, first month": f"{run['storage_bytes'] / 1024:.1f} KB x 1M x "
        "$0.10/GB-month",
    }
    out += _table(
        ["item", "arithmetic", "USD"],
        [[k, arithmetic[k], _usd(val)] for k, val in v.items()]
        + [["**total**", "", f"**{_usd(r['variable_per_million_total'])}**"]],
    )
    out += ["", *cost_durable.report_lines(r)]
    out += ["## Fixed cost per month", ""]
    fixed_rows = [[k, _usd(val)] for k, val in r["fixed_per_month_ha"].items()]
    shipped_keys = set(r["fixed_per_month"])
    out += _table(
        ["item", "USD a month", ""],
        [[k, val, "as shipped" if k in shipped_keys else "HA shape only"] for k, val in fixed_rows]
        + [
            ["**as shipped**", f"**{_usd(r['fixed_per_month_total'])}**", ""],
            ["**HA shape**", f"**{_usd(r['fixed_per_month_ha_total'])}**", ""],
        ],
    )
    out += [
        "",
        f"{a['hours_per_month']:.0f} hours a month. Aurora at its 0.5 ACU minimum "
        f"(0.5 x {a['hours_per_month']:.0f} h x ${p['aurora_acu_hour']}); the minimum is also "
        "what the stack uses at these volumes. AuroraMinCapacity cannot be 0: three "
        "one-minute schedules connect every minute and warm functions keep their "
        "connections open, and Aurora only pauses after five minutes without any, so a "
        "cluster allowed to pause would never do it. Making pausing real needs schedules "
        "that stay away from the database while nothing is due (a wake-up time kept outside "
        "it, e.g. an EventBridge Scheduler one-time schedule for the next due row) and "
        "functions that close their connections after each invocation; then the first "
        "event after a pause waits about 15 s for the cluster. Interface endpoints cost "
        f"${p['endpoint_az_hour']} per endpoint and AZ hour; with them, SQS and Lambda calls "
        "stop paying NAT's $0.045/GB (SES and webhooks still need NAT).",
        "",
        "## Assumptions and prices",
        "",
    ]
    out += _table(["assumption", "value"], [[k, val] for k, val in a.items()])
    out += [""]
    out += _table(["price (USD)", "value"], [[k, val] for k, val in p.items()])
    out += [
        "",
        "Not counted: data transfer out to webhook receivers, CloudWatch Logs storage "
        "($0.03/GB-month, compressed), X-Ray trace retrieval, Aurora backup storage beyond the "
        "free amount, KMS. Step Functions is priced without logging or X-Ray.",
    ]
    path.write_text("\n".join(out) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200, help="onboarding runs to measure")
    args = parser.parse_args()
    shipped = measure(args.runs)
    narrowed = measure(args.runs, narrowed=True)
    result = price(shipped, narrowed)
    result["generated_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    result["measured"] = as_json(shipped)
    RESULTS.write_text(json.dumps(result, indent=2, default=str) + "\n")
    write_report(result, REPORT)
    print(
        f"variable {_usd(result['variable_per_million_total'])} per million runs "
        f"({result['ratio_vs_standard']:.0%} of Step Functions Standard), fixed "
        f"{_usd(result['fixed_per_month_total'])} a month; {REPORT.relative_to(ROOT)}",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
