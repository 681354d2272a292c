import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
from workflow_runner import WorkflowDefinitionError

HERE = Path(__file__).parent


@pytest.fixture
def bad_module(tmp_path, monkeypatch):
    """my_flows.py with a timeout of "3 days" and a webhook URL without its scheme."""
    text = (HERE / "my_flows.py").read_text()
    bad = text.replace('timeout="P3D"', 'timeout="3 days"').replace(
        'url="https://hooks.example.com/fulfil"', 'url="hooks.example.com/fulfil"'
    )
    assert bad.count('"3 days"') == 1 and bad.count('"hooks.example.com/fulfil"') == 1
    (tmp_path / "bad_order_approval.py").write_text(bad)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_every_problem_is_reported_at_import(bad_module):
    with pytest.raises(WorkflowDefinitionError) as error:
        importlib.import_module("bad_order_approval")
    assert [p.argument for p in error.value.problems] == ["timeout", "url"]


def test_wfr_prints_them_all_and_exits_2(bad_module):
    wfr = Path(sys.executable).with_name("wfr")
    environ = {**os.environ, "WORKFLOW_MODULES": "bad_order_approval"}
    done = subprocess.run(
        [str(wfr), "graph", "order-approval"],
        cwd=bad_module,
        env=environ,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert done.stderr == (HERE / "bad_order_approval.txt").read_text()
