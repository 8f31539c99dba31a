"""Shared fixtures: the committed stack files, and their programs evaluated once per session."""

from __future__ import annotations

import copy

import pytest

from config.stack_files import PROJECT_DIR, read_stack_values
from tools.mock_engine import run_program

# The environment stack the committed team stack references.
ENV_STACK_REF = read_stack_values(PROJECT_DIR, "team-vision-dev")["gpu-platform:environmentStack"]


@pytest.fixture(scope="session")
def env_stack_ref() -> str:
    return ENV_STACK_REF


@pytest.fixture
def stack_values():
    """A fresh, mutable copy of a committed stack's configuration."""
    return lambda stack: copy.deepcopy(read_stack_values(PROJECT_DIR, stack))


@pytest.fixture(scope="session")
def dev_run():
    return run_program(read_stack_values(PROJECT_DIR, "dev"), stack="dev")


@pytest.fixture(scope="session")
def prod_run():
    return run_program(read_stack_values(PROJECT_DIR, "prod"), stack="prod")


@pytest.fixture(scope="session")
def tenant_run(dev_run):
    return run_program(
        read_stack_values(PROJECT_DIR, "team-vision-dev"),
        stack="team-vision-dev",
        stack_outputs={ENV_STACK_REF: dev_run.outputs},
    )


@pytest.fixture(scope="session")
def legacy_dev_run():
    """dev in the opt-in legacy mode (the official infrastructure template and its broad role)."""
    values = copy.deepcopy(read_stack_values(PROJECT_DIR, "dev"))
    values["gpu-platform:nodeProvider"]["legacyInfrastructure"] = True
    return run_program(values, stack="dev")


@pytest.fixture(scope="session")
def bootstrap_run():
    """The CI bootstrap (bootstrap/), evaluated from its committed stack file."""
    bootstrap = PROJECT_DIR / "bootstrap"
    return run_program(read_stack_values(bootstrap, "ci"), stack="ci", main=bootstrap / "__main__.py", project="gpu-platform-bootstrap")


@pytest.fixture(scope="session")
def runs(dev_run, prod_run, tenant_run):
    """Every committed stack file's run, by stack name."""
    return {"dev": dev_run, "prod": prod_run, "team-vision-dev": tenant_run}
