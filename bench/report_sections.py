"""Sections of docs/BENCHMARKS.md for the workloads after the first six (and the
wakeup's stages), each from its part of bench/results.json."""

from __future__ import annotations

from typing import Any

from .report_format import table as _table


def _wakeup_stages(wk: dict[str, Any]) -> list[str]:
    """Where the wakeup's waits spent their time, and what the host took meanwhile."""
    stages, host = wk.get("stages_ms"), wk.get("host")
    if not stages or not host:
        return []  # results of a run before the stages were traced
    names = {
        "queued_for_worker": "event queued for a worker",
        "wakeup_to_resume_start": "wakeup (store, match, lease, send) to the resume's start",
        "resume": "resume (one transaction) to its commit",
        "wakeup_job": "the wakeup's whole job (overlaps the resume)",
    }
    out = [
        "",
        "Each wait cut into its stages (median ms), over all waits and over the slowest 1%:",
        "",
    ]
    out += _table(
        ["stage", "all waits", "slowest 1%"],
        [[label, stages["all"][k], stages["slowest_1pct"][k]] for k, label in names.items()],
    )
    out += [
        "",
        f"The host meanwhile, sampled every {host['interval_s']} s from /proc: CPU stolen "
        f"by the hypervisor {host['steal_pct']}%",
        f"(worst interval {host['steal_pct_max_interval']}%), CPU pressure (a task "
        f"runnable but waiting) {host['cpu_pressure_pct']}%",
        f"(worst {host['cpu_pressure_pct_max_interval']}%); in the "
        f"{host['slow_intervals']} intervals the slowest 1% spanned: stolen "
        f"{host['steal_pct_in_slow']}%, pressure {host['cpu_pressure_pct_in_slow']}%.",
    ]
    if "io_pressure_pct" in host:  # sampled since issue 15's tenth pass
        out[-1] = out[-1][:-1] + (
            f"; I/O pressure (a task waiting for the disk) {host['io_pressure_pct']}% "
            f"(worst {host['io_pressure_pct_max_interval']}%), "
            f"{host['io_pressure_pct_in_slow']}% in those intervals."
        )
    return out


def _console_section(console: dict[str, Any] | None) -> list[str]:
    """Workload 7, when the results have it (`python -m bench.run --only console`)."""
    if not console:
        return []
    out = [
        "",
        "## 7. Console runs list",
        "",
        f"{console['n']:,} run summaries (1,000 tenants, 5 workflows, every status, changes",
        "over 30 days); the console's runs list page rendered through its WSGI application",
        f"(queries and HTML), {console['repeats']} times per filter after one warm-up."
        + (f" Measured {console['generated_at']}." if console.get("generated_at") else ""),
        f"Over all filters: **p50 {console['p50']} ms, p95 {console['p95']} ms**.",
        "",
    ]
    out += _table(
        ["filter", "p50 ms", "p95 ms"],
        [[name, t["p50"], t["p95"]] for name, t in console["scenarios"].items()],
    )
    upsert = console["upsert_run_us"]
    out += [
        "",
        "`page_50` is the 50th page of the unfiltered list, reached by its keyset cursor.",
        "What the list's indexes cost every pass (the run-summary upsert, in one",
        f"transaction, on the same table): {upsert['with_console_indexes']} µs with them,",
        f"{upsert['without']} µs without.",
    ]
    return out


def _long_run_section(long: dict[str, Any] | None) -> list[str]:
    """Workload 8, when the results have it."""
    if not long:
        return []
    out = [
        "",
        "## 8. A long run",
        "",
        f"One run of `for_each` over {long['items']:,} items, a compute and a one-second wait",
        f"in each: {long['events']:,} events, {long['stream_bytes']:,} bytes of JSON, every",
        f"resume timed ({long['resumes_total_s']} s for all of them)."
        + (f" Measured {long['generated_at']}." if long.get("generated_at") else ""),
        "A suspension stores only what its pass added and a resume reads the run's results",
        "from `run_results` and its stream from the last version on, so neither grows with",
        "the run. The naive way — load and fold the whole stream on each resume, as",
        "release 0.1 did — is timed at the same two points. The points are measured in",
        "turn, one resume of each (a second run at suspension 10 beside the long one), so",
        "a stall of the machine lands on both alike.",
        "",
    ]
    out += _table(
        ["", "around suspension 10", "around suspension 1,000", "ratio"],
        [
            [
                f"resume (ms, median of {long.get('window', 20)})",
                long["resume_ms_at_10"],
                long["resume_ms_at_1000"],
                long["resume_ratio_1000_vs_10"],
            ],
            [
                "bytes appended per suspension",
                long["bytes_per_suspension_at_10"],
                long["bytes_per_suspension_at_1000"],
                long["bytes_per_suspension_ratio_1000_vs_10"],
            ],
            [
                "naive: load + fold the whole stream (ms)",
                long["naive_full_load_ms_at_10"],
                long["naive_full_load_ms_at_1000"],
                long["naive_full_load_ratio_1000_vs_10"],
            ],
        ],
    )
    return out


