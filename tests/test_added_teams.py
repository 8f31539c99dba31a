"""An adopter's repository: the examples replaced and deleted, teams added both ways the docs say, on
two branches at once, merged; `make test`'s checks then pass there.

A copy of this checkout (its code; its stacks as shipped: tests/data/shipped/, whatever teams this
checkout has added already is not the experiment's starting point) becomes a git repository whose
first commit deletes the example team stack (team-vision-dev, with its record: what `make
policy-data` would write). From that commit, two branches: one adds the docs' inline tenant
example to dev and one of their team stack examples by hand (docs/teams.md "Add a team", `make
policy-data`) and a team by `make team`; the other a team by `make team` only. They merge without a
conflict, and then the tests that iterate every committed stack (the new stacks' offline plans, the
pack over each, CI deploying them), the bootstrap's tests that follow the stacks' records, the
freshness of the pack's data, the docs' example tests and the tests of `make team` run there.
Only that subset: every other test runs on fixtures under tests/ (tests/shipped_stacks.py), and
`tests/checkout_reads.py` catches a test that reads this checkout's stack files and is not in it.
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

import checkout_reads
from config import yaml_io
from config.stack_files import PROJECT_DIR, list_stacks, read_stack_values
from docs_support import yaml_blocks
from shipped_stacks import SHIPPED_DIR, SHIPPED_STACKS, checkout_is_as_shipped, shipped_project
from tools import new_team

NS = "gpu-platform"
NOT_COPIED = shutil.ignore_patterns(".venv", ".git", "__pycache__", ".hypothesis", ".pytest_cache", "plan-out", "acceptance-out")

# The tests that hold for any stack files (every committed stack plans, passes the pack, served as
# published too, CI previews and deploys it), the docs' example tests, which used to fail when the
# docs were followed, the pack's data fresh after the merge, the bootstrap covering every stack from
# its record, and `make team`'s own tests (they start from the stacks as shipped, whatever the
# checkout holds).
SUBSET = [
    "tests/test_policies.py::test_pack_passes_every_committed_stack",
    "tests/test_guardrails_exact.py::test_the_committed_stacks_pass_the_pack_served_from_a_copy_of_policy_alone",
    "tests/test_plan.py::test_every_committed_stack_plans_environment_stacks_first",
    "tests/test_workflow.py::test_every_committed_stack_is_previewed_when_the_code_changes",
    "tests/test_workflow.py::test_each_deploy_job_gates_and_deploys_its_environment_then_every_committed_team_stack_of_it",
    "tests/test_workflow.py::test_every_committed_team_stack_is_deployed_by_ci",
    "tests/test_workflow.py::test_drift_runs_on_a_schedule_for_every_environment_stack_with_the_read_only_identity",
    "tests/test_readme.py::test_stack_file_examples_work_as_new_stacks",
    "tests/test_readme.py::test_stack_value_examples_fit_every_environment_stack",
    "tests/test_policy_pack.py::test_program_data_is_fresh",
    "tests/test_policy_pack.py::test_each_stack_has_a_record_of_its_own",
    "tests/test_policy_pack.py::test_freshness_check_fails_on_a_stale_file_a_missing_record_and_a_record_of_no_stack",
    "tests/test_new_team.py",
    "tests/test_bootstrap.py::test_every_committed_stack_gets_what_it_needs_from_the_bootstrap",
    "tests/test_bootstrap.py::test_the_bootstrap_stack_passes_the_policy_pack",
    "tests/test_yaml_reader.py::test_every_committed_stack_file_and_the_bootstraps_read",
]
# The example an adopter deletes (acme's team stack: the environments stay, as theirs, edited on a
# branch below; deleting an environment stack means deleting its CI jobs too, which a test says)
# and the two teams `make team` adds on the two branches, from the same commit.
DELETED = ("team-vision-dev",)
TEAMS = {"team-audio": "audio", "team-lidar": "lidar"}


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


def git(project: Path, *args: str) -> str:
    result = subprocess.run(["git", "-C", str(project), *args], capture_output=True, text=True)
    assert result.returncode == 0, f"git {' '.join(args)}: {result.stdout}{result.stderr}"
    return result.stdout


def adopters_repository(project: Path) -> None:
    """The copy's stacks become the shipped ones but the deleted examples, with their records gone
    (each record depends on its own stack and environment only, and the pack's inventory keeps the
    runs of the stacks as shipped: tools/policy_data.py), committed as the adopter's `main`."""
    for path in project.glob("Pulumi.*.yaml"):
        path.unlink()
    shipped_project(project, [s for s in SHIPPED_STACKS if s not in DELETED], bootstrap=True)
    records = project / "policy" / "stacks"
    if checkout_is_as_shipped():
        for path in records.glob("*.json"):
            if path.stem not in [s for s in SHIPPED_STACKS if s not in DELETED]:
                path.unlink()
    else:  # this checkout's records are not the shipped stacks': written for the copy's stacks
        subprocess.run([sys.executable, "-m", "tools.policy_data"], cwd=project, check=True, capture_output=True, timeout=300)
    git(project, "init", "--quiet", "--initial-branch=main")
    git(project, "add", "--all")
    git(project, "-c", "user.name=adopter", "-c", "user.email=adopter@example.com", "commit", "--quiet", "-m", "our platform: the examples deleted")


def add_teams_as_readme_says(project: Path) -> str:
    """Both of the docs' ways at once: their inline tenant in dev, and a team stack of another team
    (the two "Add a team" examples are the same team, robotics, so the zones example's maps).
    Returns the new stack's name. Its record follows with the `make team` that comes after."""
    inline, stack_files = readme_examples()
    names = {t["name"] for t in inline}
    stack, text = next((s, t) for s, t in stack_files if yaml_io.load(t)["config"][f"{NS}:tenant"]["name"] not in names)
    (project / f"Pulumi.{stack}.yaml").write_text(text)
    dev = project / "Pulumi.dev.yaml"
    document = yaml.safe_load(dev.read_text())
    document["config"][f"{NS}:tenants"] += inline
    dev.write_text(yaml.safe_dump(document, sort_keys=False))
    return stack


