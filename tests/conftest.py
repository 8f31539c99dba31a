"""Shared fixtures: the stacks as shipped (tests/data/shipped/) and this checkout's stack files,
their programs evaluated once per session (see tests/shipped_stacks.py for which to use when)."""

from __future__ import annotations

import checkout_reads
import pytest

from config.stack_files import PROJECT_DIR, read_stack_values
from shipped_stacks import (
    SHIPPED_BOOTSTRAP,
    SHIPPED_DIR,
    bootstrap_is_as_shipped,
    checkout_is_as_shipped,
    committed_stacks,
    shipped_bootstrap_values,
    shipped_values,
)
from tools.mock_engine import ProgramRun, run_program

BOOTSTRAP_DIR = PROJECT_DIR / "bootstrap"

# The environment stack the shipped team stack references.
ENV_STACK_REF = read_stack_values(SHIPPED_DIR, "team-vision-dev")["gpu-platform:environmentStack"]


@pytest.fixture(scope="session")
def env_stack_ref() -> str:
    return ENV_STACK_REF


@pytest.fixture
def stack_values():
    """A fresh, mutable copy of a shipped stack's configuration."""
    return shipped_values


@pytest.fixture(scope="session")
def shipped_plans() -> dict:
    """Environment outputs shared by the shipped stacks' plans below (team stacks plan against them)."""
    return {}


def _shipped_run(stack: str, environments: dict) -> ProgramRun:
    """A shipped stack evaluated as its offline plan evaluates it (its program run): the tests that
    plan the shipped stacks (tests/test_plan.py, tests/test_readme.py) then reuse it."""
    from tools.plan import plan_stack

    return plan_stack(stack, SHIPPED_DIR, environment_cache=environments).run


@pytest.fixture(scope="session")
def dev_run(shipped_plans):
    return _shipped_run("dev", shipped_plans)


@pytest.fixture(scope="session")
def prod_run(shipped_plans):
    return _shipped_run("prod", shipped_plans)


@pytest.fixture(scope="session")
def tenant_run(dev_run, shipped_plans):
    """team-vision-dev with the outputs of dev's evaluation (dev_run), as `pulumi up` after dev."""
    return _shipped_run("team-vision-dev", shipped_plans)


# nlp's L4 pool in the shipped dev stack, and the same pool with one warm node.
NLP_L4_POOL = "- {gpu: nvidia-l4, maxGpus: 4, idleAfter: 60s}"
NLP_L4_WARM_POOL = "- {gpu: nvidia-l4, maxGpus: 4, idleAfter: 60s, warmNodes: 1}"


@pytest.fixture(scope="session")
def warm_plan(tmp_path_factory):
    """dev as shipped with one warm node in nlp's L4 pool (`warmNodes: 1`), planned offline once
    beside the other shipped stacks: `.run` is its program's run, which the tests of the rendered
    values and of the policy pack use too (no committed stack has warm nodes)."""
    import shutil

    from tools.plan import plan_stack

    project = tmp_path_factory.mktemp("warm-project")
    for path in SHIPPED_DIR.glob("Pulumi*.yaml"):
        shutil.copy(path, project / path.name)
    stack_file = project / "Pulumi.dev.yaml"
    text = stack_file.read_text()
    assert text.count(NLP_L4_POOL) == 1, "the shipped dev stack no longer has nlp's L4 pool as this fixture expects"
    stack_file.write_text(text.replace(NLP_L4_POOL, NLP_L4_WARM_POOL))
    return plan_stack("dev", project)


@pytest.fixture(scope="session")
def warm_run(warm_plan) -> ProgramRun:
    return warm_plan.run


@pytest.fixture(scope="session")
def legacy_dev_values() -> dict:
    """dev as shipped in the opt-in legacy mode (the official infrastructure template and its broad role)."""
    values = shipped_values("dev")
    values["gpu-platform:nodeProvider"]["legacyInfrastructure"] = True
    return values


@pytest.fixture(scope="session")
def legacy_dev_run(legacy_dev_values):
    return run_program(legacy_dev_values, stack="dev", project_dir=SHIPPED_DIR)


@pytest.fixture(scope="session")
def shipped_records_dir(runs, tmp_path_factory):
    """The records `make policy-data` writes for the stacks as shipped (policy/stacks/<stack>.json),
    in a directory of their own: what the bootstrap as shipped derives its stacks and team projects from."""
    import json

    from tools import policy_data

    directory = tmp_path_factory.mktemp("shipped-records")
    records = policy_data.stack_data(runs, {stack: shipped_values(stack) for stack in runs})
    for stack, record in records.items():
        (directory / f"{stack}.json").write_text(json.dumps(record, indent=2) + "\n")
    return directory


@pytest.fixture(scope="session")
def bootstrap_run(shipped_records_dir):
    """The CI bootstrap as shipped (tests/data/shipped/bootstrap/Pulumi.ci.yaml, beside the stacks as
    shipped and their records), evaluated: the bootstrap's tests of exact figures run on it, whatever
    this checkout's bootstrap/Pulumi.ci.yaml (the user's: `yours:`) and stacks hold."""
    from bootstrap_support import run_shipped_bootstrap

    return run_shipped_bootstrap(shipped_bootstrap_values(), shipped_records_dir)


@pytest.fixture(scope="session")
def committed_bootstrap_run(request):
    """This checkout's bootstrap (bootstrap/Pulumi.ci.yaml, with this checkout's records of
    policy/stacks/), as `make policy-data` and `pulumi up` in bootstrap/ evaluate it."""
    if checkout_is_as_shipped() and bootstrap_is_as_shipped():
        return request.getfixturevalue("bootstrap_run")
    return run_program(read_stack_values(BOOTSTRAP_DIR, "ci"), stack="ci", main=BOOTSTRAP_DIR / "__main__.py", project="gpu-platform-bootstrap")