def _fan_out_section(fan: dict[str, Any] | None) -> list[str]:
    """Workload 9, when the results have it."""
    if not fan:
        return []
    out = [
        "",
        "## 9. Fan-out",
        "",
        f"One run maps {fan['n']:,} items onto child runs of the sleep workflow (step, wait",
        "1 s, step), all allowed at once: the worker starts them 100 per transaction, each",
        "settles itself in the join, the last one wakes the parent, which resumes with every",
        "result. Beside it, the naive approach: the same number of independent runs started",
        f"by events (workload 1's pipeline), measured in the same run with {fan['workers']}"
        " workers." + (f" Measured {fan['generated_at']}." if fan.get("generated_at") else ""),
        "",
    ]
    out += _table(
        ["", "value"],
        [
            ["makespan (trigger to the parent's completion, s)", fan["makespan_s"]],
            ["children per second", fan["children_per_s"]],
            ["independent runs per second (naive)", fan["independent_runs_per_s"]],
            ["ratio children / independent runs", fan["ratio_vs_independent_runs"]],
            ["join: last child settled to parent completed (s)", fan["join_s"]],
        ],
    )
    return out


def _hardening(figures: dict[str, Any] | None) -> list[str]:
    """Workload 11 (bench/hardening.py), when the results hold it."""
    if not figures:
        return []
    lb, bc = figures["lookback"], figures["broadcast"]
    ms = lb["look_back_ms"]
    load = figures.get("load_average", {})
    out = [
        "",
        "## 11. Look-back and broadcast wakeup",
        "",
        "### A new wait's look-back over many stored events",
        "",
        f"(`python -m bench.hardening`, {figures.get('generated_at', '')}; load average "
        f"{load.get('start', '?')} at the start, {load.get('end', '?')} at the end.)",
        "",
        f"{lb['stored_events']:,} approvals of other orders are stored; {lb['waits']} runs",
        "then reach their `wait_for_event` one at a time (half of them find their own",
        f"approval among the stored ones: {lb['found']} found). Time of the projection call",
        "that creates the wait, look-back included (by the equality key's index):",
        "",
    ]
    out += _table(
        ["stored events", "p50", "p90", "max"],
        [[lb["stored_events"], f"{ms['p50']} ms", f"{ms['p90']} ms", f"{ms['max']} ms"]],
    )
    out += [
        "",
        "### One event waking many waits (broadcast)",
        "",
        f"{bc['waiting_runs']:,} runs wait for the same sale; one event wakes them through",
        "EventWakeup's `wake_and_enqueue` (matches recorded 1,000 per transaction, rows",
        "leased 500 per statement, the resume queue in memory: SQS is not measured).",
        "",
    ]
    out += _table(
        ["waiting runs", "woken", "enqueued", "seconds", "woken/s", "SQL statements"],
        [
            [
                bc["waiting_runs"],
                bc["woken"],
                bc["enqueued"],
                bc["seconds"],
                bc["woken_per_s"],
                bc["statements"],
            ]
        ],
    )
    return out


def _memory_lines(memory: dict[str, Any] | None) -> list[str]:
    """Workload 1's memory figure, when the results have it."""
    if not memory:
        return []
    tables = ", ".join(f"`{t}` {mb}" for t, mb in memory["database_mb_by_table"].items())
    out = [
        "",
        "**Memory per 10,000 waiting runs** (`memory_mb_per_10k_waiting`): the same",
        f"pipeline in a process of its own ingests {memory['waiting_runs']:,} runs, 100 at a",
        "time, on a clock that stands still, so each stays suspended at its wait; growth",
        "from before to after (200 runs in), scaled to 10,000 runs. Nothing of a waiting",
        "run is meant to stay in a worker: the first row shows whether anything does (the",
        f"process holds {memory['worker_process_rss_mb']} MB in all, with"
        f" {memory['workers']} worker threads and their connections).",
        "",
    ]
    out += _table(
        ["", "per 10,000 waiting runs"],
        [
            ["worker process resident memory (MB)", memory["worker_rss_mb"]],
            ["database, all engine tables with indexes (MB)", memory["database_mb"]],
            ["database bytes per waiting run", memory["database_bytes_per_run"]],
        ],
    )
    return [*out, "", f"By table (MB per 10,000): {tables}."]


