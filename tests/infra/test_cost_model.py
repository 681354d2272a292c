"""bench.cost: the measurement drives real runs, the arithmetic is what docs/COST.md
says it is, and the docs site quotes the figures of the last `make cost`."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from bench import cost, cost_durable

ROOT = Path(__file__).resolve().parents[2]


def synthetic_run() -> dict[str, Any]:
    return {
        "invocations": {"TriggerProjectionFunction": 1.0, "ResumeRunFunction": 2.0},
        "cpu_ms": {"TriggerProjectionFunction": 2.0, "ResumeRunFunction": 4.0},
        "sql_statements": {"TriggerProjectionFunction": 10.0, "ResumeRunFunction": 20.0},
        "app_log_bytes": {"TriggerProjectionFunction": 1000.0, "ResumeRunFunction": 2000.0},
        "api_calls": {"lambda_invoke": 4.0, "sqs_send": 0.0, "ses": 0.0, "http": 0.0},
        "sqs_requests": 10.0,
        "transactions": 5.0,
        "wal_bytes": 10000.0,
        "aurora_write_ios": 5.0,
        "storage_bytes": 10_000.0,
    }


def test_the_variable_cost_arithmetic() -> None:
    a = cost.Assumptions(cold_start_share=0.0, platform_log_bytes=500)
    p = cost.Prices()
    items = cost.variable_cost(synthetic_run(), p, a, tracing=False, endpoints=False)
    # 3 invocations; billed ms = cpu x slowdown + statements x rtt + 4 nudges x 20 ms.
    billed_ms = 6 * a.cpu_slowdown + 30 * a.sql_round_trip_ms + 4 * a.api_call_ms
    assert items["Lambda requests"] == pytest.approx(0.60)
    assert items["Lambda duration (arm64)"] == pytest.approx(
        round(billed_ms / 1000 * 0.5 * p.lambda_gb_s_arm64 * 1e6, 2)
    )
    assert items["SQS requests"] == pytest.approx(4.00)
    assert items["CloudWatch Logs ingestion"] == pytest.approx(
        round((3000 + 1500) / 1e9 * 0.5 * 1e6, 2)
    )
    assert items["X-Ray traces"] == 0.0
    assert items["NAT data processing"] == pytest.approx(round(4 * 4000 / 1e9 * 0.045 * 1e6, 2))
    assert items["Aurora I/O (Standard)"] == pytest.approx(1.00)
    assert items["Aurora storage, first month"] == pytest.approx(1.00)
    with_endpoints = cost.variable_cost(synthetic_run(), p, a, tracing=False, endpoints=True)
    assert with_endpoints["NAT data processing"] < items["NAT data processing"]


def test_xray_samples_nearly_everything_at_low_volume_and_less_at_high() -> None:
    run = {"invocations": {"A": 10.0}}
    low = cost.xray_traces_per_run(run, cost.Assumptions(runs_per_month=100_000))
    high = cost.xray_traces_per_run(run, cost.Assumptions(runs_per_month=100_000_000))
    assert low == pytest.approx(10.0)  # 0.38 invocations/s: all inside the reservoir
    assert 0.5 < high < 1.0  # 380/s: 1/s reservoir + 5% of the rest


def test_fixed_cost_and_the_ha_shape() -> None:
    shipped = cost.fixed_cost(cost.PRICES, cost.ASSUMPTIONS, ha=False)
    ha = cost.fixed_cost(cost.PRICES, cost.ASSUMPTIONS, ha=True)
    assert shipped["Aurora writer, 0.5 ACU minimum"] == pytest.approx(43.80)
    assert shipped["NAT gateway (one AZ)"] == pytest.approx(32.85)
    assert shipped["CloudWatch alarms"] == pytest.approx(cost.alarm_count() * 0.10)
    assert sum(ha.values()) - sum(shipped.values()) == pytest.approx(43.80 + 32.85 + 3.65 + 43.80)


def test_step_functions_standard_is_eight_transitions() -> None:
    assert cost.step_functions(cost.PRICES)["standard_per_million"] == pytest.approx(200.0)


def onboarding_steps() -> tuple[Any, ...]:
    from sample_workflows.user_onboarding import user_onboarding

    return tuple(user_onboarding.steps)


def test_onboarding_as_a_durable_function_is_seven_operations_in_three_invocations() -> None:
    ops = cost_durable.operations(onboarding_steps())
    # welcome mail, a day's wait, engaged?, one of the two mails, a week's wait, webhook
    assert [op.type for op in ops] == ["step", "wait", "step", "step", "wait", "step"]
    result = cost_durable.durable_function(onboarding_steps(), cost.PRICES, cost.ASSUMPTIONS)
    assert result["operations_per_run"] == 7  # and the execution's start
    assert result["operations_by_type"] == {"execution": 1, "step": 4, "wait": 2, "callback": 0}
    assert result["invocations_per_run"] == 3  # 1 + two waits
    assert result["replayed_operations"] == [0, 2, 5]
    assert result["lifetime_days"] == 8.0
    assert result["variable_per_million"]["Durable operations"] == pytest.approx(56.0)


def test_the_durable_function_per_million_is_the_hand_arithmetic() -> None:
    p = cost.Prices(
        durable_operation=10.0 / 1e6,
        durable_data_written_gb=1.0,
        durable_data_retained_gb_month=0.5,
        lambda_request=1.0 / 1e6,
        lambda_gb_s_arm64=0.00001,
        logs_ingest_gb=1.0,
    )
    a = cost.Assumptions(
        memory_gb=1.0,
        api_call_ms=10.0,
        webhook_ms=100.0,
        cold_start_share=0.0,
        platform_log_bytes=1000,
        retention_days=22.4,
    )
    d = cost_durable.DurableAssumptions(
        handler_ms=5.0,
        replay_ms_per_operation=1.0,
        checkpoint_calls_per_operation=1,
        checkpoint_bytes=1000,
    )
    result = cost_durable.durable_function(onboarding_steps(), p, a, d, input_bytes=4000)
    # Invocation 1: 5 + mail (checkpoint 10 + SES 10) + wait (10)                = 35 ms
    # Invocation 2: 5 + 2 replayed + compute 10 + mail 20 + wait 10              = 47 ms
    # Invocation 3: 5 + 5 replayed + webhook (10 + 100)                          = 120 ms
    assert result["billed_ms"] == [35.0, 47.0, 120.0]
    written = 4000 + 6 * 1000  # input + six checkpointed operations
    assert result["data_written_bytes"] == written
    v = result["variable_per_million"]
    assert v["Durable operations"] == pytest.approx(70.0)  # 7 x $10/M
    assert v["Data written"] == pytest.approx(10.0)  # 10 KB x 1M = 10 GB x $1
    assert v["Data retained"] == pytest.approx(5.0)  # 10 GB x (8 + 22.4) / 30.4 months x $0.5
    assert v["Lambda requests"] == pytest.approx(3.0)
    assert v["Lambda duration (arm64)"] == pytest.approx(2.02)  # 0.202 s x 1 GB x 1M x $1e-5
    assert v["CloudWatch Logs ingestion"] == pytest.approx(3.0)  # 3 KB x 1M = 3 GB x $1
    assert result["variable_per_million_total"] == pytest.approx(93.02)


def test_a_durable_function_costs_more_with_every_operation_and_suspension() -> None:
    from workflow_runner.definition.dsl import Compute, Wait

    base = cost_durable.durable_function(onboarding_steps(), cost.PRICES, cost.ASSUMPTIONS)
    step = Compute(key="extra", fn=lambda ctx: True)
    wait = Wait(for_="PT1H")
    more_steps = cost_durable.durable_function(
        (*onboarding_steps()[:-1], step, onboarding_steps()[-1]), cost.PRICES, cost.ASSUMPTIONS
    )
    more_waits = cost_durable.durable_function(
        (*onboarding_steps()[:-1], wait, onboarding_steps()[-1]), cost.PRICES, cost.ASSUMPTIONS
    )
    assert more_steps["operations_per_run"] == 8 and more_steps["invocations_per_run"] == 3
    assert more_waits["operations_per_run"] == 8 and more_waits["invocations_per_run"] == 4
    for more in (more_steps, more_waits):
        assert more["variable_per_million_total"] > base["variable_per_million_total"]
    # A suspension costs an invocation and a replay on top of the operation.
    assert more_waits["variable_per_million_total"] > more_steps["variable_per_million_total"]
    dearer = replace(cost.PRICES, durable_operation=cost.PRICES.durable_operation * 2)
    doubled = cost_durable.durable_function(onboarding_steps(), dearer, cost.ASSUMPTIONS)
    assert doubled["variable_per_million"]["Durable operations"] == pytest.approx(112.0)


def test_a_durable_function_counts_event_waits_as_callbacks_and_refuses_what_it_cannot_price() -> (
    None
):
    from workflow_runner.definition.dsl import Branch, Compute, WaitForEvent

    awaited = WaitForEvent(
        event="order.paid", match=None, timeout="P1D", lookback=None, result_key="paid"
    )
    ops = cost_durable.operations([awaited])
    assert [(op.type, op.kind) for op in ops] == [("callback", "wait_for_event")]
    assert len(cost_durable.invocations(ops)) == 2
    one = Compute(key="a", fn=lambda ctx: 1)
    branch = Branch(if_=True, on_true=(one, one, awaited), on_false=(one,))
    assert [op.type for op in cost_durable.operations([branch])] == ["step", "step", "callback"]
    with pytest.raises(ValueError, match="map"):
        cost_durable.operations([SimpleNamespace(kind="map")])
    assert cost_durable.break_even_runs(61.0, 28.0, 99.0) == 3_000_000
    assert cost_durable.break_even_runs(20.0, 28.0, 99.0) is None


def test_the_measurement_drives_onboarding_runs_to_completion() -> None:
    measured = cost.measure(runs=4)  # raises unless all four runs completed
    per_run = cost.per_run(measured)
    assert per_run["invocations"]["TriggerProjectionFunction"] == 1
    assert per_run["invocations"]["EventWakeupFunction"] == 1  # both rules by default
    assert per_run["invocations"]["ResumeRunFunction"] == 2  # a day's and a week's wait
    assert per_run["api_calls"]["ses"] == 2 and per_run["api_calls"]["http"] == 1
    assert per_run["aurora_write_ios"] >= per_run["transactions"] > 0
    narrowed = cost.per_run(cost.measure(runs=2, narrowed=True))
    assert "EventWakeupFunction" not in narrowed["invocations"]


# --- the documents quote the last `make cost` ------------------------------------------------


@pytest.fixture(scope="module")
def results() -> dict[str, Any]:
    return dict(json.loads((ROOT / "bench" / "cost.json").read_text()))


def cost_page() -> str:
    """The site's cost page (docs/operating/cost.md), which the README links to."""
    return (ROOT / "docs" / "operating" / "cost.md").read_text()


