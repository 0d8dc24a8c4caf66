# Switchyard: `make run` serves the gateway with a demo configuration; `make test` runs the suite.
SHELL := /bin/bash
.DEFAULT_GOAL := help

# Any Python >= 3.11 works (Django 5.2 LTS is pinned); prefer the newest one on PATH.
PYTHON ?= $(shell for p in python3.13 python3.12 python3 python; do \
	if command -v $$p >/dev/null 2>&1 && $$p -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; \
	then echo $$p; break; fi; done)
VENV ?= .venv
BIN := $(VENV)/bin
PYPROJECT_HASH := $(shell sha1sum pyproject.toml | cut -c1-12)
RUNTIME_STAMP := $(VENV)/.runtime-$(PYPROJECT_HASH)
DEV_STAMP := $(VENV)/.dev-$(PYPROJECT_HASH)

SWITCHYARD_HOST ?= 127.0.0.1
SWITCHYARD_PORT ?= 8000
SWITCHYARD_WORKERS ?= 1
export SWITCHYARD_HOST SWITCHYARD_PORT SWITCHYARD_WORKERS

.PHONY: help install install-dev run test test-fast bench lint clean browser agents screenshots

help:
	@echo "make run    - install, migrate, and serve the gateway with a demo config on http://$(SWITCHYARD_HOST):$(SWITCHYARD_PORT)"
	@echo "make test   - install dev dependencies and run the whole suite"
	@echo "make lint   - ruff check, ruff format --check and mypy --strict (pyproject.toml)"
	@echo "make bench  - measure the gateway against the direct path (BENCH_ARGS=--streams: long streams)"

$(VENV)/bin/python:
	@test -n "$(PYTHON)" || { echo "Switchyard needs Python >= 3.11 on PATH"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(RUNTIME_STAMP): pyproject.toml | $(VENV)/bin/python
	$(BIN)/pip install -q -e .
	@touch $@

$(DEV_STAMP): pyproject.toml | $(VENV)/bin/python
	$(BIN)/pip install -q -e '.[dev]'
	@touch $@ $(RUNTIME_STAMP)

install: $(RUNTIME_STAMP)
install-dev: $(DEV_STAMP)

run: install
	$(BIN)/python manage.py serve --host $(SWITCHYARD_HOST) --port $(SWITCHYARD_PORT) --workers $(SWITCHYARD_WORKERS)

# Browser tests drive Debian's chromium; install it when missing (CI runs as root).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
		echo "installing chromium for the browser tests"; \
		if [ "$$(id -u)" = 0 ]; then apt-get update -qq -o DPkg::Lock::Timeout=600 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=600 chromium >/dev/null; \
		else sudo apt-get update -qq -o DPkg::Lock::Timeout=600 && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=600 chromium >/dev/null; fi; }

# The real agents the suite drives (tests/agents): pinned, installed once per machine into a
# cache outside the clone (~750 MB), so every fresh clone's `make test` reuses the install.
# The directory's name carries every version, so a new pin never reuses an old install.
# Each install goes to a directory of its own first: two clones' `make test` started at
# once both install, and the first to finish is the one kept.
CLAUDE_CODE_VERSION ?= 2.1.197
CODEX_VERSION ?= 0.171.0
GEMINI_CLI_VERSION ?= 0.61.0
AGENTS_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/switchyard
SWITCHYARD_AGENTS_DIR ?= $(AGENTS_CACHE)/agents-cc$(CLAUDE_CODE_VERSION)-codex$(CODEX_VERSION)-gemini$(GEMINI_CLI_VERSION)
export SWITCHYARD_AGENTS_DIR
AGENT_BINS := claude codex gemini
agents_installed = $(foreach b,$(AGENT_BINS),test -x "$(1)/node_modules/.bin/$(b)" &&) true

agents:
	@$(call agents_installed,$(SWITCHYARD_AGENTS_DIR)) || { \
		command -v npm >/dev/null 2>&1 || { echo "the agent tests need node and npm (Debian: apt-get install nodejs npm)"; exit 1; }; \
		echo "installing Claude Code $(CLAUDE_CODE_VERSION), Codex $(CODEX_VERSION) and Gemini CLI $(GEMINI_CLI_VERSION) into $(SWITCHYARD_AGENTS_DIR)"; \
		tmp="$(SWITCHYARD_AGENTS_DIR).tmp.$$$$"; \
		mkdir -p "$$tmp" && \
		npm install --silent --no-audit --no-fund --prefix "$$tmp" \
			@anthropic-ai/claude-code@$(CLAUDE_CODE_VERSION) @openai/codex@$(CODEX_VERSION) \
			@google/gemini-cli@$(GEMINI_CLI_VERSION) || { rm -rf "$$tmp"; exit 1; }; \
		if $(call agents_installed,$(SWITCHYARD_AGENTS_DIR)); then \
			rm -rf "$$tmp"; \
		else rm -rf "$(SWITCHYARD_AGENTS_DIR)" && mv -T "$$tmp" "$(SWITCHYARD_AGENTS_DIR)"; fi; }

# The production shape (PostgreSQL + Redis, both on this machine; .ci/run starts them) runs
# the gateway's integration tests a second time.
PG_URL ?= postgres://postgres@127.0.0.1:5432/switchyard
PROD_REDIS_URL ?= redis://127.0.0.1:6379/6
PRODUCTION_LEG := tests/limits tests/gateway/test_gateway_core.py tests/gateway/test_health_routing.py tests/gateway/test_hot_path.py tests/api tests/audit \
	tests/config/test_config_truth.py tests/state/test_version_watch.py tests/test_checks.py tests/config/test_unreadable_config.py
# the front doors' tests live in tests/api too; the first leg covers them
PRODUCTION_LEG += $(foreach m,front_doors claude_code_door codex_door front_door_effort probes,--ignore=tests/api/test_$(m).py)

# Both legs spread over the machine's cores (pytest-xdist; worksteal evens out the slow
# process tests at the end). TEST_WORKERS=0 runs them in this one process.
TEST_WORKERS ?= auto
XDIST := -n $(TEST_WORKERS) --dist worksteal

test: install-dev browser agents
	$(BIN)/python -m pytest -q $(XDIST)
	DATABASE_URL=$(PG_URL) REDIS_URL=$(PROD_REDIS_URL) $(BIN)/python -m pytest -q $(XDIST) -m "not browser and not multiprocess" $(PRODUCTION_LEG)

# The browser tests write their screenshots to build/screenshots/; this writes the ones the
# docs show (docs/screenshots/), to be looked at and committed on purpose.
screenshots: install-dev browser
	SWITCHYARD_SCREENSHOTS=$(CURDIR)/docs/screenshots $(BIN)/python -m pytest -q $(XDIST) -m browser

test-fast: install-dev
	$(BIN)/python -m pytest -q -x -m "not browser and not multiprocess and not agents"

# Options go through BENCH_ARGS, e.g. `make bench BENCH_ARGS="--streams g --stream-count 300"`.
BENCH_ARGS ?=
bench: install-dev
	$(BIN)/python -m bench.run $(BENCH_ARGS)

# mypy reads its strict configuration and the django-stubs plugin from pyproject.toml.
lint: install-dev
	$(BIN)/ruff check router_project routing dashboard tests bench
	$(BIN)/ruff format --check router_project routing dashboard tests bench
	$(BIN)/mypy router_project routing dashboard bench

clean:
	rm -rf $(VENV) var
