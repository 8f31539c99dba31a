"""`make team` (tools/new_team.py): what it refuses, with what is allowed and nothing written, and the
files it would write. Its happy path through the whole of `make test`'s checks is in
tests/test_added_teams.py (one copy and one run of those checks for both ways of adding a team)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from config.catalog import load_catalog
from config.stack import NS
from config.stack_files import PROJECT_DIR, read_stack_values
from shipped_stacks import SHIPPED_STACKS, shipped_project
from tools.new_team import BOOTSTRAP_STACK, main, plan_team, stack_text


@pytest.fixture
def project(tmp_path) -> Path:
    """The shipped stacks and the bootstrap as shipped: never this checkout's, where `make team`
    (as README says) has added teams of its own, `robotics` among them."""
    return shipped_project(tmp_path, bootstrap=True)


def files(directory: Path) -> dict[str, str]:
    return {str(p.relative_to(directory)): p.read_text() for p in sorted(directory.rglob("*")) if p.is_file()}


@pytest.mark.parametrize(
    "argv, error",
    [
        (["--name", "Robotics!", "--env", "dev"], "NAME='Robotics!' is not allowed; allowed: a DNS-1123 label (lowercase letters, digits and '-', starting with a letter) of at most 16 characters, not 'default' or 'platform'"),
        (["--name", "a-very-long-team-name", "--env", "dev"], "NAME='a-very-long-team-name' is not allowed; allowed: a DNS-1123 label"),
        (["--name", "default", "--env", "dev"], "NAME='default' is not allowed"),
        (["--name", "platform", "--env", "dev"], "NAME='platform' is not allowed"),
        (["--name", "vision", "--env", "dev"], "NAME='vision' is taken: Pulumi.team-vision-dev.yaml exists"),
        (["--name", "nlp", "--env", "dev"], "NAME='nlp' is taken in environment dev: tenants[0] of stack dev (Pulumi.dev.yaml) is a tenant of that name"),
        (["--name", "robotics", "--env", "qa"], "ENV='qa' is not an environment stack of this project; allowed: dev, prod"),
        (["--name", "robotics", "--env", "team-vision-dev"], "ENV='team-vision-dev' is not an environment stack of this project; allowed: dev, prod"),
        (["--name", "robotics", "--env", "dev", "--gpu", "nvidia-h100-80gb"], "GPU='nvidia-h100-80gb' is not offered by environment dev; allowed: nvidia-tesla-t4, nvidia-l4"),
        (["--name", "robotics", "--env", "dev", "--max-gpus", "0"], "MAX_GPUS=0 is not allowed; allowed: a multiple of 1 (the smallest nvidia-tesla-t4 shape), at least 1"),
        (
            ["--name", "robotics", "--env", "dev", "--cidr", "10.160.8.0/22"],
            "  - tenant.network.cidr: 10.160.8.0/22 overlaps tenant vision (stack team-vision-dev (Pulumi.team-vision-dev.yaml)) 10.160.8.0/22; try 10.160.12.0/22",
        ),
        (
            ["--name", "robotics", "--env", "dev", "--max-gpus", "16"],
            "  - tenant.gpuPools[0].maxGpus: 16 exceeds the environment's quota of 8 nvidia-tesla-t4 GPUs in europe-west4",
        ),
    ],
)
def test_a_team_that_cannot_be_added_gets_a_clear_error_and_nothing_is_written(project, capsys, argv, error):
    before = files(project)
    assert main(argv, project_dir=project) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and error in err and err.endswith("nothing was written\n")
    assert files(project) == before


def test_every_bad_argument_is_reported_at_once(project, capsys):
    """`make team NAME=Bad! ENV=staging GPU=x MAX_GPUS=0`: four arguments wrong, four problems, each
    named as its make variable with what is allowed; without an environment, GPU and MAX_GPUS are
    judged by what holds in every one."""
    before = files(project)
    assert main(["--name", "Bad!", "--env", "staging", "--gpu", "x", "--max-gpus", "0"], project_dir=project) == 1
    gpus = ", ".join(load_catalog().gpus)
    assert capsys.readouterr().err == (
        "error: 4 problems with the arguments:\n"
        "  - NAME='Bad!' is not allowed; allowed: a DNS-1123 label (lowercase letters, digits and '-', starting with a letter) of at most 16 characters, not 'default' or 'platform'\n"
        "  - ENV='staging' is not an environment stack of this project; allowed: dev, prod\n"
        f"  - GPU='x' is not a GPU type of config/catalog.yaml; allowed: {gpus}\n"
        "  - MAX_GPUS=0 is not allowed; allowed: at least 1, a multiple of the smallest shape of GPU in ENV\n"
        "nothing was written\n"
    )
    assert files(project) == before


def test_with_a_known_environment_each_argument_is_judged_by_it_and_all_are_reported(project, capsys):
    before = files(project)
    assert main(["--name", "nlp", "--env", "dev", "--gpu", "nvidia-h100-80gb", "--max-gpus", "0", "--cidr", "10.160.40.1/22"], project_dir=project) == 1
    assert capsys.readouterr().err == (
        "error: 4 problems with the arguments:\n"
        "  - NAME='nlp' is taken in environment dev: tenants[0] of stack dev (Pulumi.dev.yaml) is a tenant of that name\n"
        "  - GPU='nvidia-h100-80gb' is not offered by environment dev; allowed: nvidia-tesla-t4, nvidia-l4\n"
        "  - MAX_GPUS=0 is not allowed; allowed: at least 1, a multiple of the smallest shape of GPU in ENV\n"
        "  - CIDR='10.160.40.1/22' is malformed: host bits are set; did you mean 10.160.40.0/22?\n"
        "nothing was written\n"
    )
    assert main(["--name", "robotics", "--env", "dev", "--gpu", "nvidia-l4", "--max-gpus", "0"], project_dir=project) == 1
    assert "MAX_GPUS=0 is not allowed; allowed: a multiple of 1 (the smallest nvidia-l4 shape), at least 1\nnothing was written" in capsys.readouterr().err
    assert files(project) == before


def test_a_cidr_clash_names_the_keys_the_make_variables_become(project, capsys):
    assert main(["--name", "robotics", "--env", "dev", "--cidr", "10.160.0.0/22"], project_dir=project) == 1
    err = capsys.readouterr().err
    assert "(NAME, GPU, MAX_GPUS, TEAM_PROJECT and CIDR are its tenant.name, gpuPools[0].gpu, gpuPools[0].maxGpus, gcpProject and network.cidr)" in err
    assert "tenant.network.cidr: 10.160.0.0/22 overlaps tenant nlp (tenants[0] of stack dev (Pulumi.dev.yaml)) 10.160.0.0/22" in err


def test_the_new_stack_gets_a_free_range_the_first_gpu_and_the_projects_convention(project):
    team = plan_team("robotics", "dev", gpu=None, max_gpus=None, project=None, project_dir=project)
    # The /22 the name picks in 10.160.0.0/12 (tests below), free: dev's tenants and team-vision-dev
    # hold 10.160.0.0/22, .4.0/22 and .8.0/22.
    assert (team.stack, team.cidr, team.gpu, team.max_gpus, team.project, team.created_project) == (
        "team-robotics-dev", "10.166.8.0/22", "nvidia-tesla-t4", 1, "acme-ml-dev-robotics", None
    )
    document = yaml.safe_load(team.text)
    assert document["config"][f"{NS}:environmentStack"] == "acme/gpu-platform/dev"
    assert document["config"][f"{NS}:tenant"] == {
        "name": "robotics",
        "gcpProject": "acme-ml-dev-robotics",
        "network": {"cidr": "10.166.8.0/22"},
        "gpuPools": [{"gpu": "nvidia-tesla-t4", "maxGpus": 1}],
        "access": {"teams": ["robotics"]},
    }
    assert document["config"]["pulumi:disable-default-providers"] == read_stack_values(project, "team-vision-dev")["pulumi:disable-default-providers"]


def test_two_teams_added_from_the_same_commit_get_different_ranges_from_their_names(project):
    """Two `make team` runs on two branches see the same stacks: the first free /22 would be the same
    for both; the place in the pool each name picks is not (one chance in 1024 that two names pick
    the same place: then the merge's check fails the second, below)."""
    ranges = {name: plan_team(name, "dev", gpu=None, max_gpus=None, project=None, project_dir=project).cidr for name in ("robotics", "audio", "lidar", "maps")}
    assert len(set(ranges.values())) == 4, ranges
    assert ranges == {name: plan_team(name, "dev", gpu=None, max_gpus=None, project=None, project_dir=project).cidr for name in ranges}  # a function of the name


def test_a_taken_place_moves_on_to_the_next_free_range(project):
    """A stack already holding the range robotics' name picks: robotics gets the next free /22."""
    (project / "Pulumi.team-lidar-dev.yaml").write_text(
        stack_text(name="lidar", environment="dev", environment_stack="acme/gpu-platform/dev", cidr="10.166.8.0/22", gpu="nvidia-l4", max_gpus=1, project="acme-lidar")
    )
    assert plan_team("robotics", "dev", gpu=None, max_gpus=None, project=None, project_dir=project).cidr == "10.166.12.0/22"


def test_two_branches_that_picked_the_same_range_fail_the_second_pull_request_with_a_free_one(project):
    """What `make test` reports on the second pull request once it is up to date with main (main's
    protection requires that: bootstrap/github_repo.py `strict`), when both teams got the same range:
    the new stack's key, the other stack's file, and a free range to use instead."""
    from config.errors import ConfigError
    from config.stack import load_stack

    for name in ("robotics", "lidar"):  # as if both names had picked 10.166.8.0/22
        (project / f"Pulumi.team-{name}-dev.yaml").write_text(
            stack_text(name=name, environment="dev", environment_stack="acme/gpu-platform/dev", cidr="10.166.8.0/22", gpu="nvidia-l4", max_gpus=1, project=f"acme-{name}")
        )
    with pytest.raises(ConfigError) as caught:
        load_stack(read_stack_values(project, "team-lidar-dev"), stack="team-lidar-dev", project_dir=project)
    assert "tenant.network.cidr: 10.166.8.0/22 overlaps tenant robotics (stack team-robotics-dev (Pulumi.team-robotics-dev.yaml)) 10.166.8.0/22; try 10.160.12.0/22" in str(caught.value)


def test_in_an_environment_that_creates_projects_the_team_gets_one_created(project):
    """prod sets platform.tenantProjects: no gcpProject, Pulumi creates <prefix>-prod-<team> (the
    bootstrap's folder grants cover it, no team-project roles: policy/stack_records.py)."""
    team = plan_team("vision", "prod", gpu="nvidia-l4", max_gpus=2, project=None, project_dir=project)
    assert (team.project, team.created_project) == (None, "acme-prod-vision")
    assert "gcpProject" not in yaml.safe_load(team.text)["config"][f"{NS}:tenant"]


def test_an_environment_without_a_bootstrap_entry_gets_no_team(project, capsys):
    """CI could neither preview nor deploy the stack: said before anything is written."""
    ci = project / BOOTSTRAP_STACK
    ci.write_text(ci.read_text().replace("    - name: prod\n", "    - name: production\n"))
    before = files(project)
    assert main(["--name", "robotics", "--env", "prod"], project_dir=project) == 1
    assert "bootstrap/Pulumi.ci.yaml has no entry for environment prod under gpu-platform-bootstrap:environments" in capsys.readouterr().err
    assert files(project) == before


def test_the_stack_file_says_what_it_is_and_who_deploys_it():
    text = stack_text(name="maps", environment="dev", environment_stack="acme/gpu-platform/dev", cidr="10.160.16.0/22", gpu="nvidia-l4", max_gpus=2, project=None)
    assert text.startswith("# The maps team's own stack in the dev environment")
    assert "never by the team" in text and "gcpProject" not in text


def test_make_team_passes_what_the_command_line_gives(tmp_path):
    """`make team` runs the tool with the values given on make's command line only: GPU and
    TEAM_PROJECT have defaults of their own for `make acceptance`, which must not leak in."""
    from make_support import run_make

    def arguments(directory: str, *variables: str) -> list[str]:
        (tmp_path / directory).mkdir()
        return run_make(tmp_path / directory, "team", *variables).arguments[2:]

    assert arguments("a", "NAME=robotics", "ENV=dev") == ["--name", "robotics", "--env", "dev"]
    assert arguments("b", "NAME=robotics", "ENV=dev", "GPU=nvidia-l4", "MAX_GPUS=4", "TEAM_PROJECT=acme-robotics", "CIDR=10.160.40.0/22") == [
        *("--name", "robotics", "--env", "dev", "--gpu", "nvidia-l4", "--max-gpus", "4", "--project", "acme-robotics", "--cidr", "10.160.40.0/22")
    ]


def test_the_docs_make_team_examples_add_a_team_to_the_stacks_as_shipped(project):
    """Each `make team` command of README.md and docs/ (docs/teams.md's and README's examples, and
    any other), as its variables reach the tool, plans a new team on the stacks as shipped (checked
    as the tool checks before writing; nothing written here)."""
    import shlex

    from docs_support import commands

    options = {"NAME": "name", "ENV": "environment", "GPU": "gpu", "MAX_GPUS": "max_gpus", "TEAM_PROJECT": "project", "CIDR": "cidr"}
    examples = [(page, line.split("#")[0]) for page, line in commands() if line.startswith("make team ")]
    assert {page for page, _ in examples} >= {"README.md", "docs/teams.md"} and len(examples) >= 4
    for page, line in examples:
        given = dict(word.split("=", 1) for word in shlex.split(line)[2:])
        assert set(given) <= set(options), (page, line)
        kwargs = {options[k]: (int(v) if k == "MAX_GPUS" else v) for k, v in given.items()}
        kwargs.setdefault("gpu", None), kwargs.setdefault("max_gpus", None), kwargs.setdefault("project", None)
        team = plan_team(kwargs.pop("name"), kwargs.pop("environment"), project_dir=project, **kwargs)
        assert re.fullmatch(r"team-[a-z0-9-]+-(dev|prod)", team.stack)


def test_the_command_line_plans_the_team_it_is_given_and_prints_the_next_steps(project, capsys, monkeypatch):
    """`python -m tools.new_team` from its arguments to the next steps it prints (the writing itself,
    `add_team`, is tried on a whole copy of the project in tests/test_added_teams.py)."""
    from tools import new_team

    given = []
    monkeypatch.setattr(new_team, "add_team", lambda team, project_dir: given.append(team) or [f"{team.stack}.yaml: the team's stack", "bootstrap"])
    argv = ["--name", "robotics", "--env", "dev", "--gpu", "nvidia-l4", "--max-gpus", "4", "--project", "acme-robotics", "--cidr", "10.160.40.0/22"]
    assert main(argv, project_dir=project) == 0
    [team] = given
    assert (team.name, team.environment, team.gpu, team.max_gpus, team.project, team.cidr) == ("robotics", "dev", "nvidia-l4", 4, "acme-robotics", "10.160.40.0/22")
    out = capsys.readouterr().out
    assert out.startswith("Added team robotics to environment dev:") and "1. make test && make plan STACK=team-robotics-dev" in out
    assert "The team's project acme-robotics must exist" in out and "after its merge up-dev deploys it after dev." in out
    # The administrator's steps before the merge: no version to bump, the pack published under the
    # version its files give it, one team's pull request at a time.
    assert "pulumi stack init acme/team-robotics-dev\n       make policy-publish\n       cd bootstrap && pulumi up" in out
    assert "One team at a" in out and "bump" not in out


def test_the_ranges_docs_teams_md_shows_for_two_teams_at_once_are_the_ones_they_get(project):
    """docs/teams.md "Two teams at once" names the range each example name picks on the stacks as shipped."""
    from docs_support import section

    text = section("Two teams at once")
    shown = dict(re.findall(r"`([a-z]+)` (10\.\d+\.\d+\.\d+/22)", text))
    assert set(shown) == set(re.findall(r"make team NAME=([a-z]+) ", text)) and len(shown) == 2  # the teams its commands add
    assert {name: plan_team(name, "dev", gpu=None, max_gpus=None, project=None, project_dir=project).cidr for name in shown} == shown
