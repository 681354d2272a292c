"""The arithmetic the side-by-side workloads share: wake-up figures from send and
resume times, a peer's settings and the best of them, and the ratios against a peer."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .common import summary


@dataclass(frozen=True)
class WorkerSettings:
    """One shape of Absurd's workers: processes, tasks claimed per poll, idle poll."""

    processes: int
    batch: int
    poll_s: float

    def label(self) -> str:
        return f"{self.processes} proc, batch {self.batch}, poll {self.poll_s * 1000:g} ms"


def wake_figures(sent: Mapping[Any, float], done: Mapping[Any, float]) -> dict[str, Any]:
    """Throughput from the first send to the last resumed run, and each run's latency
    from its event's send to its resume (both in wall-clock seconds, keyed by run).
    `send_span_ms`: from the first send to the last, how long the events took to hand
    over (a latency counts from its own event's send, so events handed over one by one
    wait less behind one another than events all handed over at once)."""
    missing = set(done) - set(sent)
    if missing or not done:
        raise ValueError(f"wake figures: {len(done)} resumed, {len(missing)} without a send")
    latency = summary([done[k] - sent[k] for k in done], scale=1000.0, digits=2)
    span = max(done.values()) - min(sent.values())
    return {
        "n": len(done),
        "span_s": round(span, 3),
        "runs_per_s": round(len(done) / span, 1),
        "send_span_ms": round((max(sent.values()) - min(sent.values())) * 1000.0, 1),
        "latency_ms": latency,
        "p50_ms": latency["p50"],
        "p99_ms": latency["p99"],
    }


def best_setting(tried: Sequence[dict[str, Any]], key: str = "runs_per_s") -> dict[str, Any]:
    """The try with the highest `key` (a peer's best shape: the ratio's denominator);
    the first of equals, so the order tried decides a tie."""
    if not tried:
        raise ValueError("no settings tried")
    return max(tried, key=lambda t: t[key])


def quickest(tried: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The try with the lowest p50 latency (the first of equals)."""
    if not tried:
        raise ValueError("no settings tried")
    return min(tried, key=lambda t: t["p50_ms"])


def send_pace(measured: Mapping[str, Any]) -> float | None:
    """The rate a workload's events were handed over at, events/s (from its first send
    to its last), or None where its figures predate `send_span_ms` or every event went
    at once."""
    span_ms = float(measured.get("send_span_ms") or 0.0)
    n = int(measured["n"])
    if span_ms <= 0.0 or n < 2:
        return None
    return (n - 1) / (span_ms / 1000.0)


def leaders(
    tried: Sequence[dict[str, Any]],
    count: int,
    key: str = "runs_per_s",
    within: float = 0.0,
) -> list[dict[str, Any]]:
    """A sweep's shapes worth measuring again at the full N, best first (the first of
    equals first): the `count` with the highest `key`, and besides them every shape
    whose `key` is within the fraction `within` of the best (a small N's order among
    shapes that close is noise, and the peer's denominator must be its best shape)."""
    ranked = sorted(tried, key=lambda t: -t[key])
    if not ranked:
        return []
    floor = ranked[0][key] * (1.0 - within)
    return [t for i, t in enumerate(ranked) if i < count or t[key] >= floor]


def throughput_ratio(ours: float, peer: float) -> float:
    """Our rate over the peer's (> 1: we are faster)."""
    return round(ours / peer, 2)


def makespan_ratio(ours_s: float, peer_s: float) -> float:
    """The peer's makespan over ours (> 1: we finish sooner)."""
    return round(peer_s / ours_s, 2)
