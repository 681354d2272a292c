"""The wheel carries the SAM application (template.yaml, functions/, the layers' build
files) as package data, copied from the repository by setup.py's build hook; the CI step
`make package-check` builds the real wheel and checks it with check_wheel.py."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from workflow_runner.aws.template import functions, load_template
from workflow_runner.sam_application import LAYER_PACKAGES, PACKAGED_DIR, application_files

ROOT = Path(__file__).resolve().parents[2]


def _load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return load_template(ROOT / "template.yaml")


def test_the_packaged_files_are_everything_the_template_builds_from(
    template: dict[str, Any],
) -> None:
    files = {str(p) for p in application_files(ROOT)}
    for name, resource in functions(template).items():
        code_uri = resource["Properties"]["CodeUri"].rstrip("/")
        handler_module = resource["Properties"]["Handler"].split(".")[0]
        assert f"{code_uri}/{handler_module}.py" in files, name
    layers = {
        name: r["Properties"]["ContentUri"]
        for name, r in template["Resources"].items()
        if r["Type"] == "AWS::Serverless::LayerVersion"
    }
    assert set(layers.values()) == set(LAYER_PACKAGES)
    for content_uri, package in LAYER_PACKAGES.items():
        assert {f"{content_uri}/Makefile", f"{content_uri}/requirements.txt"} <= files
        assert f"cp -R {package} " in (ROOT / content_uri / "Makefile").read_text()
    assert "template.yaml" in files


def test_the_build_hook_copies_the_repositorys_files_byte_for_byte(tmp_path: Path) -> None:
    setup = _load(ROOT / "setup.py", "_wfr_setup")
    (tmp_path / "workflow_runner" / PACKAGED_DIR / "stale.txt").parent.mkdir(parents=True)
    (tmp_path / "workflow_runner" / PACKAGED_DIR / "stale.txt").write_text("old build")
    copied = setup.package_application(tmp_path)
    packaged = tmp_path / "workflow_runner" / PACKAGED_DIR
    assert sorted(p.relative_to(packaged) for p in packaged.rglob("*") if p.is_file()) == copied
    assert copied == application_files(ROOT)
    for relative in copied:
        assert (packaged / relative).read_bytes() == (ROOT / relative).read_bytes(), relative


def test_the_wheel_check_refuses_a_wheel_whose_application_differs(tmp_path: Path) -> None:
    import zipfile

    check = _load(ROOT / "tests/infra/check_wheel.py", "_wfr_check_wheel")
    good, bad = tmp_path / "good.whl", tmp_path / "bad.whl"
    for wheel, changed in ((good, None), (bad, "functions/migrate/app.py")):
        with zipfile.ZipFile(wheel, "w") as archive:
            for relative in application_files(ROOT):
                data = (ROOT / relative).read_bytes()
                data = b"# edited\n" + data if str(relative) == changed else data
                archive.writestr(f"workflow_runner/{PACKAGED_DIR}/{relative}", data)
            for needed in check.ALSO_NEEDED:
                archive.writestr(needed, b"")
    assert check.problems(good) == []
    assert check.problems(bad) == [
        f"workflow_runner/{PACKAGED_DIR}/functions/migrate/app.py differs"
    ]
