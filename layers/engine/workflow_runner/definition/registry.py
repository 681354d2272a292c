"""The workflow registry: definitions by name, version and fingerprint."""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

from ..errors import UnknownWorkflow, WorkflowDefinitionError
from ..retention import Retention, parse_retention
from ..suggest import did_you_mean, listing
from .branches import branch_definitions, is_branch_name
from .dsl import CronTrigger, EventTrigger, WorkflowDefinition

DEFAULT_WORKFLOW_MODULES = "sample_workflows"
_KEPT_EVENT_TYPES = 256  # triggered_by answers kept at most


class WorkflowRegistry:
    """Holds every registered version of every workflow.

    New runs start on the highest version of a name; a suspended run resumes on the
    definition whose fingerprint it recorded, as long as that one is still registered.
    Registering the same name and version again replaces it (a redeploy).
    """

    def __init__(self) -> None:
        self._by_name: dict[str, dict[int, WorkflowDefinition]] = {}
        self._by_module: dict[str, list[WorkflowDefinition]] = {}
        # latest_all and triggered_by, asked for every trigger event, kept with the
        # generation they were computed in: a register or unregister starts a new one
        # (one that lands while another thread computes leaves that result unused).
        self._generation = 0
        self._latest: tuple[int, list[WorkflowDefinition]] | None = None
        self._triggered: dict[str, tuple[int, list[WorkflowDefinition]]] = {}

    def _changed(self) -> None:
        self._generation += 1
        self._triggered = {}

    def register(self, definition: WorkflowDefinition, module: str | None = None) -> None:
        """Add or replace (same name and version) a definition; `module`: the module
        that defined it (`define_workflow` passes it, for `defined_in`). The internal
        workflows of its parallels' branches come along (definition/branches.py)."""
        self._by_name.setdefault(definition.name, {})[definition.version] = definition
        for branch in branch_definitions(definition):
            self._by_name.setdefault(branch.name, {})[branch.version] = branch
        if module:
            self._by_module.setdefault(module, []).append(definition)
        self._changed()

    def defined_in(self, module: str) -> list[WorkflowDefinition]:
        """Definitions registered by `module` or a module of the package `module`, in the
        order they were registered (what importing it contributed to this registry)."""
        return [
            definition
            for name, definitions in self._by_module.items()
            if name == module or name.startswith(f"{module}.")
            for definition in definitions
        ]

    def modules(self) -> dict[str, list[WorkflowDefinition]]:
        """Module -> the definitions it registered here (those `define_workflow` made)."""
        return {module: list(found) for module, found in self._by_module.items()}

    def unregister(self, name: str, version: int | None = None) -> None:
        """Remove one version of a workflow, or all of them."""
        if version is None:
            self._by_name.pop(name, None)
        else:
            self._by_name.get(name, {}).pop(version, None)
        self._changed()

    def latest(self, name: str) -> WorkflowDefinition:
        """Return the highest registered version of `name`.

        Raises:
            UnknownWorkflow: nothing of that name is registered.
        """
        versions = self._by_name.get(name)
        if not versions:
            raise UnknownWorkflow(unknown_workflow_message(name, self.names(), "registered"))
        return versions[max(versions)]

    def find(self, name: str, fingerprint: str) -> WorkflowDefinition | None:
        """Return the registered definition of `name` with this fingerprint, if any."""
        for definition in self._by_name.get(name, {}).values():
            if definition.fingerprint == fingerprint:
                return definition
        return None

    def names(self) -> list[str]:
        """The workflows' names (not the internal workflows of parallels' branches)."""
        return sorted(name for name in self._by_name if not is_branch_name(name))

    def all_names(self) -> set[str]:
        """Every registered name, the internal workflows of parallels' branches too."""
        return {name for name, versions in self._by_name.items() if versions}

    def version(self, name: str, version: int) -> WorkflowDefinition | None:
        """One version of a workflow (None: not registered)."""
        return self._by_name.get(name, {}).get(version)

    def __iter__(self) -> Iterator[WorkflowDefinition]:
        for versions in self._by_name.values():
            yield from versions.values()

    def latest_all(self) -> list[WorkflowDefinition]:
        """The highest version of every workflow, sorted by name."""
        generation, kept = self._latest or (-1, [])
        if generation != self._generation:
            generation = self._generation
            kept = [self.latest(name) for name in self.names()]
            self._latest = (generation, kept)
        return list(kept)

    def triggered_by(self, event_type: str) -> list[WorkflowDefinition]:
        """Workflows (latest versions) whose event trigger is `event_type`."""
        generation, found = self._triggered.get(event_type) or (-1, [])
        if generation != self._generation:
            generation = self._generation
            found = [
                wf
                for wf in self.latest_all()
                if isinstance(wf.trigger, EventTrigger) and wf.trigger.event_type == event_type
            ]
            if len(self._triggered) >= _KEPT_EVENT_TYPES:  # types no workflow knows
                self._triggered = {}
            self._triggered[event_type] = (generation, found)
        return list(found)

    def cron_workflows(self) -> list[WorkflowDefinition]:
        return [wf for wf in self.latest_all() if isinstance(wf.trigger, CronTrigger)]

    def trigger_types(self) -> set[str]:
        return {
            wf.trigger.event_type
            for wf in self.latest_all()
            if isinstance(wf.trigger, EventTrigger)
        }

    def retentions(self) -> dict[str, Retention]:
        """Workflow name -> its own retention (None: forever), for the workflows whose
        latest version sets one; the others keep the deployment's default."""
        return {
            wf.name: parse_retention(wf.retention)
            for wf in self.latest_all()
            if wf.retention is not None
        }

    def cancel_types(self) -> set[str]:
        """Every event type a workflow's cancel_on (latest versions) cancels runs on: the
        trigger intake must receive them."""
        return {
            cancel.event_type
            for wf in self.latest_all()
            if wf.flow is not None
            for cancel in wf.flow.cancel_on
        }

    def awaited_types(self) -> set[str]:
        """Every event type any registered version may wait for."""
        return {event_type for wf in self for event_type in wf.awaits.values()}