def quoted(label: str) -> tuple[float, float]:
    """The (variable, fixed) dollars of a cost page table row starting with `label`."""
    for line in cost_page().splitlines():
        if line.startswith(f"| {label}"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            numbers = [float(re.sub(r"[^0-9.]", "", c)) for c in cells[1:3]]
            return numbers[0], numbers[1]
    raise AssertionError(f"no cost page row {label!r}")


def close(quote: float, value: float) -> bool:
    return abs(quote - value) <= max(1.0, 0.05 * value)


def test_the_cost_page_quotes_the_measured_figures(results: dict[str, Any]) -> None:
    rows = {
        "workflow-runner as shipped": (
            results["variable_per_million_total"],
            results["fixed_per_month_total"],
        ),
        "… with the rules listing": (
            results["narrowed"]["variable_per_million_total"],
            results["fixed_per_month_total"],
        ),
        "… with X-Ray on": (
            results["variable_per_million_traced_total"],
            results["fixed_per_month_total"],
        ),
        "HA shape": (results["variable_per_million_ha_total"], results["fixed_per_month_ha_total"]),
        "Step Functions Standard": (results["step_functions"]["standard_per_million"], 0.0),
        "Step Functions Express": (
            results["step_functions"]["express_with_scheduler_per_million"],
            0.0,
        ),
        "Lambda durable functions": (
            results["durable_functions"]["variable_per_million_total"],
            0.0,
        ),
    }
    for label, (variable, fixed) in rows.items():
        got = quoted(label)
        assert close(got[0], variable) and close(got[1], fixed), (label, got, variable, fixed)
    section = cost_page()
    ratio = re.search(r"about \*\*(\d+)% of Step Functions Standard\*\*", section)
    assert ratio and int(ratio.group(1)) == round(100 * results["ratio_vs_standard"])
    assert results["ratio_vs_standard"] <= 0.2  # the goal
    even = re.search(r"≈ \*\*([\d,]+) runs a month\*\*", section)
    assert even and close(
        float(even.group(1).replace(",", "")), results["break_even_runs_per_month_vs_standard"]
    )


def test_docs_cost_is_the_report_of_the_same_run(results: dict[str, Any]) -> None:
    report = (ROOT / "docs" / "COST.md").read_text()
    assert f"${results['variable_per_million_total']:,.2f}" in report
    assert f"{results['break_even_runs_per_month_vs_standard']:,}" in report
    durable = results["durable_functions"]
    row = next(line for line in report.splitlines() if line.startswith("| Lambda durable"))
    assert f"${durable['variable_per_million_total']:,.2f}" in row
    assert f"{durable['operations_per_run']} durable operations" in row
    assert durable["variable_per_million_total"] == pytest.approx(
        sum(durable["variable_per_million"].values())
    )
    assert "## Lambda durable functions, item by item" in report
