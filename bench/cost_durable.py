"""The onboarding workflow as one AWS Lambda durable function, priced per million runs.

A durable function is billed on four meters (aws.amazon.com/lambda/pricing/, "Lambda
durable functions"): durable operations (starting the execution, each step, each wait,
each callback), data written (the checkpoints, per GB), data retained (the execution's
history while it runs and for its retention period after, per GB-month), and the
function's own Lambda compute (requests and GB-seconds), paid for every invocation.

The operations are counted from the workflow's definition, as the Step Functions row
counts its state transitions: every compute, mail and webhook step is a durable step,
every wait a durable wait, every event wait a callback (the sender answers it through
SendDurableExecutionCallbackSuccess); a branch is plain code in the handler, and only
one arm runs (the one with more operations is counted). A wait or a callback suspends
the function; the next invocation replays the handler from the top, skipping the
operations the checkpoint log already holds. So a run is 1 + (waits + callbacks)
invocations, and each re-reads every operation before its own stretch from the log.

Nothing here is measured: the duration of an invocation is built from the stated
DurableAssumptions and from the same Assumptions the shipped design uses (memory, AWS
call and webhook latency, cold-start share, platform log bytes, retention).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bench.cost import Assumptions, Prices

# Step kinds that become one durable step each, and the kinds that suspend the function.
STEP_KINDS = ("compute", "mail.send", "webhook.send")
SUSPENDING_KINDS = {
    "wait": "wait",
    "wait_for_event": "callback",
    "wait_for_callback": "callback",
    "await_callback": "callback",
}


@dataclass(frozen=True)
class DurableAssumptions:
    """What turns the definition into billed milliseconds and bytes; stated guesses."""

    # Each invocation: runtime handoff, SDK set-up, reading the checkpoint state that
    # comes with the invocation, and running the handler's own code.
    handler_ms: float = 10.0
    # Replaying a completed operation returns its stored result without running it.
    replay_ms_per_operation: float = 0.2
    # One CheckpointDurableExecution call per operation the invocation runs (the SDK
    # may batch them; one each is the costlier reading).
    checkpoint_calls_per_operation: int = 1
    # A checkpoint record: operation id, name, type, status, timestamps and its result
    # (a mail's message id, a webhook's status, a boolean); AWS's metering unit for data
    # written is not known here (were it 1 KB per record, set 1024).
    checkpoint_bytes: int = 256
    # Cold start of a function importing boto3 and the durable execution SDK, at 512 MB
    # (not measured; the shipped functions' INIT is 1.7 s with the whole engine).
    init_s: float = 0.7


DURABLE_ASSUMPTIONS = DurableAssumptions()


@dataclass(frozen=True)
class Operation:
    """One billed durable operation: its type (execution, step, wait, callback) and the
    step kind it stands for."""

    type: str
    kind: str


def operations(steps: Sequence[Any]) -> list[Operation]:
    """The durable operations one run of `steps` performs, in order (without the
    execution's start).

    Raises:
        ValueError: a step kind this model has no durable-function translation for
            (maps, parallels, tasks, child workflows): pricing it would be a guess.
    """
    ops: list[Operation] = []
    for step in steps:
        kind = step.kind
        if kind in STEP_KINDS:
            ops.append(Operation("step", kind))
        elif kind in SUSPENDING_KINDS:
            ops.append(Operation(SUSPENDING_KINDS[kind], kind))
        elif kind == "branch":
            on_true, on_false = operations(step.on_true or ()), operations(step.on_false or ())
            ops += on_true if len(on_true) >= len(on_false) else on_false
        elif kind == "retry":
            ops += operations(step.do)
        elif kind != "return":
            raise ValueError(f"no durable-function model for a {kind!r} step")
    return ops


def invocations(ops: Sequence[Operation]) -> list[list[Operation]]:
    """The operations each invocation runs: a wait or callback ends its invocation, and
    the next one starts after it."""
    stretches: list[list[Operation]] = [[]]
    for op in ops:
        stretches[-1].append(op)
        if op.type in ("wait", "callback"):
            stretches.append([])
    return stretches


def _work_ms(op: Operation, a: Assumptions) -> float:
    """What a step does besides checkpointing: SES's answer, the webhook's answer."""
    if op.kind == "mail.send":
        return a.api_call_ms
    if op.kind == "webhook.send":
        return a.webhook_ms
    return 0.0


def sample_event_bytes() -> int:
    """Bytes of the execution's input: the onboarding trigger event bench.cost sends."""
    event = {
        "version": "0",
        "id": "00000000-0000-0000-0000-000000000000",
        "detail-type": "user.signed-up",
        "source": "com.example.accounts",
        "account": "123456789012",
        "time": "2026-01-05T09:00:00Z",
        "region": "eu-central-1",
        "resources": [],
        "detail": {
            "tenantId": "00000000-0000-0000-0000-000000000000",
            "userId": "active-123456",
            "email": "user123456@example.com",
        },
    }
    return len(json.dumps(event).encode())


def durable_function(
    steps: Sequence[Any],
    p: Prices,
    a: Assumptions,
    d: DurableAssumptions = DURABLE_ASSUMPTIONS,
    *,
    input_bytes: int | None = None,
) -> dict[str, Any]:
    """The workflow `steps` as a Lambda durable function: counts, billed time and USD
    per million runs by item (rounded to cents, as bench.cost's rows are).

    Args:
        steps: a definition's steps (`WorkflowDefinition.steps`).
        p, a: bench.cost's prices and assumptions.
        d: the durable function's own assumptions.
        input_bytes: the execution input's size; by default the sample trigger event's.
    """
    ops = operations(steps)
    billed_operations = 1 + len(ops)  # the execution's start, then every operation
    stretches = invocations(ops)
    billed_ms: list[float] = []
    replayed: list[int] = []
    done = 0
    for stretch in stretches:
        ms = d.handler_ms + done * d.replay_ms_per_operation
        for op in stretch:
            ms += d.checkpoint_calls_per_operation * a.api_call_ms + _work_ms(op, a)
        ms += a.cold_start_share * d.init_s * 1000
        billed_ms.append(ms)
        replayed.append(done)
        done += len(stretch)
    calls = len(stretches)
    written = (input_bytes if input_bytes is not None else sample_event_bytes()) + len(
        ops
    ) * d.checkpoint_bytes
    # Kept while the run lives (a day's and a week's wait: 8 days) and for the retention
    # period after it closes (RetentionPeriodInDays, set like RUN_RETENTION).
    lifetime_days = _lifetime_days(steps)
    gb_months = written / 1e9 * (lifetime_days + a.retention_days) / 30.4
    log_bytes = calls * a.platform_log_bytes
    million = 1e6
    items = {
        "Durable operations": billed_operations * p.durable_operation,
        "Data written": written / 1e9 * p.durable_data_written_gb,
        "Data retained": gb_months * p.durable_data_retained_gb_month,
        "Lambda requests": calls * p.lambda_request,
        "Lambda duration (arm64)": sum(billed_ms) / 1000 * a.memory_gb * p.lambda_gb_s_arm64,
        "CloudWatch Logs ingestion": log_bytes / 1e9 * p.logs_ingest_gb,
    }
    per_million = {k: round(v * million, 2) for k, v in items.items()}
    return {
        "operations_per_run": billed_operations,
        "operations_by_type": {"execution": 1}
        | {t: sum(1 for op in ops if op.type == t) for t in ("step", "wait", "callback")},
        "invocations_per_run": calls,
        "replayed_operations": replayed,
        "billed_ms": [round(ms, 1) for ms in billed_ms],
        "data_written_bytes": written,
        "lifetime_days": lifetime_days,
        "data_retained_gb_months_per_run": gb_months,
        "variable_per_million": per_million,
        "variable_per_million_total": round(sum(per_million.values()), 2),
        "assumptions": asdict(d),
    }


def _lifetime_days(steps: Sequence[Any]) -> float:
    """Days a run of `steps` lives: the sum of its waits' ISO durations (P1D, P7D)."""
    from workflow_runner.durations import parse_duration

    days = 0.0
    for step in steps:
        if step.kind == "wait" and isinstance(step.for_, str):
            days += parse_duration(step.for_).total_seconds() / 86400
        elif step.kind == "branch":
            days += max(_lifetime_days(step.on_true or ()), _lifetime_days(step.on_false or ()))
    return days


# --- report ----------------------------------------------------------------------------------


def report_lines(r: dict[str, Any]) -> list[str]:
    """docs/COST.md's section on the durable function, from one bench.cost `price()`."""
    from bench.cost import _table

    dur, a, p = r["durable_functions"], r["assumptions"], r["prices"]
    d = dur["assumptions"]
    v = dur["variable_per_million"]
    by_type = dur["operations_by_type"]
    calls = dur["invocations_per_run"]
    runs = a["runs_per_month"]
    ms = dur["billed_ms"]
    ms_text = " + ".join(f"{x:.1f}" for x in ms)
    arithmetic = {
        "Durable operations": f"({by_type['execution']} start + {by_type['step']} steps + "
        f"{by_type['wait']} waits + {by_type['callback']} callbacks) = "
        f"{dur['operations_per_run']} x 1M x ${p['durable_operation'] * 1e6:.2f}/M",
        "Data written": f"{dur['data_written_bytes']} bytes x 1M x "
        f"${p['durable_data_written_gb']}/GB",
        "Data retained": f"{dur['data_written_bytes']} bytes x "
        f"({dur['lifetime_days']:.0f} + {a['retention_days']:.0f}) days / 30.4 x 1M x "
        f"${p['durable_data_retained_gb_month']}/GB-month",
        "Lambda requests": f"{calls} invocations x 1M x $0.20/M",
        "Lambda duration (arm64)": f"({ms_text}) ms x {a['memory_gb']} GB x 1M x "
        f"${p['lambda_gb_s_arm64']}/GB-s",
        "CloudWatch Logs ingestion": f"{calls} x {a['platform_log_bytes']} bytes x 1M x $0.50/GB",
    }
    total = dur["variable_per_million_total"]
    ours, fixed = r["variable_per_million_total"], r["fixed_per_month_total"]
    out = [
        "## Lambda durable functions, item by item",
        "",
        "The same workflow as one durable function (no VPC, no database, no queues): "
        f"{dur['operations_per_run']} durable operations and {calls} invocations per run, "
        "counted from the definition (`bench/cost_durable.py`). Prices: "
        f"${p['durable_operation'] * 1e6:.2f} per million durable operations, "
        f"${p['durable_data_written_gb']} per GB written, "
        f"${p['durable_data_retained_gb_month']} per GB-month retained "
        '(aws.amazon.com/lambda/pricing/, "Lambda durable functions"; transcribed from '
        "secondary copies of that page, not read from it here: check it), plus Lambda's "
        "own request and duration prices.",
        "",
    ]
    out += _table(
        ["item", "arithmetic", "USD"],
        [[k, arithmetic[k], f"${val:,.2f}"] for k, val in v.items()]
        + [["**total**", "", f"**${total:,.2f}**"]],
    )
    out += [
        "",
        f"- **Invocations:** 1 + {by_type['wait']} waits + {by_type['callback']} callbacks "
        f"= {calls}. Every invocation runs the handler from the top: invocation by "
        f"invocation it replays {', '.join(str(n) for n in dur['replayed_operations'])} "
        f"completed operations from the checkpoint log at {d['replay_ms_per_operation']} ms "
        "each, and pays "
        f"{d['handler_ms']:.0f} ms of set-up, {a['api_call_ms']:.0f} ms per checkpoint "
        f"call ({d['checkpoint_calls_per_operation']} per operation it runs), SES's and "
        f"the webhook's answers ({a['api_call_ms']:.0f} and {a['webhook_ms']:.0f} ms) and "
        f"{a['cold_start_share']:.0%} of a {d['init_s']} s INIT. Waiting is free.",
        f"- **Data:** the input event plus {d['checkpoint_bytes']} bytes per checkpointed "
        "operation, kept while the run lives and for a retention period as long as "
        "RUN_RETENTION (RetentionPeriodInDays defaults to 14).",
        f"- **Per month at {runs:,} runs:** {_usd(total * runs / 1e6)} with no fixed cost, "
        f"against {_usd(ours * runs / 1e6 + fixed)} for workflow-runner as shipped "
        f"({_usd(fixed)} fixed + {_usd(ours * runs / 1e6)}). " + _break_even(dur, ours, fixed),
        "- Not counted, as for the other rows: mail (SES) and the domain event. The "
        "function's own application logs are not counted either (ours are).",
        "",
    ]
    return out


def summary_line(r: dict[str, Any]) -> str:
    """The summary's bullet comparing the durable function with workflow-runner."""
    dur = r["durable_functions"]
    ours, fixed = r["variable_per_million_total"], r["fixed_per_month_total"]
    share = dur["variable_per_million"]["Durable operations"] / dur["variable_per_million_total"]
    return (
        f"- **Against Lambda durable functions:** {_usd(dur['variable_per_million_total'])} "
        f"per million runs, {share:.0%} "
        f"of it durable operations; nothing fixed. {_break_even(dur, ours, fixed)} The "
        "arithmetic and its assumptions are below."
    )


def break_even_runs(durable: float, ours: float, fixed: float) -> int | None:
    """Runs a month above which workflow-runner (fixed + `ours` per million) costs less
    than durable functions (`durable` per million, nothing fixed); None if never."""
    if durable <= ours:
        return None
    return round(fixed / ((durable - ours) / 1e6))


def _break_even(dur: dict[str, Any], ours: float, fixed: float) -> str:
    runs = dur["break_even_runs_per_month_vs_shipped"]
    if runs is None:
        return "Durable functions cost less per run as well: there is no break-even."
    return (
        f"Break-even: {runs:,} runs a month ({_usd(fixed)} / "
        f"({_usd(dur['variable_per_million_total'])} - {_usd(ours)}) per million); below "
        "that, durable functions cost less."
    )


def _usd(value: float) -> str:
    return f"${value:,.2f}"
