# make run: install into .venv and run one cycle with ./config.yaml
# make test: install with the test extras and run the test suite
# make model: rebuild the shipped relevance model (needs ../shared)
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: run demo install fresh test test-slow model clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml setup.py | $(BIN)/python
	$(BIN)/python -m pip install --quiet .
	touch $@

# the test tools (pytest, ruff, mypy, the local SMTP server), only for make test
$(VENV)/.installed-test: $(VENV)/.installed
	$(BIN)/python -m pip install --quiet ".[test]"
	touch $@

install: $(VENV)/.installed

run: fresh
	$(BIN)/rl-digest --config config.yaml run

demo: fresh
	$(BIN)/rl-digest --config config.yaml run --offline

# the tests run the installed command, as users get it: reinstall this tree first
fresh: $(VENV)/.installed
	$(BIN)/python -m pip install --quiet --no-deps --force-reinstall .

test: $(VENV)/.installed-test fresh
	$(BIN)/ruff check pipeline tests benchmarks
	$(BIN)/mypy
	RL_DIGEST_TEST_INSTALLED=1 $(BIN)/pytest -q -n auto

test-slow: $(VENV)/.installed-test fresh
	RL_DIGEST_TEST_INSTALLED=1 $(BIN)/pytest -q -m "slow or slow_on_postgresql" --run-slow

# rebuild pipeline/data/relevance_model.npz from ../shared/data/arxiv_dev.jsonl and the
# seeds (fixed seed: the same file every time); commit the result
model: $(VENV)/.installed
	$(BIN)/python benchmarks/relevance_model.py

clean:
	rm -rf $(VENV) build *.egg-info state out
