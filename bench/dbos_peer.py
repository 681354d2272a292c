"""The peer of workload 1: the same sleep workflow on DBOS Transact, on the same server.

Run as its own process (`python -m bench.dbos_peer URL N`) so DBOS's executor threads
and background loops never share a process with our side; prints one JSON object.
DBOS runs with its default configuration except for the application name and the
system database URL. Latency per workflow comes from DBOS's own status rows
(created_at -> updated_at when it reached SUCCESS), throughput from the first
creation to the last completion.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import psycopg
from dbos import DBOS, DBOSConfig
from sqlalchemy.engine import make_url
from workflow_runner import heap

from .common import summary


def sqlalchemy_url(libpq_url: str) -> str:
    """A psycopg (libpq) URL of the embedded server as a SQLAlchemy URL for DBOS."""
    params = {
        k: v for k, v in psycopg.conninfo.conninfo_to_dict(libpq_url).items() if v is not None
    }
    query = {"host": str(params.pop("host"))} if "host" in params else {}
    if "port" in params:
        query["port"] = str(params.pop("port"))
    url = make_url("postgresql+psycopg://").set(
        username=str(params.get("user", "postgres")),
        password=str(params["password"]) if params.get("password") else None,
        database=str(params.get("dbname", "postgres")),
        query=query,
    )
    return url.render_as_string(hide_password=False)


def run(libpq_url: str, n: int) -> dict[str, Any]:
    config: DBOSConfig = {
        "name": "wfr-bench-peer",
        "system_database_url": sqlalchemy_url(libpq_url),
        "log_level": "WARNING",
    }
    DBOS(config=config)

    @DBOS.step()
    def first(i: int) -> int:
        return i

    @DBOS.step()
    def second(i: int) -> int:
        return i + 1

    @DBOS.workflow()
    def sleep_workflow(i: int) -> int:
        value = first(i)
        DBOS.sleep(1)
        return second(value)

    DBOS.launch()
    heap.settle()  # the heap treatment our pipeline gets (workflow_runner.heap)
    try:
        t0 = time.time()
        handles = [DBOS.start_workflow(sleep_workflow, i) for i in range(n)]
        results = [handle.get_result() for handle in handles]
        t_end = time.time()
        ids = [handle.get_workflow_id() for handle in handles]
    finally:
        DBOS.destroy()
    if results != [i + 1 for i in range(n)]:
        raise RuntimeError("DBOS returned wrong results")
    with psycopg.connect(libpq_url) as conn:
        rows = conn.execute(
            "SELECT created_at, updated_at, status FROM dbos.workflow_status "
            "WHERE workflow_uuid = ANY(%s)",
            [ids],
        ).fetchall()
    if len(rows) != n or any(status != "SUCCESS" for _, _, status in rows):
        raise RuntimeError(f"DBOS: {len(rows)} status rows, not all SUCCESS")
    latencies = [(updated - created) / 1000.0 for created, updated, _ in rows]
    first_created = min(created for created, _, _ in rows) / 1000.0
    last_done = max(updated for _, updated, _ in rows) / 1000.0
    makespan = last_done - min(first_created, t0)
    return {
        "n": n,
        "completed": len(rows),
        "makespan_s": round(makespan, 3),
        "runs_per_s": round(n / makespan, 1),
        "latency_s": summary(latencies),
        "client_wall_s": round(t_end - t0, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("url", help="libpq URL of the (empty) DBOS system database")
    parser.add_argument("n", type=int)
    args = parser.parse_args()
    print(json.dumps(run(args.url, args.n)))


if __name__ == "__main__":
    main()
