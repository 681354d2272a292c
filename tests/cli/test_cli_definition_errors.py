"""Every kind of workflow definition error reaches `wfr` the same way: exit code 2, the
workflow and the place named, nothing written."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from cli_support import Cli

BROKEN = {
    "cron": (
        "from workflow_runner import define_workflow, on_cron\n"
        "define_workflow(name='nightly', trigger=on_cron('every day'),"
        " steps=lambda s: [s.return_()])\n",
        'nightly › trigger (on_cron) › schedule: Invalid cron expression "every day"',
    ),
    "duration": (
        "from workflow_runner import define_workflow, on_event\n"
        "define_workflow(name='slow', trigger=on_event('x.y'),"
        " steps=lambda s: [s.wait(for_='P1X')])\n",
        'slow › step 0 (wait) › for_: Invalid duration "P1X"',
    ),
    "timeout": (
        "from workflow_runner import define_workflow, on_event\n"
        "define_workflow(name='late', trigger=on_event('x.y'), awaits={'a': 'a.b'},"
        " steps=lambda s: [s.wait_for_event('a', timeout='3 days')])\n",
        "late › step 0 (wait_for_event) › timeout: '3 days' is neither",
    ),
    "keys": (
        "from workflow_runner import define_workflow, on_event\n"
        "define_workflow(name='twice', trigger=on_event('x.y'),"
        " steps=lambda s: [s.compute('k', lambda c: 1), s.compute('k', lambda c: 2)])\n",
        "twice › step 1 (compute): result key 'k' is already written by step 0 (compute)",
    ),
    "raw": (
        "from workflow_runner.durations import parse_duration\nparse_duration('soon')\n",
        "failed: InvalidDuration",
    ),
}


@pytest.mark.parametrize("kind", sorted(BROKEN))
def test_a_definition_error_exits_2_and_names_its_place(
    kind: str, cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source, expected = BROKEN[kind]
    module = f"broken_{kind}_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    result = cli("graph", "anything", env={"WORKFLOW_MODULES": module})
    assert result.code == 2, result.err
    assert expected in result.err
    assert result.out == ""
