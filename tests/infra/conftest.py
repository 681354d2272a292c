"""The template as CloudFormation receives it: SAM's own translator, run offline in the
aws-sam-cli environment (.venv-sam, whose pinned pydantic clashes with ours)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).with_name("sam_transform.py")

Transformed = dict[str, Any]


def sam_python() -> Path:
    return Path(os.environ.get("WFR_SAM_PYTHON") or ROOT / ".venv-sam" / "bin" / "python")


@cache
def _transform(overrides: tuple[tuple[str, str], ...], template: Path | None = None) -> Transformed:
    python = sam_python()
    if not python.exists():
        pytest.fail(
            f"{python} is missing: `make .venv-sam/.installed` (make test does it) or set "
            "WFR_SAM_PYTHON to a Python with aws-sam-cli installed"
        )
    template = template or ROOT / "template.yaml"
    done = subprocess.run(
        [str(python), str(SCRIPT), str(template), json.dumps(dict(overrides))],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode != 0:
        pytest.fail(f"SAM transform failed:\n{done.stderr[-4000:]}")
    result: Transformed = json.loads(done.stdout)
    return result


@pytest.fixture(scope="session")
def transform() -> Callable[..., Transformed]:
    """transform(**parameters) -> the transformed template (cached per parameter set)."""

    def run(**parameters: str) -> Transformed:
        return _transform(tuple(sorted(parameters.items())))

    return run


@pytest.fixture
def transform_edited(tmp_path: Path) -> Callable[[str, str], Transformed]:
    """transform_edited(old, new) -> template.yaml with `old` replaced by `new` (which
    must occur once), transformed with the default parameters: a later deploy."""

    def run(old: str, new: str) -> Transformed:
        text = (ROOT / "template.yaml").read_text()
        assert text.count(old) == 1, old
        text = text.replace(old, new)
        # One file per content: _transform caches by path.
        edited = tmp_path / f"template-{hashlib.sha256(text.encode()).hexdigest()[:12]}.yaml"
        edited.write_text(text)
        return _transform((), edited)

    return run


@pytest.fixture
def transform_rewritten(tmp_path: Path) -> Callable[[Callable[[str], str]], Transformed]:
    """transform_rewritten(edit) -> template.yaml's text passed through `edit`,
    transformed with the default parameters."""

    def run(edit: Callable[[str], str]) -> Transformed:
        text = edit((ROOT / "template.yaml").read_text())
        edited = tmp_path / f"template-{hashlib.sha256(text.encode()).hexdigest()[:12]}.yaml"
        edited.write_text(text)
        return _transform((), edited)

    return run


_CREATE_ONLY = """
import json, sys
from cfnlint.schema import PROVIDER_SCHEMA_MANAGER as schemas
found = {}
for kind in json.loads(sys.argv[1]):
    schema = schemas.get_resource_schema("eu-central-1", kind).schema
    found[kind] = schema.get("createOnlyProperties", [])
print(json.dumps(found))
"""


@cache
def _create_only_properties(kinds: tuple[str, ...]) -> dict[str, list[str]]:
    done = subprocess.run(
        [str(sam_python()), "-c", _CREATE_ONLY, json.dumps(list(kinds))],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode != 0:
        pytest.fail(f"reading the resource schemas failed:\n{done.stderr[-4000:]}")
    result: dict[str, list[str]] = json.loads(done.stdout)
    return result


@pytest.fixture(scope="session")
def create_only_properties() -> Callable[[set[str]], dict[str, set[str]]]:
    """create_only_properties(resource types) -> type -> its top-level properties whose
    change makes CloudFormation *replace* the resource ("Update requires: Replacement"),
    from the resource provider schemas cfn-lint ships in the aws-sam-cli environment."""

    def run(kinds: set[str]) -> dict[str, set[str]]:
        found = _create_only_properties(tuple(sorted(kinds)))
        return {
            kind: {path.split("/")[2] for path in paths if path.startswith("/properties/")}
            for kind, paths in found.items()
        }

    return run
