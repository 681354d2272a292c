"""Kept code: where a waiting run's own definition still runs after a deploy took it out
of the current code — the third tier of engine/pinning.py, after exact and shape.

In AWS every deploy publishes a version of each function (the template's
AutoPublishAlias) and older versions stay until pruned. ResumeRun and StepDispatcher
register the definitions their code has under their own qualified function ARN when a
container starts (`workflow_definition_hosts`, `register_hosts`); a run whose definition
the current code lacks, and whose shape no longer agrees, is handed to the newest
version that registered it (engine/handing.py and the task worker, through the
runtime's FunctionInvoker: the Lambda API in aws/versions.py). Locally and in the test
kit the earlier definitions stay loaded in the process (`ArchivedDefinitions`; `wfr
local` loads them again from the sources it kept, local/kept.py) and serve the pass or
task right there, without handing anything on.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol

from ..store import Store
from .dsl import WorkflowDefinition

# The functions that run a workflow's user code for a run: its passes (ResumeRun) and its
# tasks (StepDispatcher). Stored in workflow_definition_hosts.function_role.
Role = Literal["resume-run", "step-dispatcher"]
RESUME_RUN: Role = "resume-run"
STEP_DISPATCHER: Role = "step-dispatcher"


@dataclass(frozen=True)
class Kept:
    """Where a definition gone from the current code still runs.

    `host` names it: a qualified function ARN (`...:function:name:7`), or the label of a
    local archive. `definition` is the definition itself when it is loaded in this
    process (the local archive: it serves the work here); None when the work must be
    handed to `host`.
    """

    host: str
    definition: WorkflowDefinition | None = None


class DefinitionHosts(Protocol):
    """Which kept code has a definition the current code lacks."""

    def kept(self, store: Store, workflow_name: str, fingerprint: str, role: Role) -> Kept | None:
        """Where the definition (`workflow_name`, `fingerprint`) still runs for `role`
        (None: nowhere)."""
        ...


class RegisteredHosts:
    """DefinitionHosts from `workflow_definition_hosts`: the newest function version of
    the role that registered the definition (what AWS keeps)."""

    def kept(self, store: Store, workflow_name: str, fingerprint: str, role: Role) -> Kept | None:
        hosts = store.hosts.hosts_of(workflow_name, fingerprint, role)
        return Kept(hosts[0]) if hosts else None


REGISTERED_HOSTS = RegisteredHosts()


class ArchivedDefinitions:
    """DefinitionHosts of one process: the definitions an environment had before it was
    redeployed (the test kit), each under the label of the code it came with."""

    def __init__(self) -> None:
        self._kept: dict[tuple[str, str], Kept] = {}

    def keep(self, definitions: Iterable[WorkflowDefinition], label: str) -> None:
        """Keep `definitions` loaded, labelled `label`; one kept before stays as it was."""
        for definition in definitions:
            self._kept.setdefault(
                (definition.name, definition.fingerprint), Kept(label, definition)
            )

    def clear(self) -> None:
        """Nothing is kept any more (every earlier version is gone)."""
        self._kept.clear()

    def kept(self, store: Store, workflow_name: str, fingerprint: str, role: Role) -> Kept | None:
        return self._kept.get((workflow_name, fingerprint))


def register_hosts(
    store: Store, definitions: Iterable[WorkflowDefinition], role: Role, arn: str, now: datetime
) -> None:
    """Record that function version `arn` (of `role`) has `definitions` (one statement;
    once per container)."""
    store.hosts.register(((d.name, d.fingerprint) for d in definitions), role, arn, now)
