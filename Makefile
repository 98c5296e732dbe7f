# The two commands a newcomer needs: `make run` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: test lint typecheck unit bench run synth clean chromium

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet uv==0.13.9
	$(BIN)/uv pip install --quiet --python $(BIN)/python -e '.[dev]'
	touch $(STAMP)

# Chromium (for the console's screenshots) installs in the background while everything else runs.
test: chromium $(STAMP) lint typecheck unit

chromium:
	$(PYTHON) scripts/ensure_chromium.py --background

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION=1 JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=1 $(BIN)/pytest -n 2 --dist loadscope

bench: $(STAMP)
	$(BIN)/python scripts/bench_schedule.py
	$(BIN)/python scripts/bench_pipeline.py
	$(BIN)/python scripts/bench_neighbours.py

# The full template, with the Lambda asset built for arm64 (pip, no Docker). Prints the template's path.
synth: $(STAMP)
	$(BIN)/python scripts/build_asset.py --out build/lambda
	JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION=1 JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=1 \
		$(BIN)/python infra/app.py --stage $${STAGE:-dev} --asset-dir build/lambda --outdir cdk.out

# The whole scheduler on this machine (moto, no AWS account). Options: make run ARGS="--tick 5 --port 9090"
run: $(STAMP)
	JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION=1 JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=1 \
		$(BIN)/jobsched local up $(ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis build cdk.out
