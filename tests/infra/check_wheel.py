"""Check a built wheel carries what an installed engine needs beyond its modules: the SAM
application (byte for byte the repository's files, nothing else), the scaffold of `wfr
init`, the SQL and the samples. Standard library only (it runs in the build venv):

    python tests/infra/check_wheel.py dist/workflow_runner-0.2.0-py3-none-any.whl
"""

from __future__ import annotations

import importlib.util
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENGINE = ROOT / "layers" / "engine"

_spec = importlib.util.spec_from_file_location(
    "_wfr_sam_application", ENGINE / "workflow_runner" / "sam_application.py"
)
assert _spec is not None and _spec.loader is not None
sam_application = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sam_application)

ALSO_NEEDED = sorted(
    [
        "workflow_runner/py.typed",
        "workflow_runner/store/schema.sql",
        "workflow_runner/store/queries.sql",
        "sample_workflows/__init__.py",
        *(
            str(p.relative_to(ENGINE))
            for p in (ENGINE / "workflow_runner" / "cli" / "scaffold").rglob("*.tmpl")
        ),
    ]
)


def problems(wheel: Path) -> list[str]:
    """What the wheel lacks or carries wrongly (empty: nothing)."""
    prefix = f"workflow_runner/{sam_application.PACKAGED_DIR}/"
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        found = []
        for relative in sam_application.application_files(ROOT):
            name = prefix + str(relative)
            if name not in names:
                found.append(f"{name} is missing")
            elif archive.read(name) != (ROOT / relative).read_bytes():
                found.append(f"{name} differs")
    expected = {prefix + str(p) for p in sam_application.application_files(ROOT)}
    found += [
        f"{n} is not the application's" for n in sorted(names - expected) if n.startswith(prefix)
    ]
    found += [f"{n} is missing" for n in ALSO_NEEDED if n not in names]
    return found


def main(argv: list[str]) -> int:
    [wheel] = [Path(a) for a in argv[1:]]
    found = problems(wheel)
    for problem in found:
        print(f"{wheel.name}: {problem}", file=sys.stderr)
    if not found:
        print(f"{wheel.name}: the SAM application, the scaffold and the SQL are in place")
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
