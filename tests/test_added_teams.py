"""An adopter's repository: the examples replaced and deleted, an environment deleted, teams added
both ways the docs say, on two branches at once, merged; `make test`'s checks then pass there.

A copy of this checkout (its code and workflows; its stacks and bootstrap as shipped:
tests/data/shipped/, whatever teams this checkout has added already is not the experiment's
starting point) becomes a git repository whose first commit is the adopter's platform: the
example team stack deleted (team-vision-dev), the `prod` environment deleted with every edit
docs/development.md "Environments of your own" lists (stack file, the bootstrap's entry, its jobs
in both workflows, `make policy-data`), dev in the adopter's own GCP project (`make policy-data`
first refuses the bootstrap that still names acme's, with the key and no traceback), and the docs'
inline tenant example and one of their team stack examples added by hand (docs/teams.md "Add a
team"). From that commit, docs/teams.md "Two teams at once" runs as written: two branches, a team
each by `make team`, committed. They merge without a conflict, and then the tests that iterate
every committed stack (the new stacks' offline plans, the pack over each, CI deploying them), the
bootstrap's tests that follow the stacks' records, the freshness of the pack's data, the docs'
example tests, the tests of `make team` and every test of the workflows run there. Only that
subset: every other test runs on fixtures under tests/ (tests/shipped_stacks.py), and
`tests/checkout_reads.py` catches a test that reads this checkout's stack files and is not in it.
"""

from __future__ import annotations

import os
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
from docs_support import section, yaml_blocks
from shipped_stacks import SHIPPED_DIR, SHIPPED_STACKS, shipped_project

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
    # Every test of the workflows: they are the adopter's too (an environment's jobs).
    "tests/test_workflow.py",
    "tests/test_workflow_deploy.py",
    "tests/test_workflow_previews.py",
    "tests/test_upgrade_check.py::test_each_preview_job_gates_its_stack_after_the_preview",
    "tests/test_upgrade_check.py::test_the_ci_gate_refuses_an_undeclared_deletion_even_from_a_branch_that_weakens_it",
    "tests/test_bootstrap.py::test_actions_cannot_approve_pull_requests",
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
# What an adopter deletes: acme's team stack, and the prod environment (docs/development.md
# "Environments of your own"); dev stays, theirs, in their own project. The two teams docs/teams.md
# "Two teams at once" adds on two branches from the same commit, by branch.
DELETED = ("team-vision-dev", "prod")
DELETED_ENVIRONMENT = "prod"
OWN_PROJECT = "ours-ml-dev"
TEAMS = {"team-audio": "audio", "team-lidar": "lidar"}
COMMITTER = {"GIT_AUTHOR_NAME": "engineer", "GIT_AUTHOR_EMAIL": "engineer@example.com", "GIT_COMMITTER_NAME": "engineer", "GIT_COMMITTER_EMAIL": "engineer@example.com"}


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


def adopters_repository(project: Path) -> tuple[subprocess.CompletedProcess, str]:
    """The copy's stacks and bootstrap become the shipped ones but the deleted examples, prod deleted
    as documented, dev in the adopter's project, the docs' hand-added teams; committed as the
    adopter's `main`. Returns what `make policy-data` said while the bootstrap still named acme's
    project for dev, and the team stack added by hand."""
    for path in project.glob("Pulumi.*.yaml"):
        path.unlink()
    shipped_project(project, [s for s in SHIPPED_STACKS if s not in DELETED], bootstrap=True)
    delete_environment(project, DELETED_ENVIRONMENT)
    # An environment this checkout's workflows serve beyond the example's (yours): not in the copy.
    kept = {s for s in list_stacks(project) if not read_stack_values(project, s).get(f"{NS}:environmentStack")}
    for environment in set(yaml_io.load((project / ".github" / "workflows" / "pulumi.yml").read_text())["jobs"]["changes"]["outputs"]) - kept:
        delete_environment(project, environment)
    dev = project / "Pulumi.dev.yaml"
    dev.write_text(dev.read_text().replace("gcp:project: acme-ml-dev\n", f"gcp:project: {OWN_PROJECT}\n"))
    stale = subprocess.run([sys.executable, "-m", "tools.policy_data"], cwd=project, capture_output=True, text=True, timeout=300)
    bootstrap = project / "bootstrap" / "Pulumi.ci.yaml"
    bootstrap.write_text(bootstrap.read_text().replace("project: acme-ml-dev ", f"project: {OWN_PROJECT} "))
    stack = add_teams_as_readme_says(project)
    subprocess.run([sys.executable, "-m", "tools.policy_data"], cwd=project, check=True, capture_output=True, timeout=300)
    git(project, "init", "--quiet", "--initial-branch=main")
    git(project, "add", "--all")
    git(project, "-c", "user.name=adopter", "-c", "user.email=adopter@example.com", "commit", "--quiet", "-m", "our platform: the examples deleted")
    return stale, stack


