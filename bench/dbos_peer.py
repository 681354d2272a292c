"""The DBOS peer: the sleep workflow (workload 1), the event wait and the fan-out on
DBOS Transact, on the same server.

Run as its own process (`python -m bench.dbos_peer WORKLOAD URL N`) so DBOS's executor
threads and background loops never share a process with our side; prints one JSON
object. DBOS runs with its default configuration except for the application name and
the system database URL. Latency per workflow comes from DBOS's own status rows
(created_at -> updated_at when it reached SUCCESS), throughput from the first
creation to the last completion.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import psycopg
from dbos import DBOS, DBOSConfig
from sqlalchemy.engine import make_url
from workflow_runner import heap

from .common import summary
from .peer_figures import wake_figures


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


def _configure(libpq_url: str) -> None:
    config: DBOSConfig = {
        "name": "wfr-bench-peer",
        "system_database_url": sqlalchemy_url(libpq_url),
        "log_level": "WARNING",
    }
    DBOS(config=config)


def _status_rows(libpq_url: str, ids: Sequence[str]) -> dict[str, tuple[float, float]]:
    """(created_at, updated_at) in epoch seconds of each of these workflows (all must
    have reached SUCCESS), by workflow id."""
    with psycopg.connect(libpq_url) as conn:
        rows = conn.execute(
            "SELECT workflow_uuid, created_at, updated_at, status FROM dbos.workflow_status "
            "WHERE workflow_uuid = ANY(%s)",
            [list(ids)],
        ).fetchall()
    if len(rows) != len(ids) or any(status != "SUCCESS" for *_, status in rows):
        raise RuntimeError(f"DBOS: {len(rows)} status rows, not all SUCCESS")
    return {wid: (created / 1000.0, updated / 1000.0) for wid, created, updated, _ in rows}


def run(libpq_url: str, n: int) -> dict[str, Any]:
    """Step -> DBOS.sleep(1) -> step, N workflows started at once."""
    _configure(libpq_url)

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
    rows = list(_status_rows(libpq_url, ids).values())
    latencies = [updated - created for created, updated in rows]
    first_created = min(created for created, _ in rows)
    last_done = max(updated for _, updated in rows)
    makespan = last_done - min(first_created, t0)
    return {
        "n": n,
        "completed": len(rows),
        "makespan_s": round(makespan, 3),
        "runs_per_s": round(n / makespan, 1),
        "latency_s": summary(latencies),
        "client_wall_s": round(t_end - t0, 3),
    }


SENDERS = 4  # threads sending the events (our pipeline's worker count)


def _in_threads(items: Sequence[Any], act: Callable[[Any], None]) -> None:
    threads = [
        threading.Thread(target=lambda k=k: [act(x) for x in items[k::SENDERS]])
        for k in range(SENDERS)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def event_wait(libpq_url: str, n: int) -> dict[str, Any]:
    """N workflows each in `DBOS.recv("go")`; once all are waiting, one `DBOS.send` to
    each (from SENDERS threads). Resumed: the workflow's SUCCESS (it returns at once)."""
    _configure(libpq_url)
    waiting = {"count": 0}
    lock = threading.Lock()

    @DBOS.workflow()
    def await_workflow(i: int) -> int:
        with lock:
            waiting["count"] += 1
        message = DBOS.recv("go", timeout_seconds=600)
        return int(message["i"])

    DBOS.launch()
    heap.settle()
    sent: dict[str, float] = {}
    try:
        handles = [DBOS.start_workflow(await_workflow, i) for i in range(n)]
        ids = [handle.get_workflow_id() for handle in handles]
        deadline = time.monotonic() + 300
        while waiting["count"] < n and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)  # as ours: let the waits settle before measuring

        def send(k: int) -> None:
            sent[ids[k]] = time.time()
            DBOS.send(ids[k], {"i": k}, topic="go")

        _in_threads(range(n), send)
        results = [handle.get_result() for handle in handles]
    finally:
        DBOS.destroy()
    if results != list(range(n)):
        raise RuntimeError("DBOS returned wrong results")
    rows = _status_rows(libpq_url, ids)
    return wake_figures(sent, {wid: finished for wid, (_, finished) in rows.items()})


def fan_out(libpq_url: str, n: int) -> dict[str, Any]:
    """One parent workflow starting N one-step child workflows (`DBOS.start_workflow`)
    and joining their handles' results."""
    _configure(libpq_url)

    @DBOS.step()
    def work(i: int) -> int:
        return i

    @DBOS.workflow()
    def child(i: int) -> int:
        return work(i)

    @DBOS.workflow()
    def parent(count: int) -> int:
        handles = [DBOS.start_workflow(child, i) for i in range(count)]
        return sum(handle.get_result() for handle in handles)

    DBOS.launch()
    heap.settle()
    try:
        t0 = time.time()
        handle = DBOS.start_workflow(parent, n)
        total = handle.get_result()
        parent_id = handle.get_workflow_id()
    finally:
        DBOS.destroy()
    if total != n * (n - 1) // 2:
        raise RuntimeError(f"DBOS fan-out: sum {total}")
    created, finished = _status_rows(libpq_url, [parent_id])[parent_id]
    makespan = finished - min(created, t0)
    return {
        "n": n,
        "makespan_s": round(makespan, 3),
        "children_per_s": round(n / makespan, 1),
    }


WORKLOADS = {"sleep": run, "event_wait": event_wait, "fan_out": fan_out}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("workload", choices=sorted(WORKLOADS))
    parser.add_argument("url", help="libpq URL of the (empty) DBOS system database")
    parser.add_argument("n", type=int)
    args = parser.parse_args()
    print(json.dumps(WORKLOADS[args.workload](args.url, args.n)))


if __name__ == "__main__":
    main()
