# Task runner: the README's two commands and CI call these targets.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.quire-installed

.PHONY: install app test test-engines soak lint bench screenshots package package-check

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

# Two test processes (pytest-xdist), a file at a time each (--dist loadfile: a file's module fixtures load once):
# 41 -> 22.5 min on a 2-core machine without AVX-512. TEST_WORKERS=0 runs them in this one process.
# --durations=25: each run ends with its 25 slowest tests, so a test that grows is seen where it grows.
TEST_WORKERS ?= 2
TEST_ARGS := -n $(TEST_WORKERS) --dist loadfile --durations=25
test: install
	QT_QPA_PLATFORM=offscreen HF_HUB_OFFLINE=1 $(PY) -m pytest $(TEST_ARGS)

# The team store's tests against real PostgreSQL (pgvector) and Redis servers started from their wheels on
# loopback (tests/support/servers.py); kept out of `make test` so the default run stays fast. The files
# parametrized by engine (tests/support/engine_fixtures.py) run their SQLite half in `make test`, their
# PostgreSQL half here.
ENGINE_FILES := tests/engines tests/folder_runs/test_execution.py tests/sync/test_diff_kinds.py \
	tests/knowledge/test_guards.py tests/store/test_guard_triggers.py tests/folder_runs/test_start.py \
	tests/folder_runs/test_retry.py tests/app/test_team_window.py tests/knowledge/test_crash.py \
	tests/folder_runs/test_crash_soak.py tests/sync/test_crash.py tests/sync/test_cli_and_review.py \
	tests/search/test_query_syntax.py tests/portable/test_export_import.py tests/knowledge/test_term_stats.py \
	tests/folder_runs/test_folder_tree.py tests/knowledge/test_nesting_budget.py tests/knowledge/test_big_file_slices.py \
	tests/search/test_related.py tests/agents/test_kept_from_agents.py
# Two processes as in `make test`: each starts its own servers (temporary folders, free ports). A server that
# cannot start fails its tests here (QUIRE_REQUIRE_SERVERS), never skips them.
test-engines: install
	QUIRE_REQUIRE_SERVERS=1 QT_QPA_PLATFORM=offscreen HF_HUB_OFFLINE=1 $(PY) -m pytest -m "engines and not soak" $(TEST_ARGS) $(ENGINE_FILES)

# The SIGKILL crash tests' extra seeds and kills (marked soak), beyond the one per scenario `make test` runs.
soak: install
	QT_QPA_PLATFORM=offscreen HF_HUB_OFFLINE=1 $(PY) -m pytest -m soak $(TEST_ARGS)

lint: install
	$(VENV)/bin/ruff check app knowledge jobs tests
	$(VENV)/bin/mypy knowledge jobs app/cli

# BENCH_ARGS, e.g. make bench BENCH_ARGS="--quick" or BENCH_ARGS="--only ingest,quality"
bench: install
	$(PY) -m pip install --quiet -e '.[dev,bench]'
	HF_HUB_OFFLINE=1 $(PY) -m tests.benchmarks.run_all $(BENCH_ARGS)

screenshots: install
	QT_QPA_PLATFORM=offscreen $(PY) -m app.screenshots docs/screenshots

# The packaged app (README "Packaging"): a PyInstaller onedir build in dist/Quire, the Linux archive, and the
# multilingual model's add-on (dist/Quire-multilingual, archived on its own). Sizes in MB (10^6 bytes), the
# folder's as its files' bytes (du --apparent-size), against the targets.
# the pin of pyproject's `package` extra
PYINSTALLER := pyinstaller==6.22.3
ARCHIVE := dist/Quire-linux-x86_64.tar.xz
ADDON_ARCHIVE := dist/Quire-multilingual-linux-x86_64.tar.xz
MB = $$(awk "BEGIN { printf \"%.1f\", $(1) / 1e6 }")

package: install
	$(PY) -m pip install --quiet '$(PYINSTALLER)'
	@start=$$(date +%s); \
	HF_HUB_OFFLINE=1 $(PY) -m PyInstaller packaging/quire.spec --noconfirm --log-level WARN && \
	built=$$(date +%s) && \
	packaging/linux/archive.sh dist/Quire $(ARCHIVE) dist/Quire-multilingual $(ADDON_ARCHIVE) && \
	echo "package: PyInstaller $$((built - start)) s, archives $$(($$(date +%s) - built)) s;" \
	  "dist/Quire $(call MB,$$(du -sb dist/Quire | cut -f1)) MB unpacked (target <= 450)," \
	  "$(ARCHIVE) $(call MB,$$(stat -c %s $(ARCHIVE))) MB (target <= 150);" \
	  "the multilingual add-on $(call MB,$$(stat -c %s $(ADDON_ARCHIVE))) MB"

# Smoke-tests the archive as a stranger would run it (env -i, a temporary HOME, no virtualenv).
package-check: package
	@start=$$(date +%s); \
	$(PY) packaging/check_package.py $(ARCHIVE) --addon $(ADDON_ARCHIVE) && \
	echo "package-check: $$(($$(date +%s) - start)) s"
