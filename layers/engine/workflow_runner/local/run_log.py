"""The local runtime's log of what went wrong in runs (table local_run_log).

In AWS a failure's text stays out of everything stored (invariant 8: stored events say
`workflow step failed (<Class>)`) and log lines show a class and a hash unless the
operator opts in. On a developer's machine that hides the one thing they need: which key
was not JSON, what the exception said. So while the functions run locally, exception
text is logged in full (LOG_EXCEPTION_TEXT=false turns it off), and the engine's
warnings about a run — a failed step, task attempt, trigger or delivery, each logged
with its tenant and run — are kept in the local log, where `wfr local`, `wfr runs show`
and the test kit read them. The stored events are the same as in AWS.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime

from .. import redaction
from ..store import LoggedLine, Store

ENGINE_LOGGER = "workflow_runner"


class _Capture(logging.Handler):
    """Keeps the engine's warnings that name a tenant and a run."""

    def __init__(self, now: Callable[[], datetime]) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[LoggedLine] = []
        self._now = now

    def emit(self, record: logging.LogRecord) -> None:
        tenant, run = getattr(record, "tenant_id", None), getattr(record, "run_id", None)
        if not isinstance(tenant, str) or not isinstance(run, str):
            return
        task = getattr(record, "task", None)
        attempt = getattr(record, "attempt", None)
        message = record.getMessage()
        if isinstance(task, str):
            message += f" (task {task!r}" + (f", attempt {attempt})" if attempt else ")")
        detail = getattr(record, "detail", None) or getattr(record, "reason", None)
        self.lines.append(
            LoggedLine(
                0,
                tenant,
                run,
                self._now(),
                message,
                task if isinstance(task, str) else None,
                None if detail is None else str(detail),
            )
        )


@contextmanager
def keeping_run_log(store: Store, now: Callable[[], datetime]) -> Iterator[None]:
    """While the block runs (a handler, locally): the engine's warnings about runs go to
    the local log, written when the block ends (its writes are the handler's business
    time, `now`); the redaction policy the handler sets is undone afterwards."""
    previous = redaction.configured()
    capture = _Capture(now)
    engine = logging.getLogger(ENGINE_LOGGER)
    engine.addHandler(capture)
    try:
        yield
    finally:
        engine.removeHandler(capture)
        redaction.configure(previous)
        if capture.lines:
            store.local.log(capture.lines)
