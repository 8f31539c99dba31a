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
