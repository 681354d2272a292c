"""The site's code samples run as written. Every sample is a file under docs/examples/,
pulled into a page with pymdownx.snippets, so the page shows exactly what runs here:
each workflow module has a test file beside it, and the folder, copied as a project of
its own, passes in a pytest of its own with the kit's embedded server, as a user's tests
would start it."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

from workflow_runner.sam_application import copy_application

from tests.support import run_as_user

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "docs" / "examples"
# Stand-ins for the reader's own code (a payment client), not samples of their own.
SUPPORT = {"my_app"}


def _modules() -> list[Path]:
    return sorted(
        path
        for path in EXAMPLES.rglob("*.py")
        if not path.name.startswith(("test_", "__"))
        and "__pycache__" not in path.parts
        and path.relative_to(EXAMPLES).parts[0] not in SUPPORT
    )


def _tests() -> list[Path]:
    return sorted(p for p in EXAMPLES.rglob("test_*.py") if "__pycache__" not in p.parts)


def test_every_example_module_has_a_test_file() -> None:
    tests = {p.name for p in _tests()}
    missing = [str(m.relative_to(EXAMPLES)) for m in _modules() if f"test_{m.name}" not in tests]
    assert _modules() and missing == []


def test_the_examples_pass_in_a_pytest_of_their_own(tmp_path: Path) -> None:
    project = tmp_path / "project"
    shutil.copytree(EXAMPLES, project, ignore=shutil.ignore_patterns("__pycache__"))
    # The SAM application (template.yaml and functions/) in the folder the tests run
    # from, as in a project of the reader's own; an engine installed from its wheel
    # would bring its own. Nothing falls back to this checkout.
    copy_application(ROOT, project)
    result = run_as_user(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:warnings"],
        project,
        timeout=900,
        PYTHONPATH=str(project),
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    declared = sum(
        len(re.findall(r"^def test_", p.read_text(), flags=re.MULTILINE)) for p in _tests()
    )
    assert f"{declared} passed" in result.stdout, result.stdout[-2000:]
