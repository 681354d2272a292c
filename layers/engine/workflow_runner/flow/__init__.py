"""Flow control: how much of a workflow's work runs at once, how fast it starts, which
triggers start nothing, and what cancels runs.

One room, stage by stage: `constructs` (what a definition says: Concurrency, Throttle,
RateLimit, Debounce, Singleton, Batch, CancelOn), `keys` (what a limit counts, resolved
for a run or a task), `store` (slots, turns, queues and skips in PostgreSQL, with
`queries_flow.sql`), `starts` (a trigger judged before its run starts), `passes` (a
resume takes its run's slots), `tasks` (an attempt takes its slots and turn, and gives
them back), `wake` (a freed slot wakes held work, after the commit that freed it).

Nothing here keeps a count in memory: slots and turns are rows changed in the
transaction of the work they admit, so every Lambda sees the same limits.
"""

from __future__ import annotations

from .constructs import (
    Batch,
    CancelOn,
    Concurrency,
    Debounce,
    FlowControl,
    RateLimit,
    Singleton,
    Throttle,
)

__all__ = [
    "Batch",
    "CancelOn",
    "Concurrency",
    "Debounce",
    "FlowControl",
    "RateLimit",
    "Singleton",
    "Throttle",
]
