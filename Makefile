# Task runner: the README's two commands and CI call these targets.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.quire-installed

.PHONY: install app test lint bench screenshots

install: $(STAMP)

# torch first, pinned: 2.13.0 is the CPU build on disk; any other spec pulls a multi-GB CUDA build.
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

app: install
	HF_HUB_OFFLINE=1 $(VENV)/bin/quire gui

test: install
	QT_QPA_PLATFORM=offscreen HF_HUB_OFFLINE=1 $(PY) -m pytest

lint: install
	$(VENV)/bin/ruff check app knowledge jobs tests
	$(VENV)/bin/mypy knowledge jobs app/cli

# BENCH_ARGS, e.g. make bench BENCH_ARGS="--quick" or BENCH_ARGS="--only ingest,quality"
bench: install
	$(PY) -m pip install --quiet -e '.[dev,bench]'
	HF_HUB_OFFLINE=1 $(PY) -m tests.benchmarks.run_all $(BENCH_ARGS)

screenshots: install
	QT_QPA_PLATFORM=offscreen $(PY) -m app.screenshots docs/screenshots
