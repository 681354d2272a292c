"""Helpers shared by the function, infra and e2e tests (not fixtures)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.support import OTHER_TENANT
from tests.support import SAMPLE_TENANT as TENANT

__all__ = ["OTHER_TENANT", "TENANT"]

ROOT = Path(__file__).resolve().parents[2]
EVENTS = ROOT / "events"
TEMPLATE = ROOT / "template.yaml"


def load_event(name: str) -> dict[str, Any]:
    """A sample event from events/ (a fresh copy each time)."""
    return json.loads((EVENTS / name).read_text())


class Emitted:
    """What the handlers printed: EMF metric blobs and structured log lines."""

    def __init__(self, text: str) -> None:
        self.metrics: list[dict[str, Any]] = []
        self.logs: list[dict[str, Any]] = []
        for line in text.splitlines():
            try:
                blob = json.loads(line)
            except ValueError:
                continue
            if isinstance(blob, dict) and "_aws" in blob:
                self.metrics.append(blob)
            elif isinstance(blob, dict):
                self.logs.append(blob)

    def metric(self, name: str) -> float:
        """Sum of a metric over every flush (0 when never emitted)."""
        total = 0.0
        for blob in self.metrics:
            namespaces = {m["Namespace"] for m in blob["_aws"]["CloudWatchMetrics"]}
            assert namespaces == {"WorkflowRunner"}
            if name in blob:
                value = blob[name]
                total += sum(value) if isinstance(value, list) else value
        return total

    def errors(self) -> list[str]:
        return [str(log.get("message")) for log in self.logs if log.get("level") == "ERROR"]
