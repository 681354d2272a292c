"""The README's examples run as written: its workflow module and its pytest file pass in a
pytest of their own (with the kit's own embedded server, as a user's tests would start
it), and the refund example defines a workflow."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"
BLOCK = re.compile(r"```python\n# (?P<name>[\w.]+\.py)\n(?P<body>.*?)```", re.DOTALL)

REFUND_CHECK = """
from workflow_runner.definition import default_registry


def test_the_refund_example_defines_a_concise_workflow():
    import refund

    definition = default_registry().latest("refund")
    assert definition is refund.refund and len(definition.fingerprint) == 64
    kinds = [step.kind for step in definition.steps]
    assert kinds == ["mail.send", "wait_for_event", "branch"]
    assert [s.kind for s in definition.steps[2].on_true] == ["task", "return"]
    assert definition.steps[2].on_true[0].retry.max_attempts == 5
"""

PAYMENTS = """
def refund(payment_id, idempotency_key):
    raise AssertionError("the definition test never runs the task")
"""


def _blocks() -> dict[str, str]:
    return {m["name"]: m["body"] for m in BLOCK.finditer(README.read_text())}


def test_the_readme_names_its_example_files() -> None:
    assert {"my_flows.py", "test_my_flows.py", "refund.py"} <= set(_blocks())


def test_the_readme_examples_pass_in_a_pytest_of_their_own(tmp_path: Path) -> None:
    blocks = _blocks()
    for name in ("my_flows.py", "test_my_flows.py", "refund.py"):
        (tmp_path / name).write_text(blocks[name])
    (tmp_path / "test_refund.py").write_text(REFUND_CHECK)
    (tmp_path / "my_app").mkdir()
    (tmp_path / "my_app" / "__init__.py").write_text("")
    (tmp_path / "my_app" / "payments.py").write_text(PAYMENTS)
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "WORKFLOW_MODULES")}
    env["PYTHONPATH"] = str(tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:warnings"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "4 passed" in result.stdout
