# Every target bootstraps its own virtual environment in .venv/ (Python 3.11+).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-dev

.PHONY: test lint unit integration demo console bench bench-quick soak clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy --strict layers/engine/workflow_runner

test: lint
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
	rm -rf $(VENV) build .mypy_cache .ruff_cache .aws-sam

# aws-sam-cli pins boto3/click versions that clash with ours: it gets its own venv.
SAM_VENV := .venv-sam
SAM_STAMP := $(SAM_VENV)/.installed

$(SAM_STAMP):
	$(PYTHON) -m venv $(SAM_VENV)
	$(SAM_VENV)/bin/pip install --quiet 'aws-sam-cli==1.170.0'
	touch $(SAM_STAMP)

.PHONY: sam-check
sam-check: $(SAM_STAMP)
	SAM_CLI_TELEMETRY=0 AWS_DEFAULT_REGION=$${AWS_DEFAULT_REGION:-eu-central-1} $(SAM_VENV)/bin/sam validate --lint
	SAM_CLI_TELEMETRY=0 AWS_DEFAULT_REGION=$${AWS_DEFAULT_REGION:-eu-central-1} $(SAM_VENV)/bin/sam build

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

# The full reliability suite (minutes): figures go to docs/RELIABILITY.md.
soak: $(STAMP)
	rm -f build/reliability-stats.jsonl && mkdir -p build
	WFR_RELIABILITY_STATS=$(CURDIR)/build/reliability-stats.jsonl WFR_FUZZ_EXAMPLES=150 \
	WFR_DIFF_EXAMPLES=60 $(PY) -m pytest -n 2 tests/reliability \
	--junitxml=build/reliability-junit.xml; status=$$?; \
	$(PY) -m tests.reliability.report build/reliability-stats.jsonl \
	build/reliability-junit.xml docs/RELIABILITY.md; exit $$status
