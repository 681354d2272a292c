"""The Absurd peer (absurd-sdk, the schema from absurdctl): the sleep workflow, the event
wait and the fan-out, on the same server as ours, on a database of its own.

Run as its own process (`python -m bench.absurd_peer WORKLOAD URL N [settings]`); it
installs `absurdctl.BUNDLED_SCHEMA_SQL`, creates its queues, starts `--processes`
worker processes (each one `Absurd.start_worker` on its own connection, claiming
`--batch` tasks per poll and polling every `--poll` seconds when a claim came back
empty) and prints one JSON object. A synchronous worker runs its claimed tasks one by
one on one connection (its `concurrency` option shares that connection between
threads), so processes are Absurd's way to use more connections and cores.

Figures come from Absurd's own rows: a task's `enqueue_at` and its run's
`completed_at` (clock_timestamp() on the server), against the driver's wall clock
for the moments the driver acted (the first spawn, each event's send).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import absurdctl
import psycopg
from absurd_sdk import Absurd, TaskContext

from .common import summary
from .peer_figures import WorkerSettings, wake_figures

QUEUE = "bench"
FAN_PARENT_QUEUE = "bench_fan_parent"
FAN_CHILD_QUEUE = "bench_fan_child"
SENDERS = 4  # threads spawning tasks and emitting events (our pipeline's worker count)


def install(url: str, queues: Sequence[str]) -> None:
    """The Absurd schema and the queues, on an empty database."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(absurdctl.BUNDLED_SCHEMA_SQL)  # type: ignore[arg-type]
    app = Absurd(url)
    try:
        for queue in queues:
            app.create_queue(queue)
    finally:
        app.close()


# --- the tasks ---------------------------------------------------------------------


def _register(app: Absurd, workload: str) -> None:
    if workload == "sleep":

        @app.register_task(name="sleep", queue=QUEUE)
        def sleep_task(params: Any, ctx: TaskContext) -> Any:
            first = ctx.step("first", lambda: params["i"])
            ctx.sleep_for("nap", 1.0)
            return ctx.step("second", lambda: first + 1)

    elif workload == "event_wait":

        @app.register_task(name="await", queue=QUEUE)
        def await_task(params: Any, ctx: TaskContext) -> Any:
            payload = ctx.await_event(f"go:{params['i']}")
            return payload["i"]  # type: ignore[index,call-overload]

    else:

        @app.register_task(name="child", queue=FAN_CHILD_QUEUE)
        def child(params: Any, ctx: TaskContext) -> Any:
            return ctx.step("work", lambda: params["i"])

        @app.register_task(name="parent", queue=FAN_PARENT_QUEUE)
        def parent(params: Any, ctx: TaskContext) -> Any:
            # The spawns as one checkpoint, then one durable wait per child
            # (TaskContext.await_task_result: a step that polls the child's state).
            ids = ctx.step(
                "spawn",
                lambda: [str(app.spawn("child", {"i": i})["task_id"]) for i in range(params["n"])],
            )
            total = 0
            for task_id in ids:
                snapshot = ctx.await_task_result(task_id, queue_name=FAN_CHILD_QUEUE)
                if snapshot.state != "completed":
                    raise RuntimeError(f"child {task_id} {snapshot.state}")
                total += int(snapshot.result)  # type: ignore[arg-type]
            return total


def _worker(
    url: str, queue: str, workload: str, settings: WorkerSettings, ready: Any, stop: Any
) -> None:
    app = Absurd(url, queue_name=queue)
    _register(app, workload)

    def stopper() -> None:
        stop.wait()
        app.stop_worker()

    threading.Thread(target=stopper, daemon=True).start()
    ready.release()
    app.start_worker(claim_timeout=300, batch_size=settings.batch, poll_interval=settings.poll_s)
    app.close()


class Workers:
    """Worker processes for the run of one workload (started before the clock starts)."""

    def __init__(self, url: str, workload: str, plan: Sequence[tuple[str, WorkerSettings]]):
        ctx = multiprocessing.get_context("spawn")
        self._ready = ctx.Semaphore(0)
        self._stop = ctx.Event()
        self._procs = [
            ctx.Process(target=_worker, args=(url, queue, workload, s, self._ready, self._stop))
            for queue, s in plan
            for _ in range(s.processes)
        ]

    def __enter__(self) -> Workers:
        for proc in self._procs:
            proc.start()
        for _ in self._procs:
            if not self._ready.acquire(timeout=60):
                raise RuntimeError("an Absurd worker did not start")
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        for proc in self._procs:
            proc.join(timeout=30)
            if proc.is_alive():
                proc.terminate()


# --- driving -----------------------------------------------------------------------


