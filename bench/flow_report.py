"""The flow-control section of docs/BENCHMARKS.md (workload 13)."""

from __future__ import annotations

from typing import Any

from .report_format import table


def flow_section(flow: dict[str, Any] | None) -> list[str]:
    """Workload 13, when the results have it."""
    if not flow:
        return []
    one, pair = flow["one_key"], flow["pair"]
    thr, over, hot = flow["throttle"], flow["overhead"], flow["hot_key"]
    generated = f" (run {flow['generated_at']}, alone)" if flow.get("generated_at") else ""
    out = [
        "",
        f"## 13. Flow control{generated}",
        "",
        "Limits enforced in PostgreSQL by the engine's own stages (workflow_runner.flow):",
        "concurrency slots (a pass's row lock, a task attempt's lease), throttle turns",
        "(GCRA on the key's row), work held back as parked rows woken when a slot frees.",
        "",
        f"**Concurrency violations** ({flow['concurrency_violations']}): "
        f"{one['attempts']:,} task attempts of one key (limit {one['limit']}) claimed by "
        f"{one['workers']} (more claimers than slots, so the limit bites); a sampler "
        f"counted the attempts running {one['samples']:,} times from its own connection"
        + (
            " (through a partial index on running rows that the bench adds for it)."
            if one.get("sampler_index")
            else "."
        ),
        f"At most {one['max_in_flight']} were seen at once; {one['attempts_per_s']} attempts/s.",
        f"The pair (per tenant {pair['tenant_limit']}, global {pair['limit']}, over "
        f"{pair['tenants']} tenants): at most {pair['max_in_flight']} in all and "
        f"{pair['max_in_flight_per_tenant']} of one tenant.",
        f"Within {one.get('budget_s', '?')} s each: {one.get('completed', '?')} of "
        f"{one.get('tasks', '?')} tasks completed for the one key, "
        f"{pair.get('completed', '?')} of {pair.get('tasks', '?')} for the pair "
        f"({pair.get('attempts_per_s', '?')} attempts/s; transient errors, deadlocks "
        f"among them: {one.get('transient_errors', '?')} and "
        f"{pair.get('transient_errors', '?')}). The limit was kept "
        f"{one.get('mean_in_flight', '?')} and {pair.get('mean_in_flight', '?')} full on "
        "average (attempts running, sampled). An attempt's outcome hands its slot to the "
        "next attempt queued for the key in its own transaction, and that attempt is due "
        "ahead of the work not yet tried; an attempt of the pair woken with one key's slot "
        "takes a free slot of the other key even while that key's queue waits (sent to the "
        "back of it instead, it gave its slot back, and with both keys queued none ever "
        "held both: 24,500 slots given back for 3,354 attempts in a minute, by "
        "pg_stat_statements). What each attempt still costs is a claim and an outcome, "
        "each a commit, on two cores shared with eight claimers and the sampler: "
        "`python -m bench.statements flow 3000` (2026-12-04) counts about 26 statements "
        "an attempt (held-back claims included), most of their 8 ms of statement time "
        "waiting for the key's slot rows (flow_count_free, flow_adopt_slots, "
        "flow_release_slots) and, 1.3 ms of it, the outcome's settle of its own task "
        "row waiting for claims' transactions: a claim's locking scan that reaches a row "
        "another claim has just committed locks it, finds it no longer due and skips it, "
        "and keeps that lock to its commit (PostgreSQL does not drop a lock whose recheck "
        "failed). The claimers spend 6.3-6.6 ms of CPU an attempt: the "
        "two cores are the bound. Since 6af8490 an attempt's outcome is appended on the "
        "run it read before it ran instead of reading it again: 133-141 -> 165-177 "
        "attempts/s for the one key, 3,000 attempts alternating on one server. An "
        "attempt of the pair woken with the global slot while its tenant's is busy hands "
        "the global slot on in its own transaction and waits in its tenant's queue; "
        "since 2026-12-04 the look after its commit is at that queue only (it was at "
        "every key the attempt touched, each look locking all five global slots once "
        "more): `python -m bench.statements flow_pair 3000` counts 1,673 looks "
        "(flow_count_free) where it counted 3,361, the statement time an attempt "
        "14.3 -> 7.4 ms; 10,000 attempts alternating on one server, 122-143 -> "
        "144-167 attempts/s. About one attempt in six still gives a slot back (539 of "
        "3,000): the global queue is served in arrival order, and its head's tenant "
        "may be full.",
        "",
        f"**Throttle rate error** ({flow['throttle_rate_error']}): {thr['triggers']:,} "
        f"triggers of a workflow throttled to {thr['limit_per_s']} starts a second, through "
        "the in-process pipeline (ingest, projection, due scan, resume workers), all "
        f"ingested first ({thr.get('ingest_s', '?')} s, each reserving its turn); over the "
        f"{thr['window_s']} s after that, {thr['observed_per_s']} starts a second, the "
        f"busiest second {thr.get('busiest_second', '?')}.",
        "",
        f"**Overhead** ({flow['overhead_ratio']}): workload 1's sleep workflow "
        f"(n={over['sleep_n']}) without and with a generous Concurrency on every run "
        "(10,000 of the tenant at once, never reached), alternating, the best of two each:",
        "without / with. A batch of new runs takes its first passes' slots in one "
        "statement (one round trip per run inside the batch cost 18% before), and a "
        "resume batch its passes' slots in one.",
        "The backlog drain (workload 2, "
        f"n={over['drain_n']:,}) the same way: ratio {over['drain_overhead_ratio']}.",
        "",
    ]
    out += table(
        ["figure", "none", "generous Concurrency"],
        [
            [
                "sleep workflow runs/s",
                over["sleep_runs_per_s"]["none"],
                over["sleep_runs_per_s"]["generous_concurrency"],
            ],
            [
                "backlog drain resumes/s",
                over["drain_resumes_per_s"]["none"],
                over["drain_resumes_per_s"]["generous_concurrency"],
            ],
        ],
    )
    lat = hot["lateness_s"]
    opened = (
        f"it began once the hot runs were queued, not still due to be held: "
        f"{hot['due_at_start']} due then"
        if "due_at_start" in hot
        else "it began at 80% of them queued, as runs before 2026-12-03 did"
    )
    out += [
        "",
        f"**Hot key** (p99 {flow['hot_key_p99_s']} s): {hot['hot_runs']:,} runs of one "
        "account (Concurrency(1) per account) queued for their slot "
        f"({hot['queued_at_start']:,} waiting when the measurement began, "
        f"{hot['queued_at_end']:,} at its end; {opened}) while another account's runs "
        "fell due one "
        f"every 100 ms ({hot['cold_runs']} of them): their lateness, resume committed minus "
        f"due time: p50 {lat.get('p50')} s, p99 {lat.get('p99')} s, max {lat.get('max')} s.",
    ]
    return out
