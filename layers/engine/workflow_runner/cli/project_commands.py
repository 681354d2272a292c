"""A project of your own: `wfr init DIR` writes one, `wfr export-app DIR` writes the
engine's SAM application that its template nests.

The project's files are rendered from `scaffold/` (package data): `{{module}}`,
`{{project}}`, `{{stack}}` and `{{version}}` are replaced, `MODULE` in a file name is the
module's name, `gitignore` becomes `.gitignore` and the `.tmpl` suffix goes.
"""

from __future__ import annotations

import json
import keyword
import re
import sys
from importlib import metadata
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from ..local.application import export_application, installed_version
from .context import Context, UsageError

SCAFFOLD = Path(__file__).resolve().parent / "scaffold"
# Module names a project's workflows cannot take: the engine's own and the project's folders.
TAKEN = {"workflow_runner", "sample_workflows", "tests", "workflows", "demo"}


def module_for(folder: Path, given: str | None) -> str:
    """The workflow module's name: `given`, else `<folder name>_workflows`.

    Raises:
        UsageError: `given` is not a usable module name.
    """
    if given is None:
        base = re.sub(r"[^0-9A-Za-z]+", "_", folder.name).strip("_").lower() or "project"
        if base[0].isdigit():
            base = f"project_{base}"
        return base if base.endswith("workflows") and base not in TAKEN else f"{base}_workflows"
    if not given.isidentifier() or keyword.iskeyword(given):
        raise UsageError(f"--module {given!r} is not a Python module name")
    if given in TAKEN or given in sys.stdlib_module_names:
        raise UsageError(f"--module {given!r} is taken (the standard library's or the engine's)")
    return given


def stack_name(folder: Path) -> str:
    """A CloudFormation stack name from the folder's name."""
    name = re.sub(r"[^0-9A-Za-z]+", "-", folder.name).strip("-").lower()
    return name if name[:1].isalpha() else f"wfr-{name}".rstrip("-")


def render(folder: Path, module: str) -> dict[Path, str]:
    """The project's files (relative path -> text), nothing written yet."""
    values = {
        "{{module}}": module,
        "{{project}}": folder.name,
        "{{stack}}": stack_name(folder),
        "{{version}}": installed_version(),
    }
    files: dict[Path, str] = {}
    for source in sorted(SCAFFOLD.rglob("*.tmpl")):
        relative = source.relative_to(SCAFFOLD)
        name = relative.name.removesuffix(".tmpl").replace("MODULE", module)
        name = ".gitignore" if name == "gitignore" else name
        text = source.read_text()
        for placeholder, value in values.items():
            text = text.replace(placeholder, value)
        files[relative.with_name(name)] = text
    return files


def wheel_folder() -> str | None:
    """The folder of the wheel this engine was installed from, when pip recorded one."""
    try:
        recorded = metadata.distribution("workflow-runner").read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        return None
    url = str(json.loads(recorded or "{}").get("url") or "")
    parts = urlsplit(url)
    if parts.scheme != "file" or not parts.path.endswith(".whl"):
        return None
    return str(Path(unquote(parts.path)).parent)


def cmd_init(ctx: Context) -> int:
    """Write a new project into an empty or new folder."""
    folder = Path(ctx.args.dir)
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise UsageError(
            f"{folder} is not an empty folder: wfr init writes a new project into an empty "
            "or new one (nothing was written)"
        )
    folder = folder.resolve()
    module = module_for(folder, ctx.args.module)
    files = render(folder, module)
    for relative, text in files.items():
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        (folder / relative).write_text(text)
    wheels = wheel_folder()
    out = ctx.output
    if out.as_json:
        out.json(
            {
                "project": str(folder),
                "module": module,
                "files": [str(p) for p in files],
                "wheels": wheels,
            }
        )
        return 0
    out.line(f"wrote a workflow-runner project to {folder} (workflow module {module}):")
    for relative in files:
        out.line(f"  {relative}")
    out.line("next:")
    out.line(f"  cd {folder}")
    out.line(f"  make test WHEELS={wheels or 'FOLDER_WITH_THE_ENGINE_WHEEL'}")
    out.line("  make demo")
    return 0


def cmd_export_app(ctx: Context) -> int:
    """Write the installed engine's SAM application into a folder, for sam build."""
    target = Path(ctx.args.dir)
    written = export_application(target)
    if ctx.output.as_json:
        ctx.output.json({"folder": str(target), "files": len(written)})
        return 0
    ctx.output.line(
        f"wrote the SAM application of workflow-runner {installed_version()} to {target} "
        f"({len(written)} files)"
    )
    return 0


def add_commands(commands: Any, command: Any) -> None:
    """Register `wfr init` and `wfr export-app`."""
    p = command(
        commands,
        "init",
        cmd_init,
        "start a project of your own in DIR (new or empty): a workflow module, its tests, "
        "template.yaml nesting the engine, samconfig.toml, a Makefile (test, demo, deploy)",
    )
    p.add_argument("dir", metavar="DIR")
    p.add_argument(
        "--module",
        metavar="NAME",
        help="the workflow module's name (default: DIR's name followed by _workflows)",
    )
    p = command(
        commands,
        "export-app",
        cmd_export_app,
        "write the installed engine's SAM application (template.yaml, functions/, its "
        "layers' build files and packages) into DIR, for the template of a project that "
        "nests it; an earlier export there is replaced",
    )
    p.add_argument("dir", metavar="DIR")
