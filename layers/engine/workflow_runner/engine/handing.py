"""Handing a resume to the kept function version that has its run's definition (the
third tier of engine/pinning.py in AWS): after a batch's transaction, every request
answered `on-kept-version` goes to that version, whose answer takes its place.

The version it goes to never hands it on: the request says it was handed on
(`forwarded_from`), and such a request has no kept tier. A version that is gone (deleted)
is forgotten and the request decided again: on an older version that kept the
definition, else the run fails loud, the detail naming the version that is gone.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Protocol

from ..definition import WorkflowRegistry
from ..definition.hosts import DefinitionHosts
from ..errors import ForwardFailed, HostGone
from ..store import Store
from .resume import ResumeRequestItem, ResumeResult, resume_runs

log = logging.getLogger("workflow_runner")


class ResumeForwarder(Protocol):
    """Hands a resume to the kept version of ResumeRun that has the run's definition and
    waits for its answer (aws/versions.py: a Lambda invoke).

    Raises:
        HostGone: that version no longer exists.
        ForwardFailed: it did not answer.
    """

    def resume(self, host: str, request: ResumeRequestItem) -> ResumeResult: ...


def forward_kept(
    store: Store,
    requests: Sequence[ResumeRequestItem],
    results: list[ResumeResult | Exception],
    now: datetime,
    registry: WorkflowRegistry,
    hosts: DefinitionHosts | None,
    forwarder: ResumeForwarder,
) -> None:
    """Hand every request answered `on-kept-version` to that kept version and put its
    answer in its place in `results` (outside any transaction: the other version runs
    the pass in its own).

    A version that no longer exists is forgotten (its registrations deleted) and the
    request decided again: on the next older version that kept the definition, else the
    run fails loud, the detail naming the version that is gone. A version that did not
    answer leaves a ForwardFailed in `results` (a queue message is then retried).
    """
    for i, (request, result) in enumerate(zip(requests, results, strict=True)):
        tried: set[str] = set()
        while isinstance(result, ResumeResult) and result.outcome == "on-kept-version":
            host = result.kept_on
            assert host is not None
            try:
                answer = forwarder.resume(host, request)
                if answer.outcome == "on-kept-version":  # it must not hand it on: a loop
                    raise ForwardFailed(f"the kept version {host} handed the run on")
                result = replace(answer, kept_on=host)
            except HostGone:
                log.warning("kept version is gone", extra={"run_id": request.run_id, "host": host})
                store.hosts.forget(host)
                tried.add(host)
                # Decided again: an older kept version, else (one found gone before
                # coming back) no kept tier at all, and the run fails loud.
                (result,) = resume_runs(store, [replace(request, gone=host)], now, registry, hosts)
                if isinstance(result, ResumeResult) and result.kept_on in tried:
                    (result,) = resume_runs(
                        store, [replace(request, gone=host)], now, registry, None
                    )
            except ForwardFailed as error:
                result = error
        results[i] = result
