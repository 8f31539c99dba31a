"""docs/teams.md "Add a team", followed to the letter, and `make team`, keep the product's own tests green.

A copy of this checkout, its stacks and bootstrap as shipped (tests/data/shipped/: whatever teams
this checkout has added already, the docs' examples among them, are not the experiment's starting
point), gets the docs' inline tenant example (appended to dev's `tenants`) and one of their team
stack examples (saved under the name the docs give it), the new stack and the teams' existing
projects listed for CI in `bootstrap/Pulumi.ci.yaml` as the docs say, and one more team by `make
team`; then the tests that iterate every committed stack (CI deploys the new team stack after dev
among them), the bootstrap's tests that follow its list, the docs' example tests and the tests of
`make team`, which used to fail when a team was added, run there. Only that subset: each of them
is in the full suite here already.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from config import yaml_io
from config.stack_files import PROJECT_DIR, list_stacks, read_stack_values
from docs_support import yaml_blocks
from shipped_stacks import SHIPPED_DIR, SHIPPED_STACKS, shipped_project
from tools import new_team
from tools.new_team import bootstrap_with

NS = "gpu-platform"
NOT_COPIED = shutil.ignore_patterns(".venv", ".git", "__pycache__", ".hypothesis", ".pytest_cache", "plan-out", "acceptance-out")

# The tests of every committed stack, and the docs' example tests, which used to fail when the docs
# were followed. (The other tests of exact values that failed then, such as dev's quota table, run on the
# shipped stacks alone now, whatever this checkout holds, so running them there would prove nothing.)
SUBSET = [
    "tests/test_policies.py::test_pack_passes_every_committed_stack",
    "tests/test_plan.py::test_every_committed_stack_plans_environment_stacks_first",
    "tests/test_workflow.py::test_every_committed_stack_is_previewed_when_the_code_changes",
    "tests/test_workflow.py::test_each_deploy_job_deploys_its_environment_then_every_committed_team_stack_of_it",
    "tests/test_readme.py::test_stack_file_examples_work_as_new_stacks",
    "tests/test_readme.py::test_stack_value_examples_fit_every_environment_stack",
]
# The bootstrap after the docs' edit of it: every committed stack and existing team project listed
# for CI, the teams' stack permissions and the policy group follow the list, the pack (its data
# regenerated) still passes the bootstrap.
# After `make team`: the pack's data regenerated from the edited bootstrap; and the tests of
# `make team` itself, which start from the stacks and bootstrap as shipped whatever teams the
# checkout has added (by hand and by `make team`, as here).
SUBSET += ["tests/test_policy_pack.py::test_program_data_is_fresh", "tests/test_new_team.py"]
SUBSET += [
    f"tests/test_bootstrap.py::{test}"
    for test in (
        "test_every_committed_stack_gets_what_it_needs_from_the_bootstrap",
        "test_team_stack_permissions",
        "test_the_policy_group_enforces_the_committed_pack_on_every_stack",
        "test_every_environment_gets_its_own_identities_on_its_own_project",
        "test_the_bootstrap_stack_passes_the_policy_pack",
    )
]


def readme_examples() -> tuple[list[dict], list[tuple[str, str]]]:
    """The docs' inline tenants (the `gpu-platform:tenants` example) and their team stack examples
    (`Pulumi.<stack>.yaml` and its text), as a user pastes them."""
    inline, stack_files = [], []
    for name, text in yaml_blocks():
        document = yaml.safe_load(text)
        if isinstance(document, dict) and f"{NS}:tenants" in document:
            inline += document[f"{NS}:tenants"]
        elif isinstance(document, dict) and "config" in document and name:
            stack_files.append((re.fullmatch(r"Pulumi\.([a-z0-9-]+)\.yaml", name).group(1), text))  # type: ignore[union-attr]
    return inline, stack_files


def test_readme_offers_both_ways_to_add_a_team():
    inline, stack_files = readme_examples()
    assert inline and stack_files


def as_shipped(project: Path) -> None:
    """The copy's stacks and bootstrap become the shipped ones (the bootstrap listing exactly them)."""
    for path in project.glob("Pulumi.*.yaml"):
        path.unlink()
    shipped_project(project, bootstrap=True)


