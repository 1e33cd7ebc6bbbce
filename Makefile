# The README's two entry points, `make demo` and `make test`, each set everything up first:
# Debian packages (when missing), a virtualenv in .venv, and replcheck with all extras;
# `make test` also Azurite and s3rver (npm, into .tools/) for the object-store lake tests.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: setup system tools python demo test lint bench clean

setup: system $(STAMP)

system:
	bash scripts/install-system-deps.sh

# Test tools from npm, project-local (.tools/): Azurite (the Azure Storage emulator) and
# s3rver (a second S3 implementation), which the object-store lake tests start. Only
# `make test` needs them.
tools:
	bash scripts/install-npm-tools.sh

$(STAMP): pyproject.toml
	bash scripts/make-venv.sh "$(PYTHON)" "$(VENV)"
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[all,dev]"
	touch $(STAMP)

demo: setup
	$(BIN)/replcheck demo

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy cdc_core connectors merkle validator reports

# Two workers (pytest-xdist), each with its own private servers and Spark session, a file to a
# worker (module fixtures such as the type matrix's tables are built once), slowest files
# first (tests/conftest.py, SLOW_FIRST; --no-loadscope-reorder keeps that order): the tests mostly
# wait on servers and JVMs, so the 2 cores overlap them. The lint runs beside the tests'
# first minute (its output follows theirs); either failing fails the target. A worker that
# dies is not replaced: with --dist loadfile, pytest-xdist 3.8 can wait forever after
# replacing one (pytest-xdist#1378), so the run stops at once and names the test instead.
test: setup tools
	@log=$$(mktemp); $(MAKE) --no-print-directory lint > $$log 2>&1 & lint=$$!; \
	$(BIN)/python -m pytest -n 2 --dist loadfile --no-loadscope-reorder --max-worker-restart 0; \
	tests=$$?; \
	wait $$lint; linted=$$?; cat $$log; rm -f $$log; \
	[ $$linted -eq 0 ] || echo "make test: the lint failed (above)"; \
	[ $$tests -eq 0 ] && [ $$linted -eq 0 ]

bench: setup
	$(BIN)/python -m bench.bench_hashing

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis .mypy_cache .ruff_cache *.egg-info
