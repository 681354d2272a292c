"""Where the database's time goes in a workload: server time per statement, per run.

    python -m bench.statements {drain,event_wait,sleep,flow,flow_pair} N [--workers W]
        [--batch B]

Starts an embedded PostgreSQL of its own with `pg_stat_statements` loaded (it is not
loaded in `make bench`: it costs every statement a little, and the peers would not
get it), runs the workload on a fresh database, counts only what the workload's
measured part runs (the statistics are reset once the setup is done: the drain's runs
seeded, the event wait's runs all waiting; the sleep workflow has no setup), and
prints each statement's calls, server time in total and per run, and rows, named
after the engine's query it is (the `-- name:` of its queries*.sql) where it is one.
The server time is execution only: parsing, the protocol, commits and autovacuum are
not in it, and neither is Python.
"""

from __future__ import annotations

import argparse
import contextlib
import re
from collections.abc import Callable
from typing import Any

import psycopg
from workflow_runner.embedded import start_embedded_postgres
from workflow_runner.store.queries import queries

from . import backlog, event_wait, flow_control, sleep_workflow
from .common import fresh_database
from .harness import DEFAULT_BATCHES, Batches

_PLACEHOLDER = re.compile(r"%\(\w+\)s|\$\d+")
_COMMENT = re.compile(r"--[^\n]*")
# Characters of a statement's start that must agree for it to be named after a query.
_SAME_START = 60


def _shape(sql: str) -> str:
    """A statement's text without comments, placeholders or layout, for comparing."""
    text = _PLACEHOLDER.sub("?", _COMMENT.sub(" ", sql))
    return " ".join(text.split()).lower()


def name_of(sql: str, named: dict[str, str]) -> str:
    """The engine query whose text `sql` is (the longest shared start wins), or ""."""
    shape = _shape(sql)
    best, best_len = "", 0
    for name, other in named.items():
        common = next(
            (i for i, (a, b) in enumerate(zip(shape, other, strict=False)) if a != b),
            min(len(shape), len(other)),
        )
        if common > best_len:
            best, best_len = name, common
    return best if best_len >= min(_SAME_START, len(shape)) else ""


def _with_statements(admin_url: str, server: Any) -> None:
    from embedded_postgres._commands import pg_ctl

    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute("ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'")
        conn.execute("ALTER SYSTEM SET pg_stat_statements.track = 'all'")
    pg_ctl(["-w", "restart"], pgdata=server.pgdata, user=server.system_user, timeout=60)


def _stop(server: Any) -> None:
    """Stop the server: its handle's own cleanup stops only the postmaster it started,
    which `_with_statements`' restart replaced, and so left the restarted one running."""
    from embedded_postgres._commands import pg_ctl

    # Already stopped: the cleanup after does the rest.
    with contextlib.suppress(Exception):
        pg_ctl(["-w", "stop"], pgdata=server.pgdata, user=server.system_user, timeout=60)


def _reset(url: str) -> Callable[[], None]:
    def reset() -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("SELECT pg_stat_statements_reset()")

    return reset


def _statements(url: str) -> list[dict[str, Any]]:
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT query, calls, total_exec_time, rows FROM pg_stat_statements "
            "WHERE query NOT LIKE '%pg_stat_statements%' ORDER BY total_exec_time DESC"
        ).fetchall()
    named = {name: _shape(text) for name, text in queries().items()}
    return [
        {"name": name_of(q, named), "query": q, "calls": c, "ms": ms, "rows": r}
        for q, c, ms, r in rows
    ]


def profile(
    workload: str, n: int, workers: int, batches: Batches = DEFAULT_BATCHES
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Run `workload` on a server of its own with pg_stat_statements; (its figures,
    its statements). `batches`: the event wait's intake and resume batch sizes."""
    server, admin_url = start_embedded_postgres(fast=False)
    try:
        _with_statements(admin_url, server)
        with fresh_database(admin_url, "bench_statements") as url:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("CREATE EXTENSION pg_stat_statements")
            if workload == "drain":
                figures = backlog.drain_processes(url, n, workers, seeded=_reset(url))
            elif workload == "sleep":
                _reset(url)()  # the extension's own statements out
                figures = sleep_workflow.run_ours(url, n, workers)
            elif workload in ("flow", "flow_pair"):
                _reset(url)()
                workflow = "bench-pair" if workload == "flow_pair" else "bench-one-key"
                figures = flow_control.violations(
                    url, n, workflow, workers, flow_control.CLAIMER_THREADS, 600.0
                )
            else:
                figures = event_wait.run_ours(url, n, workers, waiting=_reset(url), batches=batches)
            return figures, _statements(url)
    finally:
        _stop(server)
        server.cleanup()


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line: the workload, N, and how it runs."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("workload", choices=["drain", "event_wait", "sleep", "flow", "flow_pair"])
    parser.add_argument("n", type=int)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument(
        "--batch",
        type=int,
        default=DEFAULT_BATCHES.intake,
        help="event_wait: IntakeBatchSize and ResumeBatchSize (the template's default: 10)",
    )
    return parser.parse_args(argv)


def main() -> None:
    args = arguments()
    batches = Batches(intake=args.batch, resume=args.batch)
    figures, statements = profile(args.workload, args.n, args.workers, batches)
    rate = (
        figures.get("resumes_per_s") or figures.get("runs_per_s") or figures.get("attempts_per_s")
    )
    print(f"{args.workload}, {args.n} runs, {args.workers} workers: {rate} runs/s")
    total = sum(s["ms"] for s in statements)
    print(f"server execution time: {1000 * total / args.n:.1f} us a run")
    print(f"{'us/run':>8} {'calls':>7} {'rows':>8}  statement")
    for s in statements[: args.top]:
        label = s["name"] or " ".join(s["query"].split())[:70]
        print(f"{1000 * s['ms'] / args.n:8.1f} {s['calls']:7d} {s['rows']:8d}  {label}")


if __name__ == "__main__":
    main()
