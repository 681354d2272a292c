"""The cold-start bench builds and imports the layers with the Python the template deploys."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench.cold_start import deployed_python


def _template(tmp_path: Path, runtime: str) -> Path:
    template = tmp_path / "template.yaml"
    template.write_text(
        f"Globals:\n  Function:\n    Runtime: {runtime}\n    Architectures: [arm64]\n"
        "Resources: {}\n"
    )
    return template


def test_the_version_is_the_templates_runtime(tmp_path: Path) -> None:
    assert deployed_python(_template(tmp_path, "python3.13")) == "3.13"
    assert deployed_python(_template(tmp_path, "python3.12")) == "3.12"
    assert re.fullmatch(r"3\.\d+", deployed_python())  # the project's own template


def test_a_runtime_that_is_not_python_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match=re.escape("'nodejs22.x', not python3.x")):
        deployed_python(_template(tmp_path, "nodejs22.x"))
