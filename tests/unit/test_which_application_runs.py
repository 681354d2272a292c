"""Which SAM application the test kit, `wfr local` and `wfr doctor` run: the project's
template.yaml (its own functions, or the engine application it nests, with the
Parameters it passes), else the application packaged in the installed engine, and never
the engine repository's checkout found by walking up from the installed package."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import sample_workflows  # noqa: F401  (registers the samples in the default registry)
from workflow_runner.cli import main
from workflow_runner.definition import default_registry
from workflow_runner.errors import NotConfigured
from workflow_runner.local import application
from workflow_runner.local import routes as r
from workflow_runner.local.application import (
    ApplicationError,
    export_application,
    find_template,
    installed_version,
    resolve_application,
)
from workflow_runner.sam_application import copy_application
from workflow_runner.testing import WorkflowTestEnv

ROOT = Path(__file__).resolve().parents[2]

PROJECT = """\
AWSTemplateFormatVersion: "2010-09-09"
Transform: AWS::Serverless-2016-10-31
Parameters:
  Stage:
    Type: String
    Default: dev
  Triggers:
    Type: CommaDelimitedList
    Default: order.placed,order.paid
Resources:
  WorkflowsLayer:
    Type: AWS::Serverless::LayerVersion
    Properties:
      ContentUri: workflows/
  Engine:
    Type: AWS::Serverless::Application
    Metadata:
      WorkflowRunner: engine
    Properties:
      Location: engine/template.yaml
      Parameters:
        Stage: !Ref Stage
        WorkflowLayerArn: !Ref WorkflowsLayer
        TriggerDetailTypes: !Ref Triggers
        AwaitedDetailTypes: order.approved
"""


@pytest.fixture
def no_packaged_application(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """An engine installed from a source checkout: nothing packaged."""
    monkeypatch.setattr(application, "PACKAGED_TEMPLATE", tmp_path / "absent" / "template.yaml")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project whose template.yaml nests the engine application exported to engine/."""
    folder = tmp_path / "shop"
    folder.mkdir()
    (folder / "template.yaml").write_text(PROJECT)
    copy_application(ROOT, folder / "engine")
    return folder / "template.yaml"


def test_the_projects_template_is_in_the_folder_or_the_nearest_parent(tmp_path: Path) -> None:
    (tmp_path / "a" / "b" / "c").mkdir(parents=True)
    (tmp_path / "template.yaml").write_text("{}")
    (tmp_path / "a" / "template.yaml").write_text("{}")
    assert find_template(tmp_path / "a" / "b" / "c") == tmp_path / "a" / "template.yaml"
    assert find_template(tmp_path) == tmp_path / "template.yaml"


