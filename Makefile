# Every target bootstraps its own virtual environment in .venv/ (Python 3.11+).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-dev

.PHONY: test lint unit integration demo bench bench-quick soak clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

lint: $(STAMP)
	$(VENV)/bin/ruff check layers functions tests
	$(VENV)/bin/mypy --strict layers/engine/workflow_runner

test: lint
	$(PY) -m pytest -n 2 -m "not soak" tests

unit: $(STAMP)
	$(PY) -m pytest tests/unit

integration: $(STAMP)
	$(PY) -m pytest -n 2 tests/integration

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
