"""`wfr init DIR`: a project of its own, outside this repository. It writes the files,
refuses a folder that is not empty, and what it writes works: its tests pass against the
repository's engine in a pytest of their own, its template nests the engine with
parameters the engine takes and passes `sam validate --lint`."""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path

import pytest
from workflow_runner.aws.template import load_template
from workflow_runner.cli import main
from workflow_runner.local.application import export_application, installed_version

from tests.support import run_as_user

ROOT = Path(__file__).resolve().parents[2]
FILES = {
    ".gitignore",
    "Makefile",
    "README.md",
    "demo.py",
    "pytest.ini",
    "samconfig.toml",
    "template.yaml",
    "tests/test_shop_workflows.py",
    "workflows/shop_workflows.py",
    "workflows/requirements.txt",
}


def wfr(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err, environ={})
    return code, out.getvalue(), err.getvalue()


def files_in(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    code, _, err = wfr("init", str(tmp_path / "shop"))
    assert code == 0, err
    return tmp_path / "shop"


def test_init_writes_a_project_of_its_own(tmp_path: Path) -> None:
    code, out, _ = wfr("init", str(tmp_path / "shop"))
    assert code == 0
    assert files_in(tmp_path / "shop") == FILES
    assert f"wrote a workflow-runner project to {tmp_path / 'shop'}" in out
    assert f"cd {tmp_path / 'shop'}" in out and "make test WHEELS=" in out
    project = tmp_path / "shop"
    makefile = (project / "Makefile").read_text()
    assert f"ENGINE := workflow-runner[testing]=={installed_version()}" in makefile
    for target in ("test:", "demo:", "deploy:", "engine:"):
        assert f"\n{target}" in makefile, target
    assert "wfr export-app build/engine" in makefile and "$(SAM) build && $(SAM) deploy" in makefile
    assert len((project / "README.md").read_text().splitlines()) == 10
    assert 'stack_name = "shop-dev"' in (project / "samconfig.toml").read_text()
    assert 'modules=["shop_workflows"]' in (project / "tests/test_shop_workflows.py").read_text()
    assert "{{" not in "".join((project / f).read_text() for f in FILES)


def test_init_into_an_empty_folder_with_a_module_of_its_own(tmp_path: Path) -> None:
    (tmp_path / "2nd shop").mkdir()
    code, out, _ = wfr("init", str(tmp_path / "2nd shop"), "--module", "orders", "--json")
    assert code == 0
    answer = json.loads(out)
    assert (answer["module"], answer["project"]) == ("orders", str(tmp_path / "2nd shop"))
    assert files_in(tmp_path / "2nd shop") == {f.replace("shop_workflows", "orders") for f in FILES}
    text = (tmp_path / "2nd shop" / "samconfig.toml").read_text()
    assert 'stack_name = "wfr-2nd-shop-dev"' in text
    assert wfr("init", str(tmp_path / "3rd"))[0] == 0
    assert (tmp_path / "3rd" / "workflows" / "project_3rd_workflows.py").is_file()


@pytest.mark.parametrize("occupied", ["a file in it", "a file instead"])
def test_init_refuses_what_is_not_an_empty_folder_and_writes_nothing(
    tmp_path: Path, occupied: str
) -> None:
    target = tmp_path / "shop"
    if occupied == "a file in it":
        target.mkdir()
        (target / "notes.txt").write_text("mine")
    else:
        target.write_text("mine")
    before = files_in(tmp_path)
    code, out, err = wfr("init", str(target))
    assert (code, out) == (2, "")
    assert "is not an empty folder" in err and "nothing was written" in err
    assert files_in(tmp_path) == before


@pytest.mark.parametrize("module", ["json", "sample_workflows", "not-a-name", "class"])
def test_init_refuses_a_module_name_it_cannot_use_and_writes_nothing(
    tmp_path: Path, module: str
) -> None:
    code, _, err = wfr("init", str(tmp_path / "shop"), "--module", module)
    assert code == 2 and f"--module {module!r}" in err
    assert not (tmp_path / "shop").exists()


def test_the_template_nests_the_engine_with_parameters_the_engine_takes(shop: Path) -> None:
    project = load_template(shop / "template.yaml")
    engine = load_template(ROOT / "template.yaml")
    nested = project["Resources"]["Engine"]
    assert nested["Type"] == "AWS::Serverless::Application"
    assert nested["Metadata"] == {"WorkflowRunner": "engine"}
    assert nested["Properties"]["Location"] == "build/engine/template.yaml"
    passed = nested["Properties"]["Parameters"]
    assert set(passed) <= set(engine["Parameters"])
    assert passed["WorkflowLayerArn"] == {"Ref": "WorkflowsLayer"}
    assert passed["WorkflowModules"] == "shop_workflows"
    for name, spec in project["Parameters"].items():
        if name in engine["Parameters"]:  # passed through: the engine's own constraint
            assert spec.get("AllowedPattern") == engine["Parameters"][name].get("AllowedPattern")
            assert spec.get("AllowedValues") == engine["Parameters"][name].get("AllowedValues")
    for output in project["Outputs"].values():
        engine_output = output["Value"]["Fn::GetAtt"][1].removeprefix("Outputs.")
        assert engine_output in engine["Outputs"]
    layer = project["Resources"]["WorkflowsLayer"]
    assert layer["Properties"]["ContentUri"] == "workflows/"
    assert (shop / "workflows" / "shop_workflows.py").is_file()


def test_the_project_passes_its_own_tests_in_a_pytest_of_their_own(shop: Path) -> None:
    # What `make test` does, with the repository's engine: the export, then pytest.
    export_application(shop / "build" / "engine", source=ROOT)
    result = run_as_user([sys.executable, "-m", "pytest", "-p", "no:warnings"], shop)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 passed" in result.stdout
    ruff = str(Path(sys.executable).parent / "ruff")
    lint = run_as_user([ruff, "check", "--isolated", "--extend-exclude", "build", "."], shop)
    assert lint.returncode == 0, lint.stdout


def _sam() -> Path:
    python = Path(os.environ.get("WFR_SAM_PYTHON") or ROOT / ".venv-sam" / "bin" / "python")
    sam = python.parent / "sam"
    if not sam.exists():
        pytest.fail(f"{sam} is missing: `make .venv-sam/.installed` (make test does it)")
    return sam


def test_the_template_passes_sam_validate_lint(shop: Path) -> None:
    region = os.environ.get("AWS_DEFAULT_REGION", "eu-central-1")
    result = run_as_user(
        [str(_sam()), "validate", "--lint"],
        shop,
        timeout=300,
        SAM_CLI_TELEMETRY="0",
        AWS_DEFAULT_REGION=region,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "is a valid SAM Template" in result.stdout