@pytest.fixture(scope="session", autouse=True)
def pack_judges_the_shipped_stacks(request):
    """The pack's per-stack data (policy/stacks/) and its data of the bootstrap (program_data.json
    `bootstrap` and the bootstrap's `inventory`) are this checkout's; the tests that run the pack
    over the shipped stacks' and the shipped bootstrap's runs judge them by the shipped ones' own
    data. Nothing to do while the two are the same."""
    if checkout_is_as_shipped() and bootstrap_is_as_shipped():
        yield
        return
    from policy_support import pack_bootstrap, pack_stacks

    from tools import policy_data

    shipped = request.getfixturevalue("runs")
    values = {stack: shipped_values(stack) for stack in shipped}
    bootstrap = (policy_data.bootstrap_data(SHIPPED_BOOTSTRAP.parent), policy_data.bootstrap_inventory(request.getfixturevalue("bootstrap_run")))
    with pack_stacks(policy_data.stack_data(shipped, values)), pack_bootstrap(*bootstrap):
        yield


@pytest.fixture(scope="session")
def configured():
    """dev configured with every option whose resources the pack holds by value
    (tests/policy_support.py `configured_dev_values`): (its run, its stack file's values)."""
    from policy_support import configured_dev_values
    from shipped_stacks import run_shipped

    values = configured_dev_values()
    return run_shipped(values, stack="dev"), values


@pytest.fixture(scope="session")
def analyzer(configured, prod_run, tenant_run, tmp_path_factory):
    """A copy of policy/ alone, its records those of dev as configured, prod and the team stack as
    shipped, served as the CLI serves a pack (`python -m pulumi.policy`): a gRPC Analyzer stub."""
    from policy_support import published_pack, served_pack

    run, values = configured
    shipped = {stack: shipped_values(stack) for stack in ("prod", "team-vision-dev")}
    copied = published_pack(tmp_path_factory.mktemp("published"), {"dev": run, "prod": prod_run, "team-vision-dev": tenant_run}, {**shipped, "dev": values})
    with served_pack(copied, cwd=copied.parent) as stub:
        yield stub


@pytest.fixture(scope="session")
def runs(dev_run, prod_run, tenant_run):
    """Every shipped stack's run, by stack name."""
    return {"dev": dev_run, "prod": prod_run, "team-vision-dev": tenant_run}


@pytest.fixture(scope="session")
def committed_runs(request) -> dict[str, ProgramRun]:
    """Every stack file of this checkout, evaluated as `pulumi up` would (team stacks with their
    environment's outputs), by stack name. While the checkout's stacks are the shipped ones these
    are the shipped runs; stacks a user added or changed are evaluated here."""
    if checkout_is_as_shipped():
        return dict(request.getfixturevalue("runs"))
    from tools.plan import plan_stack

    # Through the offline plan (a team stack with its environment's outputs, as `pulumi up` after
    # it): the plan of every committed stack (tests/test_plan.py) is then not evaluated again.
    evaluated: dict[str, ProgramRun] = {}
    environments: dict = {}
    for stack in committed_stacks():
        try:
            evaluated[stack] = plan_stack(stack, PROJECT_DIR, environment_cache=environments).run
        except Exception as e:  # noqa: BLE001 - that stack's tests fail with it; the others still run
            evaluated[stack] = BrokenStack(stack, e)  # type: ignore[assignment]
    return evaluated


class BrokenStack:
    """A stack of this checkout that could not be evaluated: using its run raises why."""

    def __init__(self, stack: str, error: Exception):
        self.stack, self.error = stack, error

    def __getattr__(self, name: str):
        raise AssertionError(f"stack {self.stack} could not be evaluated: {self.error}") from self.error


ADDED_TEAMS = "test_added_teams.py::test_the_tests_pass_after_adding_teams_as_the_docs_say_and_with_make_team"

checkout_reads.install()


def pytest_assertrepr_compare(config, op, left, right):
    """A failing `==` of two large values (documents) prints its first differences at their paths,
    not both documents whole (tests/assertion_diff.py); small values and messages as pytest shows them."""
    from assertion_diff import explain, explain_in

    if op == "==":
        return explain(left, right)
    if op == "in":
        return explain_in(left, right)
    return None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Which test reads this checkout's own stack files (tests/checkout_reads.py), fixtures included."""
    checkout_reads.current = item.nodeid
    try:
        yield
    finally:
        checkout_reads.current = None


def pytest_collection_modifyitems(items):
    """The test that waits for the copy's checks (below) goes last, so the suite runs meanwhile."""
    waiting = [i for i in items if i.nodeid.endswith(ADDED_TEAMS)]
    items[:] = [i for i in items if i not in waiting] + waiting


def pytest_collection_finish(session):
    """tests/test_added_teams.py runs `make test`'s checks in a copy of the project, in a process of
    its own: started now (prepared in a thread: copying, `make team`), it runs beside the rest of
    the suite (this machine has two cores) instead of after it; the test, last, waits for it."""
    item = next((i for i in session.items if i.nodeid.endswith(ADDED_TEAMS)), None)
    if item is None:
        return
    import shutil
    import tempfile
    from pathlib import Path

    module = item.module
    directory = Path(tempfile.mkdtemp(prefix="gpu-platform-added-teams-"))
    session.config.add_cleanup(lambda: shutil.rmtree(directory, ignore_errors=True))
    started = module.StartedCopyRun(directory)
    session.config.add_cleanup(started.stop)
    session.config.stash[module.COPY_RUN] = started
