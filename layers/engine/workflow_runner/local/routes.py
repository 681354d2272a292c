"""The EventBridge routing of template.yaml, for the local bus and `wfr doctor`.

Reads the template with the CloudFormation-aware loader and the EventPattern matcher
of `workflow_runner.aws` (PyYAML, a dev dependency), so that locally an event reaches
exactly the functions the deployed rules would send it to.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..definition import WorkflowRegistry
from ..engine.doctor import TemplateRoutes
from ..errors import InvalidInput
from .application import Application, ApplicationError, find_template, resolve_application

# Functions by the folder of their CodeUri (functions/<name>/): independent of how the
# template names their logical ids.
TRIGGER_PROJECTION = "trigger_projection"
EVENT_WAKEUP = "event_wakeup"
PENDING_PROJECTION = "pending_projection"
DUE_SCAN = "due_scan"
RESUME_RUN = "resume_run"
STEP_DISPATCHER = "step_dispatcher"

SYNTHETIC_TENANT = "00000000-0000-4000-8000-000000000000"


class RoutingError(InvalidInput):
    """The template is missing, unreadable or uses patterns the matcher cannot read."""


@dataclass
class Routing:
    """The template's EventBridge rules and which function folder each one targets."""

    template: Path  # as given: the project's template
    routes: list[Any]  # workflow_runner.aws.template.Route
    folders: dict[str, str] = field(default_factory=dict)  # logical id -> folder name
    application: Application | None = None  # what `template` names (None: built by hand)

    def targets(self, event: Mapping[str, Any]) -> list[str]:
        """Folders of the functions whose rules accept the event (template order, once)."""
        from ..aws.patterns import UnsupportedPattern

        found: list[str] = []
        for route in self.routes:
            try:
                accepted = route.accepts(event)
            except UnsupportedPattern as error:
                raise RoutingError(
                    f"{self.template}: rule {route.rule} of {route.function}: {error}"
                ) from error
            folder = self.folders.get(route.function, route.function)
            if accepted and folder not in found:
                found.append(folder)
        return found


def load_routes(path: Path) -> Routing:
    """Read the EventBridge rules of the application a template names (its own, or the
    engine application it nests, with the Parameters it passes: see local/application).

    Raises:
        RoutingError: the file is missing or not a readable SAM template.
        ApplicationError: the template names no engine application to run.
    """
    try:
        from ..aws.template import event_routes, functions, load_template
    except ImportError as error:  # PyYAML missing: part of the testing extra
        raise RoutingError(
            f"reading {path} needs PyYAML: pip install 'workflow-runner[testing]'"
        ) from error
    try:
        application = resolve_application(path)
        template = load_template(application.template)
        routes = event_routes(template, application.parameters)
    except ApplicationError:
        raise
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise RoutingError(f"cannot read the routes of {path}: {error}") from error
    except Exception as error:  # yaml.YAMLError has no common base we can import lazily
        raise RoutingError(f"cannot parse {path}: {error}") from error
    folders = {}
    for name, resource in functions(template).items():
        code_uri = str((resource.get("Properties") or {}).get("CodeUri") or name)
        folders[name] = Path(code_uri.rstrip("/")).name
    return Routing(path, routes, folders, application)


def synthetic_event(detail_type: str) -> dict[str, Any]:
    """An EventBridge event of a type, with the fields every pattern may look at."""
    return {
        "version": "0",
        "id": "wfr-doctor",
        "detail-type": detail_type,
        "source": "wfr.doctor",
        "account": "123456789012",
        "time": "2026-01-01T00:00:00Z",
        "region": "eu-central-1",
        "resources": [],
        "detail": {"tenantId": SYNTHETIC_TENANT},
    }


def unrouted_types(routing: Routing, registry: WorkflowRegistry) -> list[str]:
    """Trigger types that do not reach TriggerProjection and awaited types that do not
    reach EventWakeup. Rules are judged by detail-type: a `source` condition is left
    out, since which producers send a type is not the workflows' business."""
    from ..aws.patterns import matches

    def reaches(detail_type: str, folder: str) -> bool:
        event = synthetic_event(detail_type)
        for route in routing.routes:
            if routing.folders.get(route.function) != folder:
                continue
            pattern = {k: v for k, v in route.pattern.items() if k != "source"}
            if matches(pattern, event):
                return True
        return False

    missing = [
        f"trigger type {t!r} does not reach {TRIGGER_PROJECTION}"
        for t in sorted(registry.trigger_types() | registry.cancel_types())
        if not reaches(t, TRIGGER_PROJECTION)
    ]
    missing += [
        f"awaited type {t!r} does not reach {EVENT_WAKEUP}"
        for t in sorted(registry.awaited_types())
        if not reaches(t, EVENT_WAKEUP)
    ]
    return missing


def template_routes(path: Path | None, registry: WorkflowRegistry) -> TemplateRoutes:
    """What a SAM template routes, for `wfr doctor` (path None: as find_template finds
    it)."""
    template = path or find_template()
    if template is None:
        return TemplateRoutes(None)
    try:
        routing = load_routes(template)
    except (InvalidInput, ValueError) as error:
        return TemplateRoutes(template, error=str(error))
    described = routing.application.describe() if routing.application else str(template)
    return TemplateRoutes(template, unrouted_types(routing, registry), described=described)
