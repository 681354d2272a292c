"""Cold-start cost of every Lambda handler, measured on the built artifacts.

    python -m bench.cold_start            # make cold-start: build, measure, print JSON
    python -m bench.cold_start --legacy   # the layout before issue 12, for comparison

For each function of template.yaml a fresh interpreter imports its handler module
(``import app``) the way the Lambda runtime does, with the layers on ``sys.path`` and
nothing written back (``-B``: /opt and /var/task are read-only in Lambda, so Python can
never cache bytecode there). The figure is the fastest wall time of ``import app`` over
several runs: the machine is shared, and the fastest run is the one least disturbed by
other processes (the median wall time and the CPU time are kept beside it, with the load
average at the time).

What is measured, and what cannot be:

- The layers are built by their own Makefiles (the recipe `sam build` runs). The stack
  ships arm64, whose wheels cannot be imported on this x86_64 machine; the measurement
  uses an x86_64 build of the same layer, same Python (template.yaml's Runtime), same
  recipe. Graviton single-thread speed differs from this machine's, and a 512 MB
  function gets about a third of a vCPU, so absolute Lambda figures will be higher; the
  comparison between layouts holds.
- The runtime's own boto3/botocore (/var/runtime) are stood in for by the same packages
  installed for the target Python, with bytecode compiled (as the runtime image ships
  them).
- The Lambda environment is simulated so Powertools' Tracer is enabled and patches
  botocore at import, as it does in Lambda.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from .common import TEMPLATE, deployed_runtime

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build" / "cold-start"
RUNS = 9

# layers/engine/requirements.txt before issue 12 (built by SAM's python3.11 builder,
# which unpacks wheels without compiling them).
LEGACY_REQUIREMENTS = [
    "psycopg[binary]>=3.2,<4",
    "pydantic>=2.7,<3",
    "aws-lambda-powertools[parser,tracer]>=3.30,<4",
    "boto3>=1.34",
]

LAMBDA_ENV = {
    "AWS_LAMBDA_FUNCTION_NAME": "cold-start-probe",
    "AWS_LAMBDA_FUNCTION_VERSION": "1",
    "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "512",
    "AWS_REGION": "eu-central-1",
    "AWS_DEFAULT_REGION": "eu-central-1",
    "_X_AMZN_TRACE_ID": (
        "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
    ),
    "AWS_XRAY_CONTEXT_MISSING": "LOG_ERROR",
    "POWERTOOLS_SERVICE_NAME": "workflow-runner",
    "POWERTOOLS_METRICS_NAMESPACE": "WorkflowRunner",
    "WORKFLOW_MODULES": "sample_workflows",
    "LANG": "C.UTF-8",
}

_PROBE = """
import sys, time
sys.path[:0] = {paths!r}
wall, cpu = time.perf_counter(), time.process_time()
import app
print(time.perf_counter() - wall, time.process_time() - cpu)
"""


def log(message: str) -> None:
    print(f"[cold-start] {message}", file=sys.stderr, flush=True)


def deployed_python(template: Path = TEMPLATE) -> str:
    """The Python version template.yaml deploys the functions on ("3.13" for its
    Globals' python3.13), which the layers are built for and imported with.

    Raises:
        RuntimeError: the template's runtime is not a Python one.
    """
    runtime, _ = deployed_runtime(template)
    if not runtime.startswith("python3."):
        raise RuntimeError(f"template.yaml's Globals name runtime {runtime!r}, not python3.x")
    return runtime.removeprefix("python")


def find_python(version: str) -> str:
    """An interpreter of `version` (the deployed one, or 3.11 for the legacy layout): on
    PATH, or installed by pyenv.

    Raises:
        RuntimeError: none found.
    """
    found = shutil.which(f"python{version}")
    if found:
        probe = subprocess.run([found, "-c", "print(1)"], capture_output=True, text=True)
        if probe.returncode == 0:
            return found
    try:
        bare = subprocess.run(
            ["pyenv", "versions", "--bare"], capture_output=True, text=True, check=True
        ).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        bare = []
    for name in sorted((v for v in bare if v.startswith(f"{version}.")), reverse=True):
        root = subprocess.run(
            ["pyenv", "prefix", name], capture_output=True, text=True, check=True
        ).stdout.strip()
        candidate = Path(root) / "bin" / f"python{version}"
        if candidate.exists():
            return str(candidate)
    raise RuntimeError(f"python{version} not found (install it, e.g. with pyenv)")


def pip_install(
    target: Path, requirements: list[str], python_version: str, compile_with: str | None
) -> None:
    """Install wheels for manylinux x86_64 / `python_version` into `target`."""
    if target.exists():
        shutil.rmtree(target)
    subprocess.run(
        [
            sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
            "--no-warn-conflicts", "--no-compile",
            "--platform", "manylinux2014_x86_64", "--platform", "manylinux_2_28_x86_64",
            "--implementation", "cp", "--python-version", python_version,
            "--only-binary=:all:", "--target", str(target), *requirements,
        ],
        check=True,
    )  # fmt: skip
    if compile_with:
        compileall(compile_with, target)


def compileall(python: str, folder: Path) -> None:
    subprocess.run(
        [
            python,
            "-m",
            "compileall",
            "-q",
            "-j",
            "0",
            "--invalidation-mode",
            "unchecked-hash",
            str(folder),
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )


def make_layer(folder: str, target: str, artifacts: Path, python: str) -> Path:
    """Build a layer with its Makefile (as `sam build` does), x86_64 so it can be imported."""
    subprocess.run(
        [
            "make", "--no-print-directory", "-C", str(ROOT / "layers" / folder), target,
            f"ARTIFACTS_DIR={artifacts}", "LAYER_ARCH=x86_64", f"COMPILE_PYTHON={python}",
            f"PIP={sys.executable} -m pip",
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    return artifacts / "python"


def function_dirs() -> dict[str, Path]:
    """Logical id -> code folder: the `sam build` artifact when present, else the
    CodeUri (the python builder copies it unchanged: the handlers have no requirements)."""
    from workflow_runner.aws.template import functions, load_template

    template = load_template(ROOT / "template.yaml")
    found = {}
    for name, resource in functions(template).items():
        built = ROOT / ".aws-sam" / "build" / name
        source = ROOT / str(resource["Properties"]["CodeUri"])
        found[name] = built if (built / "app.py").exists() else source
    return found


def import_once(python: str, version: str, paths: list[Path], code: Path) -> tuple[float, float]:
    """Wall and CPU seconds of `import app` in one fresh interpreter (Python `version`,
    named in the runtime's AWS_EXECUTION_ENV as Lambda names it)."""
    probe = _PROBE.format(paths=[str(code), *(str(p) for p in paths)])
    env = {
        "PATH": "/usr/bin:/bin",
        **LAMBDA_ENV,
        "AWS_EXECUTION_ENV": f"AWS_Lambda_python{version}",
        "LAMBDA_TASK_ROOT": str(code),
    }
    done = subprocess.run(
        [python, "-I", "-B", "-c", probe], env=env, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise RuntimeError(f"import app failed in {code}:\n{done.stderr[-3000:]}")
    wall, cpu = (float(x) for x in done.stdout.split()[-2:])
    return wall, cpu


def measure_imports(
    python: str, version: str, paths: list[Path], codes: dict[str, Path], runs: int = RUNS
) -> dict[str, dict[str, float]]:
    """Per handler: fastest and median wall seconds and median CPU seconds of `import
    app`. Rounds go over every handler in turn, so a busy spell of the shared machine
    slows all handlers alike instead of one."""
    walls: dict[str, list[float]] = {name: [] for name in codes}
    cpus: dict[str, list[float]] = {name: [] for name in codes}
    for _ in range(runs):
        for name, code in codes.items():
            wall, cpu = import_once(python, version, paths, code)
            walls[name].append(wall)
            cpus[name].append(cpu)
    return {
        name: {
            "wall_s": round(min(walls[name]), 3),
            "median_wall_s": round(statistics.median(walls[name]), 3),
            "cpu_s": round(statistics.median(cpus[name]), 3),
        }
        for name in codes
    }


def layer_stats(folder: Path) -> dict[str, Any]:
    files = [p for p in folder.rglob("*") if p.is_file()]
    return {
        "py_files": sum(1 for p in files if p.suffix == ".py"),
        "pyc_files": sum(1 for p in files if p.suffix == ".pyc"),
        "mb": round(sum(p.stat().st_size for p in files) / 1e6, 1),
        "bundles_botocore": (folder / "botocore").exists(),
    }


def measure(legacy: bool = False, runs: int = RUNS) -> dict[str, Any]:
    """Build the layers and measure every handler; the results.json section."""
    if legacy:
        python, version = find_python("3.11"), "3.11"
        engine = BUILD / "legacy-engine"
        log(
            f"building the pre-issue-12 engine layer (python {version}, no bytecode, boto3 bundled)"
        )
        pip_install(engine, LEGACY_REQUIREMENTS, version, compile_with=None)
        shutil.copytree(ROOT / "layers/engine/workflow_runner", engine / "workflow_runner")
        samples = BUILD / "legacy-samples"
        if samples.exists():
            shutil.rmtree(samples)
        shutil.copytree(ROOT / "layers/samples/sample_workflows", samples / "sample_workflows")
        layers = [engine, samples]
        runtime: Path | None = None
    else:
        version = deployed_python()
        python = find_python(version)
        log(f"building the layers with their Makefiles (x86_64 twin, python {version})")
        engine = make_layer("engine", "build-EngineLayer", BUILD / "engine", python)
        samples = make_layer("samples", "build-SamplesLayer", BUILD / "samples", python)
        runtime = BUILD / "runtime"
        log("installing the runtime's boto3 stand-in")
        pip_install(runtime, ["boto3"], version, compile_with=python)
        layers = [engine, samples]
    # Lambda's order: /var/task, the layers (/opt/python), then the runtime's packages.
    paths = [*layers, *([runtime] if runtime else [])]
    load = [round(x, 2) for x in os.getloadavg()]
    imports = measure_imports(python, version, paths, function_dirs(), runs)
    for name, m in imports.items():
        log(f"  {name}: import {m['wall_s']} s (median {m['median_wall_s']}, cpu {m['cpu_s']})")
    return {
        "layout": "legacy (python3.11, boto3 bundled, no bytecode)" if legacy else "shipped",
        "python": subprocess.run(
            [python, "-c", "import platform; print(platform.python_version())"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip(),
        "shipped_arch": "x86_64" if legacy else "arm64",
        "measured_arch": "x86_64",
        "runs_per_handler": runs,
        "import_s": {name: m["wall_s"] for name, m in imports.items()},
        "import_median_s": {name: m["median_wall_s"] for name, m in imports.items()},
        "import_cpu_s": {name: m["cpu_s"] for name, m in imports.items()},
        "import_s_max": max(m["wall_s"] for m in imports.values()),
        "load_average_at_start": load,
        "engine_layer": layer_stats(engine),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--legacy", action="store_true", help="measure the pre-issue-12 layout")
    parser.add_argument("--runs", type=int, default=RUNS)
    args = parser.parse_args()
    os.environ.setdefault("PIP_DISABLE_PIP_VERSION_CHECK", "1")
    print(json.dumps(measure(args.legacy, args.runs), indent=2))


if __name__ == "__main__":
    main()