def _without_block(text: str, start: str, indent: str) -> str:
    """`text` without the block whose first line is `start`, up to the next line indented `indent`
    or less (the next key or entry of the same mapping or list); unchanged when it has none."""
    lines = text.splitlines(keepends=True)
    if start not in lines:
        return text
    first = lines.index(start)
    end = next((i for i in range(first + 1, len(lines)) if lines[i].strip() and len(lines[i]) - len(lines[i].lstrip()) <= len(indent)), len(lines))
    return "".join(lines[:first] + lines[end:])


def delete_environment(project: Path, environment: str) -> None:
    """docs/development.md "Environments of your own", To delete, steps 1 to 4, as an adopter edits
    the files by hand (its text, comments kept): the stack files, the bootstrap's entry, the two
    jobs of pulumi.yml with the changes job's output and group and the gates job's need and entry,
    the drift matrix entry; each edit only where this checkout's files still have what it deletes."""
    for stack in list_stacks(project):
        values = read_stack_values(project, stack)
        if stack == environment or str(values.get(f"{NS}:environmentStack") or "").endswith(f"/{environment}"):
            (project / f"Pulumi.{stack}.yaml").unlink()
    bootstrap = project / "bootstrap" / "Pulumi.ci.yaml"
    bootstrap.write_text(_without_block(bootstrap.read_text(), f"    - name: {environment}\n", "    "))
    path = project / ".github" / "workflows" / "pulumi.yml"
    workflow = yaml_io.load(path.read_text())
    jobs = workflow["jobs"]
    deleted = [
        name
        for name, job in jobs.items()
        if (job.get("strategy") or {}).get("matrix", {}).get("stack") == f"${{{{ fromJSON(needs.changes.outputs.{environment}) }}}}"
        or any(re.search(rf"\btools\.deploy {re.escape(environment)}\b", str(s.get("run", ""))) for s in job.get("steps") or [])
    ]
    text = path.read_text()
    for name in deleted:
        text = _without_block(text, f"  {name}:\n", "  ")
        text = re.sub(r"(?m)^(    needs: )\[(.*)\]$", lambda m: m.group(1) + "[" + (", ".join(n for n in m.group(2).split(", ") if n != name) or "test") + "]", text)
        text = re.sub(rf'(, "{re.escape(name)}": "{environment}"|"{re.escape(name)}": "{environment}", )', "", text)
    text = text.replace(f"      {environment}: ${{{{ steps.changes.outputs.{environment} }}}}\n", "")
    text = re.sub(rf'(, "{environment}": \[\]|"{environment}": \[\], )', "", text)
    path.write_text(text)
    drift = project / ".github" / "workflows" / "drift.yml"
    drift.write_text(_without_block(drift.read_text(), f"          - stack: {environment}\n", "          "))


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
    return stack