def list_for_ci(project: Path, stack: str) -> None:
    """CI previews and deploys only the stacks the bootstrap grants its identities access to, and
    builds tenants only in the existing team projects it lists in `teamProjects`: added to those
    one-line lists of the stack's environment, the rest of the file as it was (as an editor would)."""
    ci = project / "bootstrap" / "Pulumi.ci.yaml"
    values = read_stack_values(project, stack)
    environment = values[f"{NS}:environment"]
    tenants = [values.get(f"{NS}:tenant"), *(values.get(f"{NS}:tenants") or [])]
    projects = [p for p in (t.get("gcpProject") for t in tenants if t) if isinstance(p, str)] or [None]
    for project_id in projects:
        ci.write_text(bootstrap_with(ci.read_text(), environment, stack, project_id))


def add_teams_as_readme_says(project: Path) -> str:
    """Both of the docs' ways at once: their inline tenant in dev, and a team stack of another team
    (the two "Add a team" examples are the same team, robotics, so the zones example's maps).
    Returns the new stack's name."""
    inline, stack_files = readme_examples()
    names = {t["name"] for t in inline}
    stack, text = next((s, t) for s, t in stack_files if yaml_io.load(t)["config"][f"{NS}:tenant"]["name"] not in names)
    (project / f"Pulumi.{stack}.yaml").write_text(text)

    dev = project / "Pulumi.dev.yaml"
    document = yaml.safe_load(dev.read_text())
    document["config"][f"{NS}:tenants"] += inline
    dev.write_text(yaml.safe_dump(document, sort_keys=False))
    list_for_ci(project, "dev")
    list_for_ci(project, stack)
    # `make policy-data` after the edit of the bootstrap: the test's `make team` that follows runs it
    # (the same command) on the bootstrap with both edits, and the subset checks the result.
    return stack


TEAM = "team-audio-dev"
# `make team NAME=audio ENV=dev GPU=nvidia-l4 MAX_GPUS=4` (tests/test_new_team.py checks the
# Makefile's arguments and the tool's command line).
# Where tests/conftest.py keeps the run it started as soon as the suite was collected.
COPY_RUN = pytest.StashKey["StartedCopyRun"]()


@dataclass
class CopyRun:
    """The copy with both ways of adding a team applied, and the run of `make test`'s checks there
    (a process of its own, which the rest of the suite need not wait for)."""

    project: Path
    stack: str  # the team stack added by hand
    version: str  # the pack's version before `make team`
    added: str  # what `make team` printed
    process: subprocess.Popen
    output: Path

    def wait(self) -> tuple[int, str]:
        code = self.process.wait(timeout=600)
        return code, self.output.read_text()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def start_copy_run(directory: Path) -> CopyRun:
    project = directory / "repo"
    shutil.copytree(PROJECT_DIR, project, ignore=NOT_COPIED, symlinks=True)
    as_shipped(project)
    stack = add_teams_as_readme_says(project)
    version = yaml.safe_load((project / "policy" / "PulumiPolicy.yaml").read_text())["version"]
    # What `make team NAME=audio ENV=dev GPU=nvidia-l4 MAX_GPUS=4` does (its argument parsing aside), on the copy;
    # its `make policy-data` runs in the copy's own checkout. Not through `main`, which prints: this
    # may run in a thread beside the suite, whose output is the suite's.
    team = new_team.plan_team("audio", "dev", gpu="nvidia-l4", max_gpus=4, project=None, project_dir=project)
    printed = new_team.next_steps(team, new_team.add_team(team, project))
    output = directory / "checks.txt"
    with output.open("w") as out:
        process = subprocess.Popen(
            # The pack's check of the shipped stacks is the full suite's business, not this one's.
            [sys.executable, "-m", "pytest", "-o", "addopts=", "-p", "no:cacheprovider", "--disable-plugin-autoload", "-q", "-rA", "-k", "not shipped", *SUBSET],
            cwd=project,
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
        )
    return CopyRun(project, stack, version, printed, process, output)


