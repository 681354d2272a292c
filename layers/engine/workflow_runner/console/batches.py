"""How the console shows a batch result (a map's or parallel's under a completion
policy): how the step ended, its counts, and each failure with the child run it links
to or the task it names; the results themselves as JSON below."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .html import Markup, el, join
from .layout import json_value, run_link, table


def batch_view(batch: Mapping[str, Any], tenant_id: str) -> Markup:
    """A batch result: its completion and counts, its failures, then its results."""
    summary = el(
        "p",
        el("strong", str(batch.get("completion"))),
        f" · {batch.get('succeeded')} succeeded · {batch.get('failed')} failed",
        class_="batch-summary",
    )
    rows = [
        [
            str(failure.get("index")),
            str(failure.get("reason") or ""),
            run_link(str(failure["runId"]), tenant_id)
            if failure.get("runId")
            else el("code", str(failure.get("taskKey") or "")),
            str(failure.get("error") or ""),
        ]
        for failure in batch.get("failures") or []
        if isinstance(failure, Mapping)
    ]
    failures = table(
        ["Item", "Reason", "Child run or task", "Error"],
        rows,
        "No item failed.",
        class_="batch-failures",
    )
    return join([summary, failures, json_value(batch.get("results"))])
