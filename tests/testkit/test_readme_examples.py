"""The README's examples run as written: its workflow modules and its pytest files pass in
a pytest of their own, with the kit's own embedded server, as a user's tests would start
it."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from workflow_runner.sam_application import copy_application

from tests.support import run_as_user

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
FILES = ("my_flows.py", "test_my_flows.py", "refund.py", "test_refund.py")
BLOCK = re.compile(r"```python\n# (?P<name>[\w.]+\.py)\n(?P<body>.*?)```", re.DOTALL)

# The README's refund.py imports the user's payment client; its test stubs the task.
PAYMENTS = """
def refund(payment_id, idempotency_key):
    raise AssertionError("the README's test stubs the refund task")
"""


def _blocks() -> dict[str, str]:
    return {m["name"]: m["body"] for m in BLOCK.finditer(README.read_text())}


def test_the_readme_names_its_example_files() -> None:
    assert set(FILES) <= set(_blocks())


def test_the_readme_examples_pass_in_a_pytest_of_their_own(tmp_path: Path) -> None:
    # As the README says: the SAM application (template.yaml and functions/) in the folder
    # the tests run from. An engine installed from its wheel would bring its own; this
    # one is the repository's source, and nothing falls back to the checkout.
    copy_application(ROOT, tmp_path)
    blocks = _blocks()
    for name in FILES:
        (tmp_path / name).write_text(blocks[name])
    (tmp_path / "my_app").mkdir()
    (tmp_path / "my_app" / "__init__.py").write_text("")
    (tmp_path / "my_app" / "payments.py").write_text(PAYMENTS)
    result = run_as_user(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:warnings"],
        tmp_path,
        PYTHONPATH=str(tmp_path),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "4 passed" in result.stdout