class StartedCopyRun:
    """`start_copy_run` in a thread of its own, from the moment the suite is collected."""

    def __init__(self, directory: Path):
        self._run: CopyRun | None = None
        self._error: BaseException | None = None
        self._stopped = False
        self._thread = threading.Thread(target=self._start, args=(directory,), daemon=True)
        self._thread.start()

    def _start(self, directory: Path) -> None:
        try:
            self._run = start_copy_run(directory)
            if self._stopped:
                self._run.stop()
        except BaseException as e:  # noqa: BLE001 - raised again in the test that waits for it
            self._error = e

    def get(self) -> CopyRun:
        self._thread.join(timeout=600)
        if self._error is not None:
            raise self._error
        assert self._run is not None, "the copy was not ready within 10 minutes"
        return self._run

    def stop(self) -> None:
        self._stopped = True
        self._thread.join(timeout=600)
        if self._run is not None:
            self._run.stop()


def test_the_tests_pass_after_adding_teams_as_the_docs_say_and_with_make_team(request, tmp_path):
    """Both ways at once, in one copy (one run of the subset for both): the docs' manual path, and
    `make team` (tools/new_team.py, as the Makefile runs it) for one more team, after which the
    tests `make test` runs on every committed stack pass, the new stacks' offline plans among them.
    The copy's checks start when the suite has been collected (tests/conftest.py), beside it."""
    started = request.config.stash.get(COPY_RUN, None)
    if started is not None:
        run = started.get()
    else:  # the suite was collected without this hook's help
        run = start_copy_run(tmp_path)
        request.addfinalizer(run.stop)
    project, stack = run.project, run.stack
    assert list_stacks(project) == sorted([stack, TEAM, *SHIPPED_STACKS])
    assert len(read_stack_values(project, "dev")[f"{NS}:tenants"]) == 2 + len(readme_examples()[0])  # shipped nlp, speech
    tenant = read_stack_values(project, TEAM)[f"{NS}:tenant"]
    assert tenant["gpuPools"] == [{"gpu": "nvidia-l4", "maxGpus": 4}] and tenant["gcpProject"] == "acme-ml-dev-audio"
    [entry] = [e for e in yaml_io.load((project / "bootstrap" / "Pulumi.ci.yaml").read_text())["config"]["gpu-platform-bootstrap:environments"] if e["name"] == "dev"]
    assert TEAM in entry["stacks"] and "acme-ml-dev-audio" in entry["teamProjects"]
    bumped = yaml.safe_load((project / "policy" / "PulumiPolicy.yaml").read_text())["version"]
    assert bumped != run.version and f"version {run.version} → {bumped}" in run.added
    assert f"pulumi stack init acme/{TEAM}" in run.added and "One pull request, with Pulumi.team-audio-dev.yaml, bootstrap/Pulumi.ci.yaml" in run.added

    code, output = run.wait()
    assert code == 0, output[-6000:]
    # The stack-iterating tests saw the new stacks; nothing was skipped.
    assert f"PASSED {SUBSET[0]}[{stack}]" in output and f"PASSED {SUBSET[0]}[{TEAM}]" in output
    assert "PASSED tests/test_workflow.py::test_each_deploy_job_deploys_its_environment_then_every_committed_team_stack_of_it[up-dev-dev]" in output
    # `make team`'s tests, in a checkout that has added teams: its bootstrap edit starts from the shipped one.
    assert "PASSED tests/test_new_team.py::test_the_bootstrap_edit_keeps_the_file_and_adds_each_entry_once" in output
    assert " skipped" not in output.strip().splitlines()[-1], output.strip().splitlines()[-1]


def test_the_shipped_stacks_are_a_project_of_their_own():
    """tests/data/shipped/ holds exactly the stacks the tests name, beside this project's Pulumi.yaml."""
    assert list_stacks(SHIPPED_DIR) == sorted(SHIPPED_STACKS)
    assert (SHIPPED_DIR / "Pulumi.yaml").resolve() == (PROJECT_DIR / "Pulumi.yaml").resolve()