def two_teams_at_once() -> str:
    """docs/teams.md "Two teams at once": its commands, as written."""
    [block] = re.findall(r"```sh\n(.*?)```", section("Two teams at once"), flags=re.S)
    return block


def run_as_written(project: Path, commands: str) -> subprocess.CompletedProcess:
    """`commands` run by bash in the copy, `make` the project's Makefile with this interpreter as its
    .venv's (MAKEFLAGS: make takes variables there as from its command line; the recipe is
    unchanged) and a committer for git. Not through a terminal: this runs in a thread beside the
    suite, whose output is the suite's."""
    bin_dir = project.parent / "python-bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (bin_dir / "python").chmod(0o755)
    runtime, installed = project.parent / "installed-runtime", project.parent / "installed"
    for stamp in (runtime, installed):
        stamp.write_text("")  # newer than the requirement files: nothing to install
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("MAKE", "GIT_"))},
        **COMMITTER,
        "MAKEFLAGS": f"BIN={bin_dir} RUNTIME_STAMP={runtime} STAMP={installed}",
    }
    return subprocess.run(["bash", "-euo", "pipefail", "-c", commands], cwd=project, env=env, capture_output=True, text=True, timeout=600)


# Where tests/conftest.py keeps the run it started as soon as the suite was collected.
COPY_RUN = pytest.StashKey["StartedCopyRun"]()