_DEFAULT = WorkflowRegistry()


def default_registry() -> WorkflowRegistry:
    """The process-wide registry that `define_workflow` fills."""
    return _DEFAULT


@contextmanager
def registering_into(registry: WorkflowRegistry) -> Iterator[None]:
    """`define_workflow` registers into `registry` inside the block instead of the
    process-wide registry (loading kept code beside the current code: local/kept.py)."""
    global _DEFAULT
    saved, _DEFAULT = _DEFAULT, registry
    try:
        yield
    finally:
        _DEFAULT = saved


def load_workflow_modules(
    environ: Mapping[str, str] | None = None, registry: WorkflowRegistry | None = None
) -> WorkflowRegistry:
    """Import the modules named in WORKFLOW_MODULES (comma separated); they register themselves.

    Raises:
        WorkflowDefinitionError: a module cannot be imported, or importing it raised
            (a definition error, or anything else its code raised); the message names it.
    """
    env = os.environ if environ is None else environ
    names = [n.strip() for n in env.get("WORKFLOW_MODULES", DEFAULT_WORKFLOW_MODULES).split(",")]
    for module in filter(None, names):
        try:
            importlib.import_module(module)
        except WorkflowDefinitionError:
            raise  # names the workflow and the place already
        except ImportError as error:
            raise WorkflowDefinitionError(
                f"WORKFLOW_MODULES names {module!r}, which cannot be imported: {error}"
            ) from error
        except Exception as error:
            raise WorkflowDefinitionError(
                f"importing {module!r} (WORKFLOW_MODULES) failed: {type(error).__name__}: {error}"
            ) from error
    return registry or default_registry()


def unknown_workflow_message(name: str, known: Sequence[str], where: str) -> str:
    """`no workflow named 'x' is <where>; did you mean 'y'? (known: ...)`."""
    return (
        f"no workflow named {name!r} is {where}{did_you_mean(name, known)} "
        f"(known: {listing(known)})"
    )
