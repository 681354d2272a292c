"""Bounding one task attempt by its timeout: a timer signal in the main thread (a Lambda
handler, the local runtime), an abandoned thread elsewhere."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from typing import Any


class TaskTimeout(BaseException):
    """An attempt ran past its timeout. A BaseException, so that a task's own
    `except Exception` cannot swallow it."""


def call_with_timeout(fn: Callable[[], Any], seconds: float) -> Any:
    """Run `fn()`, raising TaskTimeout after `seconds`.

    In the main thread (a Lambda handler, the local runtime) a timer signal interrupts
    the call even inside a blocking system call; elsewhere the call runs in a thread
    that is abandoned when it overruns.
    """
    if threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer"):

        def on_alarm(signum: int, frame: Any) -> None:
            raise TaskTimeout(f"attempt exceeded {seconds:.1f}s")

        previous = signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.001))
        try:
            return fn()
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as error:
            box["error"] = error

    thread = threading.Thread(target=target, name="workflow-task", daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise TaskTimeout(f"attempt exceeded {seconds:.1f}s")
    if "error" in box:
        raise box["error"]
    return box.get("value")
