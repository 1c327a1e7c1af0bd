# make run: install into .venv and run one cycle with ./config.yaml
# make test: install with test extras and run the test suite
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: run demo test test-slow bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml setup.py | $(BIN)/python
	$(BIN)/python -m pip install --quiet ".[test]"
	touch $@

install: $(VENV)/.installed

run: $(VENV)/.installed
	$(BIN)/rl-digest --config config.yaml run

demo: $(VENV)/.installed
	$(BIN)/rl-digest --config config.yaml run --offline

test: $(VENV)/.installed
	$(BIN)/python -m pip install --quiet --no-deps --force-reinstall .
	$(BIN)/ruff check pipeline tests benchmarks
	$(BIN)/pytest -q

test-slow: $(VENV)/.installed
	$(BIN)/pytest -q -m slow --run-slow

clean:
	rm -rf $(VENV) build *.egg-info state out