def _in_threads(
    url: str, queue: str, items: Sequence[Any], act: Callable[[Absurd, Any], None]
) -> None:
    """Call `act(client, item)` for every item from SENDERS threads, a client each."""

    def send(share: Sequence[Any]) -> None:
        app = Absurd(url, queue_name=queue)
        try:
            for item in share:
                act(app, item)
        finally:
            app.close()

    threads = [threading.Thread(target=send, args=(items[k::SENDERS],)) for k in range(SENDERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def _count(url: str, sql: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute(sql).fetchone()
    return int(row[0]) if row else 0


def _wait_for(url: str, sql: str, n: int, timeout: float, what: str) -> None:
    failed = f"SELECT count(*) FROM absurd.t_{QUEUE} WHERE state IN ('failed', 'cancelled')"
    deadline = time.monotonic() + timeout
    while _count(url, sql) < n:
        if time.monotonic() > deadline or _count(url, failed):
            raise RuntimeError(
                f"Absurd {what}: {_count(url, sql)}/{n}; failed {_count(url, failed)}"
            )
        time.sleep(0.1)


def _completed_runs(url: str, queue: str) -> list[tuple[float, float, Any]]:
    """(enqueue_at, completed_at, result) of every completed task, in epoch seconds."""
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            f"SELECT extract(epoch FROM t.enqueue_at), extract(epoch FROM r.completed_at),"
            f" t.completed_payload FROM absurd.t_{queue} t"
            f" JOIN absurd.r_{queue} r ON r.run_id = t.last_attempt_run"
            f" WHERE t.state = 'completed'"
        ).fetchall()
    return [(float(a), float(b), c) for a, b, c in rows]


def sleep_workflow(url: str, n: int, settings: WorkerSettings) -> dict[str, Any]:
    """Step -> sleep 1 s -> step, N tasks spawned at once."""
    install(url, [QUEUE])
    with Workers(url, "sleep", [(QUEUE, settings)]):
        t0 = time.time()
        _in_threads(url, QUEUE, range(n), lambda app, i: app.spawn("sleep", {"i": i}, queue=QUEUE))
        _wait_for(
            url, f"SELECT count(*) FROM absurd.t_{QUEUE} WHERE state = 'completed'", n, 900, "sleep"
        )
    rows = _completed_runs(url, QUEUE)
    if sorted(r for _, _, r in rows) != list(range(1, n + 1)):
        raise RuntimeError("Absurd returned wrong results")
    makespan = max(done for _, done, _ in rows) - t0
    return {
        "n": n,
        "settings": settings.__dict__,
        "completed": len(rows),
        "makespan_s": round(makespan, 3),
        "runs_per_s": round(n / makespan, 1),
        "latency_s": summary([done - enq for enq, done, _ in rows]),
    }


def event_wait(url: str, n: int, settings: WorkerSettings) -> dict[str, Any]:
    """N tasks each awaiting its own event `go:<i>`; once all sleep, N events emitted."""
    install(url, [QUEUE])
    sent: dict[int, float] = {}
    with Workers(url, "event_wait", [(QUEUE, settings)]):
        _in_threads(url, QUEUE, range(n), lambda app, i: app.spawn("await", {"i": i}, queue=QUEUE))
        _wait_for(url, f"SELECT count(*) FROM absurd.w_{QUEUE}", n, 300, "waits registered")
        time.sleep(0.5)  # as ours: let the workers go quiet before measuring

        def emit(app: Absurd, i: int) -> None:
            sent[i] = time.time()
            app.emit_event(f"go:{i}", {"i": i})

        _in_threads(url, QUEUE, range(n), emit)
        _wait_for(
            url, f"SELECT count(*) FROM absurd.t_{QUEUE} WHERE state = 'completed'", n, 300, "wakes"
        )
    rows = _completed_runs(url, QUEUE)
    if sorted(r for _, _, r in rows) != list(range(n)):
        raise RuntimeError("Absurd returned wrong results")
    return {
        **wake_figures(sent, {int(r): done for _, done, r in rows}),
        "settings": settings.__dict__,
    }


def fan_out(url: str, n: int, settings: WorkerSettings) -> dict[str, Any]:
    """One parent task spawning N one-step children and awaiting each one's result."""
    install(url, [FAN_PARENT_QUEUE, FAN_CHILD_QUEUE])
    parent_workers = WorkerSettings(1, 1, settings.poll_s)
    plan = [(FAN_CHILD_QUEUE, settings), (FAN_PARENT_QUEUE, parent_workers)]
    with Workers(url, "fan_out", plan):
        app = Absurd(url, queue_name=FAN_PARENT_QUEUE)
        try:
            t0 = time.time()
            app.spawn("parent", {"n": n}, queue=FAN_PARENT_QUEUE)
            done = f"SELECT count(*) FROM absurd.t_{FAN_PARENT_QUEUE} WHERE state = 'completed'"
            deadline = time.monotonic() + 600
            while _count(url, done) < 1:
                if time.monotonic() > deadline:
                    raise RuntimeError("Absurd fan-out: the parent did not complete")
                time.sleep(0.05)
        finally:
            app.close()
    (parent,) = _completed_runs(url, FAN_PARENT_QUEUE)
    children = _completed_runs(url, FAN_CHILD_QUEUE)
    if parent[2] != n * (n - 1) // 2 or len(children) != n:
        raise RuntimeError(f"Absurd fan-out: sum {parent[2]}, {len(children)} children")
    makespan = parent[1] - t0
    return {
        "n": n,
        "settings": settings.__dict__,
        "parent_settings": parent_workers.__dict__,
        "makespan_s": round(makespan, 3),
        "children_per_s": round(n / makespan, 1),
        "join_s": round(parent[1] - max(done for _, done, _ in children), 3),
    }


WORKLOADS = {"sleep": sleep_workflow, "event_wait": event_wait, "fan_out": fan_out}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("workload", choices=sorted(WORKLOADS))
    parser.add_argument("url", help="libpq URL of an empty database")
    parser.add_argument("n", type=int)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--poll", type=float, default=0.25, help="idle poll interval, s")
    args = parser.parse_args()
    settings = WorkerSettings(args.processes, args.batch, args.poll)
    print(json.dumps(WORKLOADS[args.workload](args.url, args.n, settings)))


if __name__ == "__main__":
    main()
