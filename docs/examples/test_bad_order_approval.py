import os
import subprocess
import sys
from pathlib import Path

import pytest
from workflow_runner import WorkflowDefinitionError

HERE = Path(__file__).parent


def test_every_problem_is_reported_at_import():
    with pytest.raises(WorkflowDefinitionError) as error:
        import bad_order_approval  # noqa: F401
    assert [p.argument for p in error.value.problems] == ["timeout", "url"]


def test_wfr_prints_them_all_and_exits_2():
    wfr = Path(sys.executable).with_name("wfr")
    environ = {**os.environ, "WORKFLOW_MODULES": "bad_order_approval"}
    done = subprocess.run(
        [str(wfr), "graph", "order-approval"], cwd=HERE, env=environ, capture_output=True, text=True
    )
    assert done.returncode == 2
    assert done.stderr == (HERE / "bad_order_approval.txt").read_text()
