"""Keeping the cyclic garbage collector off what a warm process holds for good.

A Lambda container (or any long-lived worker) imports the engine, boto3, pydantic and
the workflow modules once and keeps every one of those objects until it dies: about
92,000 tracked objects after importing a handler. CPython's full collections walk all
of them each time, which here took about 26 ms: a pause of every thread of the process
in the middle of whatever request it happened to hit.

`settle` collects once and moves everything alive then into the permanent generation
(`gc.freeze`), so later collections walk only what requests create. Frozen objects are
still freed by reference counting; only a reference cycle among them would never be
collected, which is why it runs once the imports are done, not per request.
"""

from __future__ import annotations

import gc


def settle() -> int:
    """Collect, then freeze everything alive; returns how many objects are frozen now.
    Call it after a process's imports and one-time setup (again after more of them:
    each call freezes what was added since)."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
