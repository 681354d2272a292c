# Every target bootstraps its own virtual environment in .venv/ (Python 3.11+).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-dev

# aws-sam-cli pins boto3/click/pydantic versions that clash with ours: it gets its own
# venv. `make test` needs it too: the template tests check what SAM's transform produces.
SAM_VENV := .venv-sam
SAM_STAMP := $(SAM_VENV)/.installed
# checkov pins its own dependency tree: a third venv.
CHECKOV_VENV := .venv-checkov
CHECKOV_STAMP := $(CHECKOV_VENV)/.installed

.PHONY: test lint unit integration demo console bench bench-quick soak clean cold-start cost screenshots docs docs-check

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy --strict layers/engine/workflow_runner

test: lint $(SAM_STAMP)
	$(PY) -m pytest -n 2 -m "not soak" tests

unit: $(STAMP)
	$(PY) -m pytest tests/unit

integration: $(STAMP)
	$(PY) -m pytest -n 2 tests/integration

demo: $(STAMP)
	$(VENV)/bin/wfr demo

# The demo, then the operator console on its database (http://127.0.0.1:8080/) until Ctrl-C.
console: $(STAMP)
	$(VENV)/bin/wfr demo --console

clean:
	rm -rf $(VENV) $(SAM_VENV) $(CHECKOV_VENV) $(DOCS_VENV) $(BUILD_VENV) build .mypy_cache .ruff_cache .aws-sam

# The documentation site (mkdocs.yml, pages in docs/) into build/site. MkDocs Material and
# mkdocstrings pin their own dependency tree: a venv of their own, with the project in it
# for the API reference and the CLI reference hook (docs/hooks/cli_reference.py).
DOCS_VENV := .venv-docs
DOCS_STAMP := $(DOCS_VENV)/.installed

$(DOCS_STAMP): pyproject.toml docs/requirements.txt
	$(PYTHON) -m venv $(DOCS_VENV)
	$(DOCS_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(DOCS_VENV)/bin/python -m pip install --quiet -r docs/requirements.txt -e .
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(DOCS_VENV)/bin/mkdocs build --strict --site-dir build/site

# The built site in headless chromium: no page's table wider than the content column.
docs-check: docs $(STAMP)
	WFR_DOCS_SITE=build/site $(PY) -m pytest -q tests/browser/test_docs_layout.py

$(SAM_STAMP):
	$(PYTHON) -m venv $(SAM_VENV)
	$(SAM_VENV)/bin/pip install --quiet 'aws-sam-cli==1.170.0'
	touch $(SAM_STAMP)

$(CHECKOV_STAMP):
	$(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/pip install --quiet 'checkov==3.3.30'
	touch $(CHECKOV_STAMP)

# The functions run on python3.13 and the layers' bytecode is compiled by it: `sam build`
# needs python3.13 on PATH (pyenv's when installed; python3 stays the default).
PYENV_PYTHONS := $(shell pyenv versions --bare 2>/dev/null | grep -E '^3\.1[13]\.[0-9]+$$' | sort -t. -k2,2n | tr '\n' ':' | sed 's/:$$//')
SAM_ENV = SAM_CLI_TELEMETRY=0 AWS_DEFAULT_REGION=$${AWS_DEFAULT_REGION:-eu-central-1} $(if $(PYENV_PYTHONS),PYENV_VERSION=$(PYENV_PYTHONS))

# Lint, build (arm64 layers without Docker), and a policy scan of what CloudFormation
# receives: the template after SAM's transform, as shipped and in the prod shape.
# Suppressions are in the template, next to the resource, each with its reason.
.PHONY: sam-check
sam-check: $(SAM_STAMP) $(CHECKOV_STAMP)
	$(SAM_ENV) $(SAM_VENV)/bin/sam validate --lint
	$(SAM_ENV) $(SAM_VENV)/bin/sam build
	mkdir -p build/cfn
	$(SAM_VENV)/bin/python tests/infra/sam_transform.py template.yaml > build/cfn/default.json
	$(SAM_VENV)/bin/python tests/infra/sam_transform.py template.yaml \
		'{"Stage": "prod", "NatGateways": "per-az", "InterfaceEndpoints": "true", "DatabaseFailoverReplica": "true", "DeploymentType": "Canary10Percent5Minutes"}' \
		> build/cfn/prod.json
	$(CHECKOV_VENV)/bin/checkov --quiet --compact --framework cloudformation --skip-download \
		-f build/cfn/default.json -f build/cfn/prod.json

# The engine as a user gets it (issue 31, docs/your-project.md): the wheel built in a venv
# of its own, installed into a fresh one, `wfr init` outside the repository, and that
# project's make test, make demo, sam validate --lint and sam build (.ci/package-check).
BUILD_VENV := .venv-build
BUILD_STAMP := $(BUILD_VENV)/.installed

$(BUILD_STAMP):
	$(PYTHON) -m venv $(BUILD_VENV)
	$(BUILD_VENV)/bin/pip install --quiet 'build>=1.2'
	touch $(BUILD_STAMP)

.PHONY: package-check
package-check: $(BUILD_STAMP) $(SAM_STAMP)
	$(SAM_ENV) PYTHON=$(PYTHON) bash .ci/package-check

# Cold-start import time of every handler from the built layers (also part of make bench).
cold-start: $(STAMP)
	$(PY) -m bench.cold_start

# Cost per million runs and per month, from list prices and per-run figures measured on
# the handlers (writes bench/cost.json and docs/COST.md).
cost: $(STAMP)
	$(PY) -m bench.cost

# Benchmarks (issue 6): DBOS and matplotlib live in their own venv, next to this project.
BENCH_VENV := .venv-bench
BENCH_STAMP := $(BENCH_VENV)/.installed

$(BENCH_STAMP): pyproject.toml bench/requirements.txt
	$(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(BENCH_VENV)/bin/python -m pip install --quiet -e . -r bench/requirements.txt
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)
	$(BENCH_VENV)/bin/python -m bench.run

bench-quick: $(BENCH_STAMP)
	$(BENCH_VENV)/bin/python -m bench.run --quick

# The full reliability suite (about an hour): figures go to docs/RELIABILITY.md. The
# sample scenario's crash sweep takes one point in WFR_CRASH_STRIDE (hours otherwise on
# the shared two-core machine); WFR_CRASH_OFFSET=1, 2 sweep the others.
WFR_CRASH_STRIDE ?= 3
soak: $(STAMP)
	rm -f build/reliability-stats.jsonl && mkdir -p build
	WFR_RELIABILITY_STATS=$(CURDIR)/build/reliability-stats.jsonl WFR_FUZZ_EXAMPLES=150 \
	WFR_DIFF_EXAMPLES=60 WFR_CRASH_STRIDE=$(WFR_CRASH_STRIDE) \
	$(PY) -m pytest -n 2 tests/reliability \
	--junitxml=build/reliability-junit.xml; status=$$?; \
	$(PY) -m tests.reliability.report build/reliability-stats.jsonl \
	build/reliability-junit.xml docs/RELIABILITY.md; exit $$status

# The console's screenshots the docs site shows: the browser test takes them into
# build/console-screenshots/ (the site built after a test run shows those); this commits
# a fresh set into docs/console/.
screenshots: $(STAMP)
	$(PY) -m pytest tests/browser -q
	cp build/console-screenshots/*.png docs/console/