def _noisy_neighbor_section(noisy: dict[str, Any] | None) -> list[str]:
    """Workload 12, when the results have it."""
    if not noisy:
        return []
    without = noisy.get("without_share") or {}
    out = [
        "",
        "## 12. Noisy neighbour",
        "",
        f"Tenant A has {noisy['a_due']:,} runs due (seeded in bulk, due an hour ago);"
        f" tenant B's runs fall due one every {noisy['b_interval_s']} s from"
        f" {noisy['b_first_due_after_start_s']} s after the drain starts. The deployed path"
        f" in {noisy['workers']} worker processes (the backlog drain's) plus the due scan and",
        "the pending projection in processes of their own: the scan leases and sends resume",
        "requests into one first-in-first-out queue (SQS's stand-in) and waits for room",
        "while tenants are held to their share, as DueScan does; a worker resumes up to ten",
        "requests per transaction, as ResumeRun does. B's lateness: the commit of its",
        f"resume minus its due time, over the {noisy['b_runs_during_drain']} B runs that fell",
        "due before A's backlog was gone. Beside it, the same with A's backlog at most",
        "10,000 and without the tenant share (`tenant_queue_seconds=0`: the scan hands the",
        "backlog to the queue as fast as it leases it, as before issue 15).",
        "",
    ]
    rows = [
        [
            "with the share (default)",
            noisy["a_due"],
            noisy["p50_s"],
            noisy["p99_s"],
            noisy["max_s"],
            noisy["a_resumes_per_s"],
        ]
    ]
    if without:
        rows.append(
            [
                "without the share",
                without["a_due"],
                without["p50_s"],
                without["p99_s"],
                without["max_s"],
                without["a_resumes_per_s"],
            ]
        )
    out += _table(
        ["due scan", "A's backlog", "B late p50 s", "B late p99 s", "B late max s", "A resumes/s"],
        rows,
    )
    out += [
        "",
        "With the share, the queue holds about half a second of A's resumes",
        "(`DUE_SCAN_TENANT_QUEUE_SECONDS`), so B waits about that long plus the scan's",
        "0.1 s pauses, whatever the size of A's backlog; without it B waits for the part of",
        "A's backlog already queued, which grows with the backlog.",
    ]
    return out


def _drain_cpu_lines(bd: dict[str, Any]) -> list[str]:
    """Where the largest drain's CPU went, and the drain with half the processes."""
    cpu, half = bd.get("cpu"), bd.get("half_the_processes")
    out: list[str] = []
    if cpu and cpu.get("machine_ms_per_resume") is not None:
        cores = cpu["cores"] or 1
        needed = cores / (0.5 * bd["commits_per_s"]) * 1000
        out += [
            "",
            f"CPU of the {bd['fraction_at_n']:,}-run drain (ResumeBatchSize"
            f" {bd.get('resume_batch', 10)}), in ms per resume: the worker processes",
            f"{cpu['workers_ms_per_resume']:.3f}, the projection process"
            f" {cpu['projection_ms_per_resume']:.3f}, the whole machine"
            f" {cpu['machine_ms_per_resume']:.3f}",
            f"(the rest, {cpu['rest_ms_per_resume']:.3f}, is mostly the database server). The"
            f" machine was {cpu['machine_busy_fraction']:.0%} busy on its {cores} cores:",
            f"the drain is CPU-bound, and half the commit rate would need {needed:.2f} ms of CPU"
            " a resume.",
        ]
    same = [r for r in bd["runs"] if half and r["n"] == half["n"]]
    if half and same:
        full = same[0]["drain"]
        change = half["drain"]["resumes_per_s"] / full["resumes_per_s"] - 1
        out += [
            "",
            f"The {half['n']:,}-run drain with {half['drain']['workers']} processes:"
            f" {half['drain']['resumes_per_s']:,.0f} resumes/s ({change:+.0%} against"
            f" {full['workers']} processes),",
            f"against {half['commit_rate']['commits_per_s']:,.0f} commits/s on as many"
            f" connections ({half['fraction']:.1%}). The drain is CPU-bound: processes",
            "beyond the cores add switching, not throughput, while the reference grows with",
            "connections (group commit). The target is set at four.",
        ]
    unprepared = bd.get("without_prepared_statements")
    if unprepared:
        drain = unprepared["drain"]
        machine = drain["cpu"]["machine_ms_per_resume"]
        cpu_text = f" ({machine:.3f} ms of the machine's CPU a resume)" if machine else ""
        out += [
            "",
            f"The {unprepared['n']:,}-run drain without prepared statements"
            " (`DB_PREPARED_STATEMENTS=false`, for a proxy",
            f"that cannot carry them): {drain['resumes_per_s']:,.0f} resumes/s{cpu_text},",
            f"{unprepared['rate_vs_prepared']:.0%} of the same drain with them: each"
            " statement is then parsed and planned anew.",
        ]
    return out
