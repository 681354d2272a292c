"""bench.cost: the measurement drives real runs, the arithmetic is what docs/COST.md
says it is, and the docs site quotes the figures of the last `make cost`."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from bench import cost

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
