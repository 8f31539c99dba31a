# Everything runs in .venv, created on first use from the pinned requirements: `make venv` installs the
# program's runtime alone (requirements.txt, what `pulumi install` installs too: deploy machines and CI's
# preview and deploy jobs); every other target adds the checks and tools (requirements-dev.txt).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
RUNTIME_STAMP := $(VENV)/.installed-runtime
STAMP  := $(VENV)/.installed
STACK  ?= dev

# Every variable a recipe hands on reaches the program as data, never as code: through the
# environment, quoted in the shell ("$$X": `STACK='dev;id'` is a stack name, never a command), and
# as the text given on the command line or in the environment (`$(value X)`: make expands no
# `$(shell …)` in it); this Makefile's own defaults are expanded as usual.
data = $(if $(filter file,$(origin $(1))),$($(1)),$(value $(1)))
# make puts command-line variables into every recipe's environment, expanded: these reach the
# recipes as data below instead.
unexport STACK COMPARE POLICY_CONFIG ALLOW_DESTROY QUICK NAME ENV GPU MAX_GPUS TEAM_PROJECT CIDR ORG DRY_RUN

.PHONY: venv test plan plan-all bench constraints policy-data policy-publish docs verify-records team clean acceptance acceptance-cleanup

$(RUNTIME_STAMP): requirements.txt constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements.txt -c constraints.txt
	touch $(RUNTIME_STAMP)

$(STAMP): $(RUNTIME_STAMP) requirements-dev.txt
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt -c constraints.txt
	touch $(STAMP)

venv: $(RUNTIME_STAMP)

## Unit tests, policy tests and the offline plan of every committed stack file.
test: $(STAMP)
	$(BIN)/python -m pytest
	$(BIN)/python -m tools.plan --all --quiet

## Offline plan of one stack, the policy pack included (a mandatory violation fails it): make plan STACK=prod
## ... and what changed since a git ref: make plan STACK=dev COMPARE=origin/main
## ... with the pack's configuration (as pulumi preview --policy-pack-config): make plan POLICY_CONFIG=policy-config.json
## A plan that deletes or replaces a stateful resource (a tenant's cluster, a team project, the host cluster) fails
## unless declared: make plan STACK=dev ALLOW_DESTROY=tenant-nlp (docs/operations.md "Deletions and replacements").
## ALLOW_DESTROY reaches tools/plan.py as data like the others, in its environment variable ALLOW_DESTROY.
plan: export PLAN_STACK = $(call data,STACK)
plan: export PLAN_COMPARE = $(call data,COMPARE)
plan: export PLAN_POLICY_CONFIG = $(call data,POLICY_CONFIG)
plan: export PLAN_ALLOW_DESTROY = $(call data,ALLOW_DESTROY)
plan: $(STAMP)
	ALLOW_DESTROY="$$PLAN_ALLOW_DESTROY" $(BIN)/python -m tools.plan --stack "$$PLAN_STACK" $${PLAN_COMPARE:+--compare-to "$$PLAN_COMPARE"} $${PLAN_POLICY_CONFIG:+--policy-pack-config "$$PLAN_POLICY_CONFIG"}

plan-all: $(STAMP)
	$(BIN)/python -m tools.plan --all

## Acceptance test against a real GCP project (docs/acceptance.md "Acceptance test"): deploys an ephemeral
## environment with one tenant, checks a GPU node end to end, destroys everything. Costs money.
##   make acceptance PROJECT=<id> [TEAM_PROJECT=<id>] [REGION=us-central1] [ZONES=<region>-a,<region>-b] [GPU=nvidia-tesla-t4] [GPU_QUOTA=1]
##                   [WARM_NODES=0|1] [COMPARE=<an earlier run's report.json>] [RESTORE_DRILL=1] [WATCHDOG_DRILL=1]
##                   [STOCKOUT_DRILL=1] [FLEX_START=1] [RESERVATION=<name>]
## With TEAM_PROJECT (an existing project) the tenant runs in project mode there; without, shared.
## WARM_NODES=1 keeps the pool's node warm and measures a pod's wait on it; COMPARE prints both runs side by side.
## RESTORE_DRILL=1 also backs the tenant up, deletes its host namespace, restores it and checks it.
## WATCHDOG_DRILL=1 also makes a GPU node lose its GPU and checks that the GPU watchdog removes it.
## STOCKOUT_DRILL=1 makes the pool's first option fail and checks that the Job gets its node from the next.
## FLEX_START=1 / RESERVATION=<name> get the pool's node from Flex-start / that reservation of the tenant's project.
PROJECT          ?=
TEAM_PROJECT     ?=
ISOLATION        ?=
REGION           ?= us-central1
ZONES            ?= $(value REGION)-a,$(value REGION)-b
GPU              ?= nvidia-tesla-t4
GPU_QUOTA        ?= 1
GPUS_PER_NODE    ?= 1
BACKEND          ?=
IDLE_MARGIN      ?= 600
NODE_TIMEOUT     ?= 1200
RESTORE_DRILL    ?=
WATCHDOG_DRILL   ?=
STOCKOUT_DRILL   ?=
FLEX_START       ?=
RESERVATION      ?=
WARM_NODES       ?= 0
COMPARE          ?=
ACCEPTANCE_OUT   ?= acceptance-out
ACCEPTANCE_FLAGS ?=

