# Everything runs in .venv, created on first use from the pinned requirements.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
STACK  ?= dev

.PHONY: venv test plan plan-all bench constraints policy-data clean

$(STAMP): requirements.txt constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements.txt -c constraints.txt
	touch $(STAMP)

venv: $(STAMP)

## Unit tests, policy tests and the offline plan of every committed stack file.
test: $(STAMP)
	$(BIN)/python -m pytest
	$(BIN)/python -m tools.plan --all --quiet

## Offline plan of one stack: make plan STACK=prod
plan: $(STAMP)
	$(BIN)/python -m tools.plan --stack $(STACK)

plan-all: $(STAMP)
	$(BIN)/python -m tools.plan --all

## Benchmarks (numbers go to README.md "Performance").
bench: $(STAMP)
	$(BIN)/python -m bench.run

constraints: $(STAMP)
	{ echo "# Transitive dependencies, pinned so a fresh clone installs exactly what was tested."; \
	  echo "# Regenerate after changing requirements.txt: make constraints"; \
	  $(BIN)/python -m pip freeze --exclude-editable; } > constraints.txt

## The policy pack's copy of the program's data (policy/program_data.json); a test fails when stale.
policy-data: $(STAMP)
	$(BIN)/python -m tools.policy_data

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis plan-out