@dataclass
class CopyRun:
    """The adopter's repository with both branches merged, and the run of `make test`'s checks
    there (a process of its own, which the rest of the suite need not wait for)."""

    project: Path
    stack: str  # the team stack added by hand
    stale: subprocess.CompletedProcess  # `make policy-data` with the bootstrap naming acme's project for dev
    commands: subprocess.CompletedProcess  # docs/teams.md "Two teams at once", as written
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
    stale, stack = adopters_repository(project)
    commands = run_as_written(project, two_teams_at_once())
    if commands.returncode != 0:
        raise AssertionError(f"docs/teams.md \"Two teams at once\" failed as written:\n{commands.stdout}{commands.stderr}")
    changed = {branch: git(project, "diff", "--name-only", "main", branch).split() for branch in TEAMS}
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
    return CopyRun(project, stack, stale, commands, changed, merge, process, output)


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
    it): prod deleted and teams added by hand on main, then two branches from the same commit, each
    with what `make team` wrote, committed as docs/teams.md says, merge without a conflict into
    stacks that all plan and pass the tests `make test` runs on every committed stack and on the
    workflows; and every test of this suite that read this checkout's own stack files is among those
    (tests/checkout_reads.py)."""
    started = request.config.stash.get(COPY_RUN, None)
    if started is not None:
        run = started.get()
    else:  # the suite was collected without this hook's help
        run = start_copy_run(tmp_path)
        request.addfinalizer(run.stop)
    project, stack = run.project, run.stack
    kept = [s for s in SHIPPED_STACKS if s not in DELETED]
    assert list_stacks(project) == sorted([stack, *kept, *(f"team-{name}-dev" for name in TEAMS.values())])
    # `make policy-data` with a bootstrap entry that still names acme's project: the key and why, no traceback.
    assert run.stale.returncode == 1 and "Traceback" not in run.stale.stdout + run.stale.stderr
    assert run.stale.stderr.startswith("error: bootstrap configuration:\n  environments[0].project: 'acme-ml-dev' is not the project of its stack dev ('ours-ml-dev'")
    assert run.stale.stderr.endswith("\nnothing was written\n")
    # Each branch touched files of its own, as the docs' commits add them: its stack and its record.
    for branch, name in TEAMS.items():
        assert run.changed[branch] == [f"Pulumi.team-{name}-dev.yaml", f"policy/stacks/team-{name}-dev.json"], branch
        assert f"pulumi stack init acme/team-{name}-dev\n       make policy-publish\n       cd bootstrap && pulumi up" in run.commands.stdout
    assert "CONFLICT" not in run.merge and git(project, "status", "--porcelain") == ""
    tenants = {name: read_stack_values(project, f"team-{name}-dev")[f"{NS}:tenant"] for name in TEAMS.values()}
    assert tenants["audio"]["gpuPools"] == [{"gpu": "nvidia-tesla-t4", "maxGpus": 1}] and tenants["audio"]["gcpProject"] == f"{OWN_PROJECT}-audio"
    assert tenants["audio"]["network"] != tenants["lidar"]["network"]  # two branches, two ranges from two names
    # prod is gone from everything the docs list: the bootstrap's entries, both workflows' jobs, the
    # changes job's outputs, the drift matrix, its record.
    bootstrap = yaml_io.load((project / "bootstrap" / "Pulumi.ci.yaml").read_text())["config"]["gpu-platform-bootstrap:environments"]
    workflow = yaml_io.load((project / ".github" / "workflows" / "pulumi.yml").read_text())
    drift = yaml_io.load((project / ".github" / "workflows" / "drift.yml").read_text())
    assert [e["name"] for e in bootstrap] == ["dev"] and sorted(workflow["jobs"]["changes"]["outputs"]) == ["dev"]
    assert [name for name, job in workflow["jobs"].items() if re.search(r"outputs\.prod\b|_PROD\b|tools\.deploy prod\b", yaml_io.dump(job))] == []
    gates = workflow["jobs"]["gates"]
    assert gates["needs"] == ["test", "changes", "preview"] and '"preview-prod"' not in gates["steps"][0]["run"]
    assert [e["stack"] for e in drift["jobs"]["drift"]["strategy"]["matrix"]["include"]] == ["dev"]
    assert not (project / "policy" / "stacks" / "prod.json").exists()

    code, output = run.wait()
    assert code == 0, output[-6000:]
    # The stack-iterating tests saw the new stacks; nothing was skipped.
    for added in (stack, *(f"team-{name}-dev" for name in TEAMS.values())):
        assert f"PASSED {SUBSET[0]}[{added}]" in output, added
    for deleted in DELETED:
        assert f"PASSED {SUBSET[0]}[{deleted}]" not in output
    assert "PASSED tests/test_workflow_deploy.py::test_each_deploy_job_gates_and_deploys_its_environment_then_every_committed_team_stack_of_it[up-dev-dev]" in output
    assert "test_each_deploy_job_gates_and_deploys_its_environment_then_every_committed_team_stack_of_it[up-prod-prod]" not in output
    assert " skipped" not in output.strip().splitlines()[-1], output.strip().splitlines()[-1]
    # Every test here that read this checkout's own stack files ran there too.
    assert checkout_reads.unchecked(SUBSET) == {}


def test_the_docs_list_every_edit_the_copy_makes_to_delete_an_environment():
    """docs/development.md "Environments of your own" names each file and place `delete_environment`
    edits, in the words an adopter searches for."""
    text = " ".join(section("Environments of your own").split())
    for named in (
        "`git rm Pulumi.<env>.yaml`", "`gpu-platform:environmentStack`", "`bootstrap/Pulumi.ci.yaml`", "`- name: <env>`",
        "`.github/workflows/pulumi.yml`", "`needs.changes.outputs.<env>`", "`tools.deploy <env>`",
        "`<env>: ${{ steps.changes.outputs.<env> }}`", "`\"<env>\": []`", "`gates`", "`previews = {…}`", "needs `test` instead",
        "`.github/workflows/drift.yml`", "`- stack: <env>`", "`make policy-data`",
    ):
        assert named in text, named


def test_the_shipped_stacks_are_a_project_of_their_own():
    """tests/data/shipped/ holds exactly the stacks the tests name, beside this project's Pulumi.yaml."""
    assert list_stacks(SHIPPED_DIR) == sorted(SHIPPED_STACKS)
    assert (SHIPPED_DIR / "Pulumi.yaml").resolve() == (PROJECT_DIR / "Pulumi.yaml").resolve()