# Passed through the environment, never pasted into the command line: the workflow's inputs end up
# in these variables, and the shell expands "$$VAR" without interpreting its value (`data` above).
# ACCEPTANCE_FLAGS is split into words (globbing off), never run.
ACCEPTANCE_VARIABLES := PROJECT TEAM_PROJECT ISOLATION REGION ZONES GPU GPU_QUOTA GPUS_PER_NODE BACKEND IDLE_MARGIN NODE_TIMEOUT \
  WARM_NODES COMPARE ACCEPTANCE_OUT RESTORE_DRILL WATCHDOG_DRILL STOCKOUT_DRILL FLEX_START RESERVATION ACCEPTANCE_FLAGS
unexport $(ACCEPTANCE_VARIABLES)
$(foreach v,$(ACCEPTANCE_VARIABLES),$(eval acceptance acceptance-cleanup: export ACCEPTANCE_$(v) = $$(call data,$(v))))

acceptance: $(STAMP)
	@set -f; $(BIN)/python -m tests.acceptance.run --project "$$ACCEPTANCE_PROJECT" --team-project "$$ACCEPTANCE_TEAM_PROJECT" \
	  --isolation "$$ACCEPTANCE_ISOLATION" --region "$$ACCEPTANCE_REGION" --zones "$$ACCEPTANCE_ZONES" \
	  --gpu "$$ACCEPTANCE_GPU" --gpu-quota "$$ACCEPTANCE_GPU_QUOTA" --gpus-per-node "$$ACCEPTANCE_GPUS_PER_NODE" --backend "$$ACCEPTANCE_BACKEND" \
	  --idle-margin "$$ACCEPTANCE_IDLE_MARGIN" --node-timeout "$$ACCEPTANCE_NODE_TIMEOUT" --warm-nodes "$$ACCEPTANCE_WARM_NODES" \
	  --compare "$$ACCEPTANCE_COMPARE" --out "$$ACCEPTANCE_ACCEPTANCE_OUT" --reservation "$$ACCEPTANCE_RESERVATION" \
	  $${ACCEPTANCE_RESTORE_DRILL:+--restore-drill} $${ACCEPTANCE_WATCHDOG_DRILL:+--watchdog-drill} \
	  $${ACCEPTANCE_STOCKOUT_DRILL:+--stockout-drill} $${ACCEPTANCE_FLEX_START:+--flex-start} $$ACCEPTANCE_ACCEPTANCE_FLAGS

## Destroy every recorded acceptance run that did not clean up after itself (a failed or cancelled run).
acceptance-cleanup: $(STAMP)
	@$(BIN)/python -m tests.acceptance.run --cleanup --out "$$ACCEPTANCE_ACCEPTANCE_OUT"

## Benchmarks (docs/development.md "Performance"): make bench QUICK=1 takes under a minute (best of 1,
## dev and 10 tenants: does everything run, rough figures); make bench about 11 minutes (best of 5,
## 1 to 100 tenants: the figures the docs report). Both print the docs' table for the run.
bench: $(STAMP)
	$(BIN)/python -m bench.run $(if $(call data,QUICK),--quick)

constraints: $(STAMP)
	{ echo "# Transitive dependencies, pinned so a fresh clone installs exactly what was tested."; \
	  echo "# Regenerate after changing requirements.txt: make constraints"; \
	  $(BIN)/python -m pip freeze --exclude-editable; } > constraints.txt

## Add a team, with everything make test expects (docs/teams.md "Add a team"):
##   make team NAME=robotics ENV=dev [GPU=nvidia-l4] [MAX_GPUS=4] [TEAM_PROJECT=<existing project id>] [CIDR=<cidr>]
## Only values given on the command line count (GPU and TEAM_PROJECT also mean something to `make acceptance`).
team: export TEAM_NAME = $(call data,NAME)
team: export TEAM_ENV = $(if $(filter command line,$(origin ENV)),$(call data,ENV))
team: export TEAM_GPU = $(call data,GPU)
team: export TEAM_MAX_GPUS = $(call data,MAX_GPUS)
team: export TEAM_EXISTING_PROJECT = $(call data,TEAM_PROJECT)
team: export TEAM_CIDR = $(call data,CIDR)
team: $(STAMP)
	@$(BIN)/python -m tools.new_team --name "$$TEAM_NAME" --env "$$TEAM_ENV" \
	  $(if $(filter command line,$(origin GPU)),--gpu "$$TEAM_GPU") $${TEAM_MAX_GPUS:+--max-gpus "$$TEAM_MAX_GPUS"} \
	  $(if $(filter command line,$(origin TEAM_PROJECT)),--project "$$TEAM_EXISTING_PROJECT") $${TEAM_CIDR:+--cidr "$$TEAM_CIDR"}

## The policy pack's copy of the program's data (policy/program_data.json); a test fails when stale.
policy-data: $(STAMP)
	$(BIN)/python -m tools.policy_data

## Publish the policy pack under the version its files give it, after checking the checkout may publish it
## (docs/guardrails.md "Publishing the pack"): make policy-publish [ORG=<your-org>] [DRY_RUN=1]
policy-publish: export PUBLISH_ORG = $(call data,ORG)
policy-publish: export PUBLISH_DRY_RUN = $(call data,DRY_RUN)
policy-publish: $(STAMP)
	$(BIN)/python -m tools.policy_publish --organization "$$PUBLISH_ORG" $${PUBLISH_DRY_RUN:+--dry-run}

## The configuration reference (docs/configuration.md) and Pulumi.yaml's descriptions, generated from
## the config models' docstrings; a test fails when either is stale.
docs: $(STAMP)
	$(BIN)/python -m tools.config_reference

## Check each GPU Operator chart record (config/charts/) against the upstream files it names, downloaded
## at their pinned commits (docs/development.md "Bumping the GPU Operator"). Needs network access.
verify-records: $(STAMP)
	$(BIN)/python -m tools.verify_chart_record

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis plan-out
