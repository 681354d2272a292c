"""Runs a workflow's step tree for one pass: from a start or resume point to the next
suspension, a return, the end, or a failure. Pure: no I/O; the caller persists.

One module per step family, each a mixin over the pass's state (base.py):

- base.py — the pass's state and results, the context steps see, resolving arguments;
- containers.py — branch, for_each, retry;
- waits.py — wait, wait_for_event;
- callbacks.py — wait_for_callback, create_callback, await_callback (callback_view.py:
  the created callbacks a pass sees, `ctx.callbacks`);
- conditions.py — wait_for_condition (polling: check, checkpoint, wait, check again);
- work.py — tasks, mail and webhooks, parallel, child runs;
- core.py — `Interpreter`: `run()` and the dispatch over step kinds.
"""

from __future__ import annotations

from ..pass_result import RetryWait, describe_step_error
from ..step_requests import backoff_delay
from .core import Interpreter

__all__ = ["Interpreter", "RetryWait", "backoff_delay", "describe_step_error"]
