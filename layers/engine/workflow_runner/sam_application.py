"""The SAM application's own files: what the wheel carries beside the engine package.

The repository's top level is the SAM application (template.yaml, functions/, the
layers' build files). The wheel copies them into `workflow_runner/_application/`, laid
out as in the repository, so an installed engine can run its functions locally (the
test kit, `wfr local`) and write a buildable copy for `sam build` (`wfr export-app`).
The layers' packages (workflow_runner itself, sample_workflows) are not copied twice:
an export takes them from the installed packages.

Standard library only: setup.py loads this file by path at build time, before any of
the engine's dependencies are installed.
"""

from __future__ import annotations

import shutil
from pathlib import Path

# The folder inside the installed workflow_runner package that holds the application.
PACKAGED_DIR = "_application"

# Relative to the application's root (the repository's top level, or PACKAGED_DIR).
FILES = (
    "template.yaml",
    "functions/*/*.py",
    "layers/engine/Makefile",
    "layers/engine/requirements.txt",
    "layers/samples/Makefile",
    "layers/samples/requirements.txt",
)

# The layers' build folders and the package each one's Makefile copies from it.
LAYER_PACKAGES = {
    "layers/engine": "workflow_runner",
    "layers/samples": "sample_workflows",
}


def application_files(root: Path) -> list[Path]:
    """The application's files under `root`, relative to it, sorted.

    Raises:
        FileNotFoundError: a pattern of FILES matches nothing under `root`.
    """
    found: set[Path] = set()
    for pattern in FILES:
        matched = [p for p in root.glob(pattern) if p.is_file()]
        if not matched:
            raise FileNotFoundError(f"{root}: no {pattern} (not a workflow-runner application)")
        found.update(p.relative_to(root) for p in matched)
    return sorted(found)


def copy_application(root: Path, target: Path) -> list[Path]:
    """Copy the application's files from `root` to `target` (same layout); return the
    relative paths copied.

    Raises:
        FileNotFoundError: `root` lacks one of FILES.
    """
    files = application_files(root)
    for relative in files:
        destination = target / relative
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(root / relative, destination)
    return files
