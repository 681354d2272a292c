"""Kept code for `wfr local` (definition/hosts.py): the source of every module that defined
workflows, kept in the local database by content, so that a later command whose code
changed still runs the runs that started on the old code — what a kept Lambda version
does in AWS.

Each `wfr local` command keeps the current source of its workflow modules
(`local_kept_modules`, one row per module and content). When a waiting run's definition
is in neither the current code nor, by shape, a definition of it, the newest kept source
that made that definition is executed again beside the current code (into a registry of
its own, under its original module name) and serves the pass or task in this process.
Only the module file that called `define_workflow` is kept: what it imports comes from
the current code. A kept source whose definition no longer comes out with the run's
fingerprint (an import it relies on changed it) is not used.
"""

from __future__ import annotations

import hashlib
import linecache
import logging
import sys
import types
from datetime import datetime
from pathlib import Path

from ..definition import WorkflowRegistry
from ..definition.hosts import REGISTERED_HOSTS, DefinitionHosts, Kept, Role
from ..definition.registry import registering_into
from ..store import KeptModule, Store

log = logging.getLogger("workflow_runner.local")


class KeptModules:
    """DefinitionHosts of `wfr local`: definitions loaded again from the module sources
    earlier commands kept (each loaded at most once per process)."""

    def __init__(self) -> None:
        self._loaded: dict[tuple[str, str], Kept | None] = {}

    def remember(self, store: Store, registry: WorkflowRegistry, now: datetime) -> None:
        """Keep the source of every module that defined a workflow in `registry` (a row
        per module whose content is new)."""
        for module, definitions in registry.modules().items():
            source = _source_of(module)
            if source is None:
                continue
            sha = hashlib.sha256(source.encode()).hexdigest()
            made = sorted({(d.name, d.fingerprint) for d in definitions})
            store.local.keep_module(module, sha, source, made, now)

    def kept(self, store: Store, workflow_name: str, fingerprint: str, role: Role) -> Kept | None:
        key = (workflow_name, fingerprint)
        if key not in self._loaded:
            self._loaded[key] = self._load(store, workflow_name, fingerprint)
        return self._loaded[key]

    def _load(self, store: Store, workflow_name: str, fingerprint: str) -> Kept | None:
        for kept in store.local.kept_modules_with(workflow_name, fingerprint):
            try:
                registry = load_kept_module(kept)
            except Exception as error:  # the developer's old code: it may not run any more
                log.warning(
                    "a kept module source does not load",
                    extra={"module": kept.module, "detail": f"{type(error).__name__}: {error}"},
                )
                continue
            found = registry.find(workflow_name, fingerprint)
            if found is not None:
                label = f"{kept.module} as kept at {kept.kept_at:%Y-%m-%dT%H:%M:%SZ}"
                return Kept(label, found)
        return None


def _source_of(module: str) -> str | None:
    loaded = sys.modules.get(module)
    path = getattr(loaded, "__file__", None)
    if not path or not str(path).endswith(".py"):
        return None
    try:
        return Path(path).read_text()
    except OSError:
        return None


def load_kept_module(kept: KeptModule) -> WorkflowRegistry:
    """Execute a kept module source beside the current code and return what it defined.

    It runs as a module of its original name that is not put in `sys.modules` (so the
    current module stays what imports see), with its source in `linecache` under a name
    of its own, so that fingerprints, which hash the source of its functions, come out
    as they did when the source was current.
    """
    filename = f"<wfr kept {kept.module} {kept.source_sha[:12]}>"
    lines = kept.source.splitlines(keepends=True)
    linecache.cache[filename] = (len(kept.source), None, lines, filename)
    module = types.ModuleType(kept.module)
    module.__file__ = filename
    module.__package__ = kept.module.rpartition(".")[0]
    registry = WorkflowRegistry()
    code = compile(kept.source, filename, "exec", dont_inherit=True)
    with registering_into(registry):
        exec(code, module.__dict__)
    return registry


def kept_code_of(store: Store) -> DefinitionHosts:
    """Where definitions gone from the current code still run, for operators' tools: on
    a local database (one with a local clock) the module sources `wfr local` kept, on
    any other the function versions registered in it (AWS)."""
    return KeptModules() if store.local.clock() is not None else REGISTERED_HOSTS


def keep_local_code(store: Store, registry: WorkflowRegistry, now: datetime) -> KeptModules:
    """The kept code of a `wfr local` command: the current modules' sources kept first."""
    kept = KeptModules()
    kept.remember(store, registry, now)
    return kept
