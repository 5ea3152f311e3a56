PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP_RUN := $(VENV)/.installed-run
STAMP_TEST := $(VENV)/.installed-test

.PHONY: demo test test-loaded chaos-short lint bench chaos clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP_RUN): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(STAMP_TEST): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[all,test]'
	touch $@ $(STAMP_RUN)

demo: $(STAMP_RUN)
	$(BIN)/turnkeep demo

lint: $(STAMP_TEST)
	$(BIN)/ruff check actors sampler shell tool_bridge turnkeep tests bench
	$(BIN)/ruff format --check actors sampler shell tool_bridge turnkeep tests bench
	$(BIN)/mypy actors sampler shell tool_bridge turnkeep

test: lint
	$(BIN)/python -m pytest -q
	$(MAKE) --no-print-directory chaos-short

# One chaos run at the highest crash rate of `make chaos`: a regression of the core promise fails `make test`.
chaos-short: $(STAMP_RUN)
	$(BIN)/turnkeep chaos --seed 1 --sessions 50 --turns 5 --actor-crash-rate 0.1 --fault-profile heavy

# The whole suite three times while every core is kept busy, then once in a shuffled order (not in `make test`).
test-loaded: $(STAMP_TEST)
	$(BIN)/python -m tests._under_load --runs 3 --shuffled 1

bench: $(STAMP_TEST)
	$(BIN)/python bench/run_all.py

# Turns killed with SIGKILL mid-turn and finished by the next host (100 runs on SQLite, 25 on PostgreSQL),
# the core promise under actor crashes and provider faults, then hosts killed and started again, then
# turns that fan out to child sessions under actor crashes, then 16 ACP sessions x 5 prompts under heavy
# faults and actor crashes (three seeds).
chaos: $(STAMP_TEST)
	TURNKEEP_KILL_RUNS=100 REQUIRE_POSTGRES_TESTS=1 $(BIN)/python -m pytest -q tests/shell/session/test_resume_after_kill.py
	for rate in 0.02 0.05 0.1; do for seed in 1 2 3 4 5; do \
		$(BIN)/turnkeep chaos --seed $$seed --sessions 50 --turns 5 --actor-crash-rate $$rate --fault-profile heavy || exit 1; \
	done; done
	for seed in 21 22 23; do \
		$(BIN)/turnkeep chaos --seed $$seed --sessions 80 --turns 6 --actor-crash-rate 0.06 --fault-profile heavy || exit 1; \
	done
	for seed in 1 2 3; do \
		$(BIN)/turnkeep chaos --seed $$seed --sessions 20 --turns 10 --kill-host-every 0.5 --host-kills 5 || exit 1; \
	done
	for seed in 1 2 3; do \
		$(BIN)/turnkeep chaos --seed $$seed --sessions 30 --turns 4 --actor-crash-rate 0.05 --subagents || exit 1; \
	done
	ACP_LOAD_RUNS=3 $(BIN)/python -m pytest -q tests/shell/acp/test_load.py

clean:
	rm -rf $(VENV) build *.egg-info
