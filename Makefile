# refind — two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
export LITELLM_LOCAL_MODEL_COST_MAP := True

.PHONY: install check test test-fast demo bench lock clean

install: $(STAMP)

$(STAMP): requirements.lock pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	# --no-deps: the lock already lists every dependency, pinned and hashed, so pip installs exactly it and resolves
	# nothing against the registry (a new release of a dependency's dependency cannot break the install); pip check
	# then checks every installed requirement against what is installed, refind's own included (not extras' needs)
	$(PY) -m pip install --quiet --disable-pip-version-check --require-hashes --no-deps -r requirements.lock
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	$(PY) -m pip check
	touch $(STAMP)

# The checker gate: lint, formatting and types. `make test` and CI run it before the tests.
check: install
	$(VENV)/bin/ruff check refind_cli tests bench
	$(VENV)/bin/ruff format --check refind_cli tests bench
	$(VENV)/bin/mypy

test: check
	$(PY) -m pytest

# The quick loop while developing: the checkers and every test not marked slow.
test-fast: check
	$(PY) -m pytest -m "not slow"

demo: install
	$(PY) -m refind_cli.demo

bench: install
	$(PY) bench/run_all.py

# Re-resolve the pinned dependency set after editing pyproject.toml (needs network access to PyPI).
lock:
	$(PYTHON) -m pip install --quiet uv
	$(PYTHON) -m uv pip compile pyproject.toml --extra dev --python-version 3.11 --generate-hashes -o requirements.lock

clean:
	rm -rf $(VENV) demo.db .pytest_cache