def test_outside_any_project_it_is_the_installed_engines_packaged_application(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    packaged = tmp_path / "site-packages" / "workflow_runner" / "_application" / "template.yaml"
    packaged.parent.mkdir(parents=True)
    packaged.write_text("{}")
    monkeypatch.setattr(application, "PACKAGED_TEMPLATE", packaged)
    (tmp_path / "elsewhere").mkdir()
    assert find_template(tmp_path / "elsewhere") == packaged


def test_wfr_local_says_when_it_runs_the_engines_packaged_application(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    packaged = tmp_path / "site-packages" / "workflow_runner" / "_application"
    copy_application(ROOT, packaged)
    monkeypatch.setattr(application, "PACKAGED_TEMPLATE", packaged / "template.yaml")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    (tmp_path / "elsewhere" / "events.json").write_text("[]")
    err = io.StringIO()
    main(["local", "put-events", "events.json"], out=io.StringIO(), err=err, environ={})
    assert err.getvalue().startswith(
        "wfr: note: no template.yaml here or above: the application packaged with the engine "
        f"({packaged / 'template.yaml'})"
    )


@pytest.mark.usefixtures("no_packaged_application")
def test_outside_any_project_a_source_install_finds_nothing_not_its_checkout(
    tmp_path: Path,
) -> None:
    assert find_template(tmp_path) is None


@pytest.mark.usefixtures("no_packaged_application")
def test_the_kit_outside_any_project_says_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(NotConfigured, match=r"no template\.yaml in .*`wfr init DIR` starts one"):
        WorkflowTestEnv(modules=["sample_workflows"])


@pytest.mark.usefixtures("no_packaged_application")
def test_wfr_local_outside_any_project_exits_2_and_says_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "events.json").write_text("[]")
    out, err = io.StringIO(), io.StringIO()
    code = main(["local", "put-events", "events.json"], out=out, err=err, environ={})
    assert code == 2
    assert "no template.yaml in" in err.getvalue() and "wfr init DIR" in err.getvalue()


def test_a_template_with_the_engines_functions_runs_them(tmp_path: Path) -> None:
    found = resolve_application(ROOT / "template.yaml")
    assert (found.template, found.project, found.parameters) == (
        ROOT / "template.yaml",
        ROOT / "template.yaml",
        {},
    )
    assert found.describe() == str(ROOT / "template.yaml")


def test_a_project_that_nests_the_engine_runs_its_export_with_the_parameters_it_passes(
    project: Path,
) -> None:
    found = resolve_application(project)
    assert found.template == project.parent / "engine" / "template.yaml"
    assert found.parameters == {
        "Stage": "dev",
        "WorkflowLayerArn": "WorkflowsLayer",
        "TriggerDetailTypes": "order.placed,order.paid",
        "AwaitedDetailTypes": "order.approved",
    }
    routing = r.load_routes(project)
    assert routing.targets(r.synthetic_event("order.paid")) == [r.TRIGGER_PROJECTION]
    assert routing.targets(r.synthetic_event("order.approved")) == [r.EVENT_WAKEUP]
    # The engine's defaults would route every type; the project's parameters do not.
    assert routing.targets(r.synthetic_event("user.signed-up")) == []


def test_wfr_doctor_names_the_nested_application_and_the_types_it_does_not_route(
    project: Path,
) -> None:
    routes = r.template_routes(project, default_registry())
    assert routes.error is None
    assert routes.described == (
        f"{project} (the engine application it nests: {project.parent / 'engine/template.yaml'})"
    )
    assert "trigger type 'user.signed-up' does not reach trigger_projection" in routes.missing
    assert not [m for m in routes.missing if "'order.placed'" in m or "'order.approved'" in m]


def test_a_nested_engine_not_exported_yet_says_how_to_export_it(project: Path) -> None:
    (project.parent / "engine" / "template.yaml").unlink()
    with pytest.raises(ApplicationError, match=r"run `wfr export-app engine` in .*shop"):
        resolve_application(project)
    assert "wfr export-app engine" in str(r.template_routes(project, default_registry()).error)


def test_an_export_from_another_engine_version_must_be_exported_again(project: Path) -> None:
    stamp = project.parent / "engine" / application.EXPORT_STAMP
    stamp.write_text(json.dumps({"version": "0.0.1"}))
    with pytest.raises(ApplicationError, match=r"exported from workflow-runner 0\.0\.1, but"):
        resolve_application(project)
    stamp.write_text(json.dumps({"version": installed_version()}))
    assert resolve_application(project).template.parent == project.parent / "engine"


def test_a_template_that_neither_defines_nor_nests_the_engine_is_refused(tmp_path: Path) -> None:
    lonely = tmp_path / "template.yaml"
    lonely.write_text(PROJECT.replace("WorkflowRunner: engine", "Owner: someone"))
    with pytest.raises(ApplicationError, match="nests no engine application"):
        resolve_application(lonely)
    lonely.write_text(PROJECT.replace("Location: engine/template.yaml", "Location: {a: b}"))
    with pytest.raises(ApplicationError, match="must be a local path"):
        resolve_application(lonely)


def test_export_writes_the_application_and_the_layers_packages(tmp_path: Path) -> None:
    target = tmp_path / "engine"
    written = export_application(target, source=ROOT)
    for relative in ("template.yaml", "functions/resume_run/app.py", "layers/engine/Makefile"):
        assert (target / relative).read_bytes() == (ROOT / relative).read_bytes()
    package = target / "layers/engine/workflow_runner"
    assert (package / "store/schema.sql").is_file()
    assert (target / "layers/samples/sample_workflows/__init__.py").is_file()
    assert not list(target.rglob("__pycache__")) and not (package / "_application").exists()
    assert json.loads((target / application.EXPORT_STAMP).read_text()) == {
        "version": installed_version()
    }
    assert sorted(written) == sorted(
        p.relative_to(target) for p in target.rglob("*") if p.is_file()
    )


def test_export_replaces_an_earlier_export_and_nothing_else(tmp_path: Path) -> None:
    target = tmp_path / "engine"
    export_application(target, source=ROOT)
    (target / "stale.txt").write_text("from an older engine")
    export_application(target, source=ROOT)
    assert not (target / "stale.txt").exists()
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    with pytest.raises(ApplicationError, match="not empty and not an earlier export"):
        export_application(mine, source=ROOT)
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]


@pytest.mark.usefixtures("no_packaged_application")
def test_wfr_export_app_from_a_source_install_says_to_install_the_wheel(tmp_path: Path) -> None:
    err = io.StringIO()
    code = main(["export-app", str(tmp_path / "engine")], out=io.StringIO(), err=err, environ={})
    assert code == 2
    assert "carries no SAM application" in err.getvalue() and "wheel" in err.getvalue()
    assert not (tmp_path / "engine").exists()
