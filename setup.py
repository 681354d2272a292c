"""Build hook: the wheel carries the SAM application (template.yaml, functions/, the
layers' build files) as package data under workflow_runner/_application/, copied from
the repository's top level when the package is built (the list is FILES in
workflow_runner/sam_application.py). The metadata is in pyproject.toml.

Editable installs skip the copy: a source checkout has no packaged application, and the
engine never reaches for the checkout's files instead (see workflow_runner/local/
application.py).
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path
from types import ModuleType

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent


def _sam_application() -> ModuleType:
    # By path: importing the workflow_runner package would need its dependencies.
    path = ROOT / "layers" / "engine" / "workflow_runner" / "sam_application.py"
    spec = importlib.util.spec_from_file_location("_wfr_sam_application", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def package_application(build_lib: Path) -> list[Path]:
    """Copy the SAM application into the built workflow_runner package; return the
    files copied (relative to the application's folder)."""
    application = _sam_application()
    target = build_lib / "workflow_runner" / application.PACKAGED_DIR
    shutil.rmtree(target, ignore_errors=True)
    copied: list[Path] = application.copy_application(ROOT, target)
    return copied


class BuildPyWithApplication(build_py):
    """build_py, then the SAM application copied into the built package."""

    def run(self) -> None:
        super().run()
        if not self.editable_mode:
            package_application(Path(self.build_lib))


if __name__ == "__main__":  # setuptools runs this file as __main__; tests import it
    setup(cmdclass={"build_py": BuildPyWithApplication})