def make_team(project: Path, name: str) -> str:
    """What `make team NAME=<name> ENV=dev` does (its argument parsing aside; tests/test_new_team.py
    checks the Makefile's arguments and the command line), on the copy; its `make policy-data` runs
    in the copy's own checkout. Not through `main`, which prints: this runs in a thread beside the
    suite, whose output is the suite's. Returns what it printed."""
    team = new_team.plan_team(name, "dev", gpu="nvidia-l4" if name == "audio" else None, max_gpus=4 if name == "audio" else None, project=None, project_dir=project)
    return new_team.next_steps(team, new_team.add_team(team, project))


def commit_branch(project: Path, branch: str, message: str) -> None:
    git(project, "add", "--all")
    git(project, "-c", "user.name=engineer", "-c", "user.email=engineer@example.com", "commit", "--quiet", "-m", message)


# Where tests/conftest.py keeps the run it started as soon as the suite was collected.
COPY_RUN = pytest.StashKey["StartedCopyRun"]()


@dataclass
class CopyRun:
    """The adopter's repository with both branches merged, and the run of `make test`'s checks
    there (a process of its own, which the rest of the suite need not wait for)."""

    project: Path
    stack: str  # the team stack added by hand
    printed: dict[str, str]  # what each `make team` printed, by branch
    changed: dict[str, list[str]]  # the files each branch changed, by branch
    merge: str  # what `git merge` said
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
    adopters_repository(project)
    printed, changed = {}, {}
    stack = ""
    for branch, name in TEAMS.items():
        git(project, "switch", "--quiet", "--create", branch, "main")
        if branch == "team-audio":
            stack = add_teams_as_readme_says(project)
        printed[branch] = make_team(project, name)
        commit_branch(project, branch, f"team {name}")
        changed[branch] = git(project, "diff", "--name-only", "main", branch).split()
    git(project, "switch", "--quiet", "team-audio")
    merge = git(project, "-c", "user.name=lead", "-c", "user.email=lead@example.com", "merge", "--no-edit", "team-lidar")
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
    return CopyRun(project, stack, printed, changed, merge, process, output)


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
    """The adopter's repository (tests/conftest.py starts it when the suite has been collected, beside
    it): two branches from the same commit, each with what `make team` wrote (and one with the docs'
    manual way too), merge without a conflict into stacks that all plan and pass the tests `make
    test` runs on every committed stack; and every test of this suite that read this checkout's own
    stack files is among those (tests/checkout_reads.py)."""
    started = request.config.stash.get(COPY_RUN, None)
    if started is not None:
        run = started.get()
    else:  # the suite was collected without this hook's help
        run = start_copy_run(tmp_path)
        request.addfinalizer(run.stop)
    project, stack = run.project, run.stack
    kept = [s for s in SHIPPED_STACKS if s not in DELETED]
    assert list_stacks(project) == sorted([stack, *kept, *(f"team-{name}-dev" for name in TEAMS.values())])
    # Each `make team` branch touched files of its own: its stack and its record, nothing shared.
    assert run.changed["team-lidar"] == ["Pulumi.team-lidar-dev.yaml", "policy/stacks/team-lidar-dev.json"]
    assert set(run.changed["team-audio"]) == {"Pulumi.dev.yaml", f"Pulumi.{stack}.yaml", "Pulumi.team-audio-dev.yaml", "policy/stacks/dev.json", f"policy/stacks/{stack}.json", "policy/stacks/team-audio-dev.json"}
    assert "CONFLICT" not in run.merge and git(project, "status", "--porcelain") == ""
    tenants = {name: read_stack_values(project, f"team-{name}-dev")[f"{NS}:tenant"] for name in TEAMS.values()}
    assert tenants["audio"]["gpuPools"] == [{"gpu": "nvidia-l4", "maxGpus": 4}] and tenants["audio"]["gcpProject"] == "acme-ml-dev-audio"
    assert tenants["audio"]["network"] != tenants["lidar"]["network"]  # two branches, two ranges from two names
    for branch, name in TEAMS.items():
        assert f"pulumi stack init acme/team-{name}-dev\n       make policy-publish\n       cd bootstrap && pulumi up" in run.printed[branch]

    code, output = run.wait()
    assert code == 0, output[-6000:]
    # The stack-iterating tests saw the new stacks; nothing was skipped.
    for added in (stack, *(f"team-{name}-dev" for name in TEAMS.values())):
        assert f"PASSED {SUBSET[0]}[{added}]" in output, added
    assert f"PASSED {SUBSET[0]}[team-vision-dev]" not in output  # deleted
    assert "PASSED tests/test_workflow.py::test_each_deploy_job_gates_and_deploys_its_environment_then_every_committed_team_stack_of_it[up-dev-dev]" in output
    assert " skipped" not in output.strip().splitlines()[-1], output.strip().splitlines()[-1]
    # Every test here that read this checkout's own stack files ran there too.
    assert checkout_reads.unchecked(SUBSET) == {}


def test_the_shipped_stacks_are_a_project_of_their_own():
    """tests/data/shipped/ holds exactly the stacks the tests name, beside this project's Pulumi.yaml."""
    assert list_stacks(SHIPPED_DIR) == sorted(SHIPPED_STACKS)
    assert (SHIPPED_DIR / "Pulumi.yaml").resolve() == (PROJECT_DIR / "Pulumi.yaml").resolve()
