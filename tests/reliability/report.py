"""Render docs/RELIABILITY.md from the figures the reliability tests recorded.

Usage: python -m tests.reliability.report STATS.jsonl JUNIT.xml docs/RELIABILITY.md
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

ROWS = [
    ("runs_driven", "workflow runs driven to their end under faults, duplicates or load"),
    ("crash_points", "crash points injected (each a full scenario replay and recovery)"),
    (
        "composition_crash_points",
        "... of them in composition (child runs and their joins), by operation below:",
    ),
    ("composition_crash_start", "... of them in the worker starting a join's children"),
    (
        "composition_crash_attach",
        "... of them in the worker attaching a second parent to a child that runs already (another"
        " parent's, or one an event or a start_workflow started)",
    ),
    ("composition_crash_revive", "... of them in the worker reviving a redriven parent's children"),
    ("composition_crash_settle", "... of them in a child's settling pass"),
    (
        "composition_crash_end",
        "... of them in a parent's last pass (its joins closed, children no one else owns"
        " cancelled)",
    ),
    ("composition_crash_count", "... of them in the worker counting settled children into joins"),
    ("composition_crash_cancel", "... of them in an operator's cancel of a parent"),
    ("composition_crash_redrive", "... of them in an operator's redrive of a failed parent"),
    (
        "condition_crash_points",
        "... of them around wait_for_condition (a check and its checkpoint, the timers between)",
    ),
    ("process_kills", "real SIGKILLs of a worker process (mid-transaction included)"),
    ("server_restarts", "PostgreSQL restarts in the middle of a load"),
    ("killed_connections", "backend connections killed under a warm handler"),
    ("dropped_connections", "connections dropped in the middle of a resume pass"),
    ("statement_timeouts", "statement timeouts"),
    ("serialization_failures", "serialization failures"),
    ("deadlocks", "deadlocks"),
    ("duplicate_deliveries", "duplicate EventBridge/SQS deliveries (shuffled)"),
    ("same_key_redeliveries", "effects re-sent after a crash, with the same idempotency key"),
    ("redelivery_scenarios", "shuffled at-least-once schedules of the sample scenario"),
    ("differential_cases", "random workflows checked against the reference interpreter"),
    ("crash_differential", "... of them with a crash that fired"),
    ("fuzz_cases", "hostile handler inputs"),
    ("ssrf_cases", "webhook targets inside the network (literal, DNS, redirect, odd spelling)"),
    ("erasures", "domain events erased"),
    ("concurrent_workers", "concurrent workers (largest run: threads + processes + sender)"),
    (
        "shared_children_under_load",
        "shared children driven under load (named by two parents' joins, or attached to a run"
        " an event or a start_workflow started)",
    ),
    ("redrives_under_load", "redrives of failed parents under load, while the workers ran"),
    ("cancels_under_load", "cancels of parents under load, while the workers ran"),
    (
        "skewed_awaited",
        "awaited events delivered with every function's clock off by up to ±5 s (each woke"
        " its run if emitted after the trigger, none if before)",
    ),
    ("awaited_before_trigger", "... of them delivered before their trigger event"),
    (
        "foreign_tx_seconds",
        "longest a transaction of another database stayed open, after writing, while the"
        " sample scenario played again and again (seconds)",
    ),
    ("foreign_tx_plays", "... scenario plays meanwhile (ten days of timers and wakeups each)"),
    (
        "foreign_tx_max_lag_events",
        "... largest projection lag right after a PendingProjection run meanwhile (run-stream"
        " events)",
    ),
    (
        "foreign_tx_longest_cycle_seconds",
        "... longest cycle of the scheduled functions meanwhile, i.e. the longest an event"
        " waited for the projection (seconds)",
    ),
    ("broadcast_woken", "waits woken by broadcast events under injected crashes (each once)"),
    (
        "broadcast_crashes",
        "crashes of a broadcast EventWakeup (every boundary, before and after), each finished"
        " by its retry without the due scan",
    ),
    (
        "broadcast_lost_acks",
        "... of them right after a commit or send took effect (the acknowledgement lost): the"
        " retry enqueued what the database said was matched and not sent",
    ),
]
# Figures that are a largest value, not a sum over the tests that recorded them.
MAXIMA = frozenset(
    {
        "concurrent_workers",
        "foreign_tx_seconds",
        "foreign_tx_max_lag_events",
        "foreign_tx_longest_cycle_seconds",
        "sample_sweep_stride",
    }
)
ZERO = [
    ("lost", "runs lost (stranded, or missing from the final histories)"),
    ("duplicated", "suspensions resumed twice, or effects under two request ids"),
    ("leaked", "payload or raw-error copies found after erasure / failure"),
    ("started_twice", "children started twice"),
    ("not_counted", "settled children not counted by a join"),
    ("waits_on_settled", "parents waiting on a settled child"),
    ("cancelled_owned", "runs cancelled while another owner waited"),
]


def _figure(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.2f}"


def main(stats_path: str, junit_path: str, out_path: str) -> None:
    totals: Counter[str] = Counter()
    maxima: dict[str, float] = {}
    for line in Path(stats_path).read_text(encoding="utf-8").splitlines():
        for key, value in json.loads(line).items():
            if key in MAXIMA:
                maxima[key] = max(maxima.get(key, value), value)
            else:
                totals[key] += value
    totals.update(maxima)
    suite = ET.parse(junit_path).getroot()
    cases = suite.iter("testcase")
    outcome: Counter[str] = Counter()
    for case in cases:
        if case.find("failure") is not None or case.find("error") is not None:
            outcome["failed"] += 1
        elif case.find("skipped") is not None:
            outcome["skipped"] += 1
        else:
            outcome["passed"] += 1
    held = outcome["failed"] == 0
    crash_kinds = sorted(
        k for k in totals if k.startswith("crash_before_") or k.startswith("crash_after_")
    )
    lines = [
        "# Reliability figures",
        "",
        f"Written by `make soak` on {datetime.now(UTC):%Y-%m-%d %H:%M} UTC from the counters "
        "the tests in `tests/reliability/` recorded while they ran. "
        f"Tests: {outcome['passed']} passed, {outcome['failed']} failed, "
        f"{outcome['skipped']} skipped.",
        "",
        "What each test proves is in its module docstring; the invariants are "
        "ARCHITECTURE.md §2. A failing test fails `make soak`, so these figures only stand "
        "when every test passed."
        if held
        else "**Some tests FAILED in this run: the guarantees below did not all hold.**",
        "",
    ]
    stride = int(totals.get("sample_sweep_stride", 1))
    if stride > 1:
        lines += [
            f"The sweep over the sample scenario's crash points took one point in {stride} "
            f"(`WFR_CRASH_STRIDE={stride}`, so that `make soak` ends within the hour on the "
            f"shared machine; `WFR_CRASH_OFFSET=1` to {stride - 1} sweep the others). The "
            "composition sweep took every point, before and after.",
            "",
        ]
    lines += [
        "| what was tried | how often |",
        "|---|---:|",
    ]
    lines += [f"| {text} | {_figure(totals[key])} |" for key, text in ROWS if key in totals]
    lines += [
        "",
        "Crash points by boundary kind (sql = a round trip to PostgreSQL, one statement or a"
        " pipeline of them; the others are AWS calls):",
        "",
        "| boundary | injected |",
        "|---|---:|",
    ]
    lines += [
        f"| {k.replace('crash_', '').replace('_', ' ')} | {int(totals[k])} |" for k in crash_kinds
    ]
    lines += ["", "| what must never happen | count |", "|---|---:|"]
    lines += [f"| {text} | {0 if held else 'see failures'} |" for _, text in ZERO]
    lines.append("")
    Path(out_path).write_text("\n".join(lines), encoding="utf-8")


if __name__ == "__main__":
    main(*sys.argv[1:4])
