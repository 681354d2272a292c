"""Which SAM application the local runtime, the test kit and `wfr doctor` run.

The rule, in this order:

1. The project's template.yaml: the one in the current folder, or in the nearest parent
   folder that has one.
   - When it defines the engine's functions (this repository's template does), those.
   - When it nests the engine's application (an `AWS::Serverless::Application` whose
     Metadata says `WorkflowRunner: engine`, as `wfr init` writes it), the application
     at that resource's Location, with the Parameters the resource passes it. The
     Location is the copy `wfr export-app` writes from the installed engine, the very
     one `sam build` deploys.
2. Without one: the application packaged in the installed engine (the wheel carries
   template.yaml and functions/ in workflow_runner/_application/).

Nothing else: a source checkout of the engine (an editable install) has no packaged
application, and the engine never walks up from its own files to find one.
"""

from __future__ import annotations

import importlib
import json
import shutil
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from .. import sam_application
from ..errors import InvalidInput

PACKAGE = Path(__file__).resolve().parents[1]
PACKAGED_TEMPLATE = PACKAGE / sam_application.PACKAGED_DIR / "template.yaml"
NESTING_MARKER = ("WorkflowRunner", "engine")
# Written by `wfr export-app` beside the exported template: which engine it came from.
EXPORT_STAMP = ".wfr-export.json"


class ApplicationError(InvalidInput):
    """No SAM application to run, or a project template that names none usable."""


def packaged_template() -> Path | None:
    """template.yaml of the application packaged in the installed engine; None for an
    engine installed from a source checkout (nothing is packaged there)."""
    return PACKAGED_TEMPLATE if PACKAGED_TEMPLATE.is_file() else None


def find_template(start: Path | None = None) -> Path | None:
    """The project's template.yaml (in `start`, default the current folder, or the
    nearest parent that has one), else the installed engine's packaged application's;
    None when there is neither (see `no_template_message`)."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / "template.yaml"
        if candidate.is_file():
            return candidate
    return packaged_template()


def no_template_message(start: Path | None = None) -> str:
    """What to do when `find_template` found nothing."""
    here = (start or Path.cwd()).resolve()
    return (
        f"no template.yaml in {here} or a parent folder, and the installed workflow-runner "
        "carries no SAM application (an editable install of its repository): run from "
        "your project's folder (`wfr init DIR` starts one), pass the template, or install "
        "the engine from its wheel"
    )


def installed_version() -> str:
    """The installed workflow-runner's version."""
    return metadata.version("workflow-runner")


@dataclass(frozen=True)
class Application:
    """The application to run: the template that defines the engine's functions (with
    functions/ beside it), the values of its Parameters, and the template it was named
    by (the project's; the same file unless the project nests the engine)."""

    template: Path
    project: Path
    parameters: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        """The project's template, and the engine application it nests if it does."""
        if self.project == self.template:
            return str(self.template)
        return f"{self.project} (the engine application it nests: {self.template})"


def resolve_application(path: Path) -> Application:
    """The application a template names: its own functions, or the engine application
    it nests.

    Raises:
        ApplicationError: the template defines no engine functions and nests no engine
            application, or the nested one is missing, not a local path, or was
            exported from another engine version.
    """
    from ..aws.template import Resolver, functions, load_template

    try:
        template = load_template(path)
    except (OSError, ValueError) as error:
        raise ApplicationError(f"cannot read {path}: {error}") from error
    if functions(template):
        return Application(path, path)
    nested = [
        (name, resource)
        for name, resource in (template.get("Resources") or {}).items()
        if resource.get("Type") == "AWS::Serverless::Application"
        and (resource.get("Metadata") or {}).get(NESTING_MARKER[0]) == NESTING_MARKER[1]
    ]
    if len(nested) != 1:
        found = "several" if nested else "no"
        raise ApplicationError(
            f"{path} defines no Lambda functions and nests {found} engine application "
            f"(one AWS::Serverless::Application with Metadata {NESTING_MARKER[0]}: "
            f"{NESTING_MARKER[1]}; `wfr init DIR` writes such a template)"
        )
    name, resource = nested[0]
    properties = resource.get("Properties") or {}
    location = properties.get("Location")
    if not isinstance(location, str):
        raise ApplicationError(
            f"{path}: {name}'s Location must be a local path to the exported engine "
            "application (`wfr export-app DIR`), not a Serverless Application Repository id"
        )
    engine = (path.parent / location).resolve()
    command = f"wfr export-app {Path(location).parent}"
    if not engine.is_file():
        raise ApplicationError(
            f"{path} nests the engine application at {location}, which does not exist: "
            f"run `{command}` in {path.parent} (the project's `make` targets do)"
        )
    _check_export_version(engine, command)
    given = Resolver(template).resolve(properties.get("Parameters") or {})
    # A nested stack's parameters are strings: a list (a CommaDelimitedList) joined.
    parameters = {k: ",".join(v) if isinstance(v, list) else v for k, v in given.items()}
    return Application(engine, path, parameters)


def _check_export_version(engine: Path, command: str) -> None:
    stamp = engine.parent / EXPORT_STAMP
    if not stamp.is_file():
        return  # a copy made by hand: taken as it is
    exported = json.loads(stamp.read_text()).get("version")
    if exported != installed_version():
        raise ApplicationError(
            f"{engine} was exported from workflow-runner {exported}, but "
            f"{installed_version()} is installed: run `{command}` again"
        )


def export_application(target: Path, source: Path | None = None) -> list[Path]:
    """Write a buildable copy of the engine's SAM application into `target`: the
    application's files from `source` (default: the installed engine's packaged copy)
    and the layers' packages from the installed engine, with a stamp of its version.
    `target` must be empty, missing, or an earlier export (which is replaced).

    Returns:
        The files written, relative to `target`.

    Raises:
        ApplicationError: nothing packaged to export, or `target` holds other files.
    """
    if source is None:
        packaged = packaged_template()
        if packaged is None:
            raise ApplicationError(
                "the installed workflow-runner carries no SAM application (an editable "
                "install of its repository): install the engine from its wheel"
            )
        source = packaged.parent
    if target.exists():
        if not target.is_dir():
            raise ApplicationError(f"{target} is not a folder")
        if any(target.iterdir()) and not (target / EXPORT_STAMP).is_file():
            raise ApplicationError(
                f"{target} is not empty and not an earlier export: choose another folder"
            )
        shutil.rmtree(target)
    written = sam_application.copy_application(source, target)
    skip = shutil.ignore_patterns("__pycache__", "*.pyc", sam_application.PACKAGED_DIR)
    for folder, package in sam_application.LAYER_PACKAGES.items():
        origin = Path(importlib.import_module(package).__file__ or "").parent
        copied = target / folder / package
        shutil.copytree(origin, copied, ignore=skip)
        written.extend(p.relative_to(target) for p in sorted(copied.rglob("*")) if p.is_file())
    (target / EXPORT_STAMP).write_text(json.dumps({"version": installed_version()}) + "\n")
    return [*written, Path(EXPORT_STAMP)]
