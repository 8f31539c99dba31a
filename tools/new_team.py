"""Add a team: its own stack in an environment, and everything `make test` then expects.

    make team NAME=robotics ENV=dev [GPU=nvidia-l4] [MAX_GPUS=4] [TEAM_PROJECT=<existing project id>] [CIDR=<cidr>]
    .venv/bin/python -m tools.new_team --name robotics --env dev [--gpu nvidia-l4] [--max-gpus 4] [--project <id>] [--cidr <cidr>]

It writes Pulumi.team-<name>-<env>.yaml (a /22 of the environment the team's name picks, the first
free one from there, unless CIDR names one; the team's GPU pool and project) and runs `make
policy-data`, which writes the stack's record, policy/stacks/team-<name>-<env>.json: the pack judges
the stack by it, and the bootstrap derives from it that CI's identities may preview and deploy the
stack and build in its existing project. Then it prints the next steps: the pull request, who
approves it and what an administrator runs before it merges. Nothing is listed by hand and no
version is bumped, so two teams added on two branches at once touch files of their own and merge
without a conflict (docs/teams.md "Two teams at once").

Everything is checked before anything is written, as `make test` would: the name, the environment,
the GPU and the new stack against its environment and every other tenant (load_stack, the
program's own checks). A problem is reported with what is allowed, and nothing is written.

The team's GCP project: `--project` names an existing one; without it, an environment with
platform.tenantProjects creates one (<prefix>-<env>-<team>), any other uses <gcp:project>-<team>
(as the shipped team-vision-dev does), which must exist: the next steps say so.
"""

from __future__ import annotations

import argparse
import ipaddress
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

try:  # the project's packages live in .venv: outside it, say what to run instead of a traceback
    import pydantic  # noqa: F401
    import yaml  # noqa: F401
except ImportError as missing:
    sys.exit(
        f"python -m tools.new_team needs the project's pinned packages ({missing.name} is not installed for {sys.executable}): "
        "run `make team NAME=<team> ENV=<environment>`, which installs them in .venv first (after that, "
        "`.venv/bin/python -m tools.new_team …` works too)"
    )

from config import yaml_io
from config.node_properties import ON_DEMAND
from config.base import DNS_LABEL, read_cidr
from config.catalog import load_catalog
from config.errors import ConfigError
from config.quota import QUOTA_PAGE
from config.stack import NS, EnvironmentStack, environment_claims, load_stack
from config.stack_files import PROJECT_DIR, StackFileError, list_stacks, project_name, read_stack_values, stack_file
from config.tenant import MAX_TENANT_NAME, RESERVED_NAMES, TENANT_CIDR_POOL, suggest_cidr
from tools.team_stacks import environment_stack_of

BOOTSTRAP_STACK = Path("bootstrap") / "Pulumi.ci.yaml"
PROGRAM_DATA = Path("policy") / "program_data.json"
RECORDS = Path("policy") / "stacks"


class TeamError(Exception):
    """Why the team cannot be added as asked; nothing was written."""


@dataclass(frozen=True)
class NewTeam:
    name: str
    environment: str  # the environment stack, e.g. dev
    environment_name: str  # its gpu-platform:environment, the name of its entry in the bootstrap
    stack: str  # team-<name>-<environment>
    text: str  # the stack file
    cidr: str
    gpu: str
    max_gpus: int
    project: str | None  # an existing project (CI's identities get roles there), or None when Pulumi creates it
    created_project: str | None
    organization: str


def stack_name(name: str, environment: str) -> str:
    return f"team-{name}-{environment}"


def plan_team(
    name: str, environment: str, *, gpu: str | None, max_gpus: int | None, project: str | None, project_dir: Path, cidr: str | None = None
) -> NewTeam:
    """The new team's stack file, checked against everything in `project_dir`; raises TeamError,
    with every bad argument at once (each named as its make variable, with what is allowed)."""
    problems: list[str] = []
    name_ok = bool(DNS_LABEL.match(name)) and len(name) <= MAX_TENANT_NAME and name not in RESERVED_NAMES
    if not name_ok:
        problems.append(
            f"NAME={name!r} is not allowed; allowed: a DNS-1123 label (lowercase letters, digits and '-', starting with a letter) "
            f"of at most {MAX_TENANT_NAME} characters, not {' or '.join(map(repr, RESERVED_NAMES))}"
        )
    # Reported last, in the order of the make variables.
    cidr_problem = [f"CIDR={problem}"] if cidr is not None and (problem := read_cidr(cidr, "10.160.40.0/22")[1]) else []
    environments = _environment_stacks(project_dir)
    env = None
    if environment not in environments:
        problems.append(f"ENV={environment!r} is not an environment stack of this project; allowed: {', '.join(environments) or 'none'}")
    else:
        try:
            env = _load_environment(environment, project_dir)
        except TeamError as e:
            problems.append(str(e))
    if env is None:
        # No environment to judge GPU and MAX_GPUS by: what holds in every environment.
        catalog_gpus = load_catalog().gpus
        if gpu is not None and gpu not in catalog_gpus:
            problems.append(f"GPU={gpu!r} is not a GPU type of config/catalog.yaml; allowed: {', '.join(catalog_gpus)}")
        problems += _below_one(max_gpus)
        raise TeamError(_each(problems + cidr_problem))
    stack = stack_name(name, environment)
    claims = environment_claims(env, project_dir)
    if name_ok and stack_file(project_dir, stack).exists():
        problems.append(f"NAME={name!r} is taken: {stack_file(project_dir, stack).name} exists")
    elif name_ok and (taken := next((c for c in claims if c.name == name), None)) is not None:
        problems.append(f"NAME={name!r} is taken in environment {environment}: {taken.source} is a tenant of that name")
    offered = env.facts.gpu_types
    gpu = gpu or offered[0]
    counts = sorted({nt.gpu_count for nt in env.facts.node_types_for(gpu, ON_DEMAND)})
    if gpu not in offered:
        problems.append(f"GPU={gpu!r} is not offered by environment {environment}; allowed: {', '.join(offered)}")
    elif not counts:
        usable = ", ".join(g for g in offered if env.facts.node_types_for(g, ON_DEMAND))
        problems.append(f"GPU={gpu!r} has no on-demand node types in environment {environment}; allowed: {usable}")
    elif max_gpus is not None and (max_gpus < 1 or max_gpus % counts[0]):
        problems.append(f"MAX_GPUS={max_gpus} is not allowed; allowed: a multiple of {counts[0]} (the smallest {gpu} shape), at least {counts[0]}")
    if gpu not in offered or not counts:
        problems += _below_one(max_gpus)
    problems += cidr_problem
    if problems:
        raise TeamError(_each(problems))
    max_gpus = max_gpus if max_gpus is not None else counts[0]
    if cidr is None:
        # From a place the team's name picks: two teams added at once on two branches get two ranges.
        cidr = suggest_cidr(env.facts, claims, seed=name)
        if not _is_cidr(cidr):
            raise TeamError(f"environment {environment} has no free /22 left in {TENANT_CIDR_POOL} for a new team; name one with CIDR=<cidr>")
    created = None
    if project is None and env.platform.tenant_projects is not None:
        created = f"{env.platform.tenant_projects.prefix}-{env.environment}-{name}"
    elif project is None:
        project = f"{env.project}-{name}"
    organization = _organization(project_dir)
    text = stack_text(
        name=name,
        environment=env.environment,
        environment_stack=f"{organization}/{project_name(project_dir)}/{environment}",
        cidr=cidr,
        gpu=gpu,
        max_gpus=max_gpus,
        project=project,
    )
    team = NewTeam(name, environment, env.environment, stack, text, cidr, gpu, max_gpus, project, created, organization)
    _check(team, project_dir)
    return team


def stack_text(*, name: str, environment: str, environment_stack: str, cidr: str, gpu: str, max_gpus: int, project: str | None) -> str:
    lines = [
        f"# The {name} team's own stack in the {environment} environment: its virtual cluster and GCP network",
        "# (written by `make team`). Deployed by the environment's deployer from main, never by the team",
        '# (docs/teams.md "Add a team"); the team changes this file by pull request.',
        "config:",
        "  pulumi:disable-default-providers: [kubernetes, gcp]",
        f"  {NS}:environment: {environment}",
        f"  {NS}:environmentStack: {environment_stack}",
        f"  {NS}:tenant:",
        f"    name: {name}",
    ]
    if project is not None:
        lines.append(f"    gcpProject: {project}   # an existing project: the team's VMs, disks, network and node identity")
    lines += [
        f"    network: {{cidr: {cidr}}}",
        "    gpuPools:",
        f"      - {{gpu: {gpu}, maxGpus: {max_gpus}}}",
        f"    access: {{teams: [{name}]}}   # the platform team that is cluster-admin inside",
    ]
    return "\n".join(lines) + "\n"


def _below_one(max_gpus: int | None) -> list[str]:
    """MAX_GPUS judged without a GPU type to size it by."""
    if max_gpus is None or max_gpus >= 1:
        return []
    return [f"MAX_GPUS={max_gpus} is not allowed; allowed: at least 1, a multiple of the smallest shape of GPU in ENV"]


def _each(problems: list[str]) -> str:
    """One problem as it is; several as a list, every one at once."""
    if len(problems) == 1:
        return problems[0]
    return f"{len(problems)} problems with the arguments:\n" + "\n".join(f"  - {p}" for p in problems)


def _is_cidr(text: str) -> bool:
    try:
        ipaddress.IPv4Network(text)
    except ValueError:
        return False
    return True


def _environment_stacks(project_dir: Path) -> list[str]:
    found = []
    for stack in list_stacks(project_dir):
        try:
            if environment_stack_of(stack, project_dir) is None:
                found.append(stack)
        except StackFileError:
            continue
    return found


def _load_environment(environment: str, project_dir: Path) -> EnvironmentStack:
    try:
        env = load_stack(read_stack_values(project_dir, environment), stack=environment, project_dir=project_dir)
    except (ConfigError, StackFileError) as e:
        raise TeamError(f"environment stack {environment} has problems of its own; fix them first:\n{e}") from None
    assert isinstance(env, EnvironmentStack)
    return env


def _organization(project_dir: Path) -> str:
    """The Pulumi organization of the stacks: the bootstrap's, else that of a committed team stack."""
    values = yaml_io.load((project_dir / BOOTSTRAP_STACK).read_text(), source=BOOTSTRAP_STACK)["config"]
    organization = (values.get("gpu-platform-bootstrap:pulumiCloud") or {}).get("organization")
    if organization:
        return str(organization)
    for stack in list_stacks(project_dir):
        reference = read_stack_values(project_dir, stack).get(f"{NS}:environmentStack")
        if reference:
            return str(reference).split("/")[0]
    raise TeamError(f"{BOOTSTRAP_STACK} names no pulumiCloud.organization, and no team stack names one: set it there first")


def _check(team: NewTeam, project_dir: Path) -> None:
    """The project with the new stack, in a scratch copy of its stack files: the new stack and its
    environment load (every tenant against every other), and the bootstrap still parses."""
    with tempfile.TemporaryDirectory(prefix="gpu-platform-new-team-") as tmp:
        scratch = Path(tmp)
        for path in [project_dir / "Pulumi.yaml", *project_dir.glob("Pulumi.*.yaml")]:
            (scratch / path.name).write_text(path.read_text())
        stack_file(scratch, team.stack).write_text(team.text)
        for stack in (team.stack, team.environment):
            try:
                load_stack(read_stack_values(scratch, stack), stack=stack, project_dir=scratch)
            except ConfigError as e:
                raise TeamError(
                    "the new stack would not plan (NAME, GPU, MAX_GPUS, TEAM_PROJECT and CIDR are its tenant.name, "
                    f"gpuPools[0].gpu, gpuPools[0].maxGpus, gcpProject and network.cidr):\n{e}"
                ) from None
    environments = yaml_io.load((project_dir / BOOTSTRAP_STACK).read_text(), source=BOOTSTRAP_STACK)["config"].get("gpu-platform-bootstrap:environments") or []
    if team.environment_name not in [e.get("name") for e in environments if isinstance(e, dict)]:
        raise TeamError(
            f"{BOOTSTRAP_STACK} has no entry for environment {team.environment_name} under gpu-platform-bootstrap:environments, "
            "so CI could neither preview nor deploy the stack; add it first (docs/deploy.md)"
        )


# --- writing ----------------------------------------------------------------------------------------


def add_team(team: NewTeam, project_dir: Path) -> list[str]:
    """Writes the files; returns what changed, one line each. On a failure every file is put back."""
    record = project_dir / RECORDS / f"{team.stack}.json"
    paths = [stack_file(project_dir, team.stack), project_dir / PROGRAM_DATA, record]
    saved = {path: path.read_text() if path.exists() else None for path in paths}
    try:
        return _write(team, project_dir)
    except BaseException:
        for path, text in saved.items():
            if text is None:
                path.unlink(missing_ok=True)
            else:
                path.write_text(text)
        raise


def _write(team: NewTeam, project_dir: Path) -> list[str]:
    changed = []
    stack_file(project_dir, team.stack).write_text(team.text)
    where = f"project {team.project} (must exist)" if team.project else f"project {team.created_project}, created by Pulumi"
    changed.append(f"{stack_file(project_dir, team.stack).name}: the team's stack (network {team.cidr}, {team.max_gpus} × {team.gpu}, {where})")
    data = project_dir / PROGRAM_DATA
    before = data.read_text()
    # In the project's own checkout: the pack's data come from its stack files and code.
    result = subprocess.run([sys.executable, "-m", "tools.policy_data"], cwd=project_dir, capture_output=True, text=True, timeout=300)
    if result.returncode != 0:
        raise TeamError(f"make policy-data failed:\n{result.stdout}{result.stderr}")
    if not (project_dir / RECORDS / f"{team.stack}.json").exists():
        raise TeamError(f"make policy-data wrote no record of {team.stack} to {RECORDS}/")
    changed.append(f"{RECORDS}/{team.stack}.json: the stack's record, which the pack judges it by and the bootstrap lists it from (make policy-data)")
    if data.read_text() != before:
        # The program made something for this team that no stack made before (the pack's inventory).
        changed.append(f"{PROGRAM_DATA}: regenerated (make policy-data)")
    return changed


def next_steps(team: NewTeam, changed: list[str]) -> str:
    if team.project:
        project = (
            f"The team's project {team.project} must exist (Pulumi enables the APIs it needs there); for another one, "
            f"edit gcpProject in {stack_file(Path('.'), team.stack).name} and run make policy-data."
        )
    else:
        project = (
            f"Pulumi creates the team's project {team.created_project}. A new project has no GPU quota: once it exists, "
            f"request {team.max_gpus} {team.gpu} GPUs in its region: {QUOTA_PAGE.format(project=team.created_project)}"
        )
    deploy = (
        f"and once a reviewer of the `production` environment approves, up-{team.environment} deploys it after {team.environment}"
        if team.environment == "prod"
        else f"up-{team.environment} deploys it after {team.environment}"
    )
    files = [line.split(":", 1)[0] for line in changed]
    return "\n".join(
        [
            f"Added team {team.name} to environment {team.environment}:",
            *(f"  {line}" for line in changed),
            project,
            "",
            "Next steps:",
            f"  1. make test && make plan STACK={team.stack}",
            f"  2. One pull request, with {', '.join(files)}. A platform admin reviews and approves it (main needs one",
            "     approving review; the record holds the team's accounts, project and settings). Before it merges, once",
            "     it is up to date with main (main requires that), the admin runs, from its head:",
            f"       pulumi stack init {team.organization}/{team.stack}",
            "       make policy-publish",
            "       cd bootstrap && pulumi up",
            "     and re-runs its preview, which passes once the published pack records the stack. One team at a",
            "     time: merge it before applying the next team's pull request (docs/teams.md \"Two teams at once\").",
            f"  3. Then, after its merge {deploy}.",
        ]
    )


def main(argv: list[str] | None = None, project_dir: Path = PROJECT_DIR) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.new_team", description=__doc__.split("\n\n")[0])
    parser.add_argument("--name", required=True, help="the team's name (NAME), a DNS-1123 label of at most 16 characters")
    parser.add_argument("--env", required=True, help="the environment stack (ENV), e.g. dev")
    parser.add_argument("--gpu", help="the GPU type of its pool (GPU); default: the environment's first")
    parser.add_argument("--max-gpus", type=int, help="the pool's GPU limit (MAX_GPUS); default: the smallest shape's GPU count")
    parser.add_argument("--project", help="the team's existing GCP project (TEAM_PROJECT); default: see below")
    parser.add_argument("--cidr", help="the team's node subnet (CIDR); default: a free /22 of the environment")
    args = parser.parse_args(argv)
    try:
        team = plan_team(args.name, args.env, gpu=args.gpu, max_gpus=args.max_gpus, project=args.project, project_dir=project_dir, cidr=args.cidr)
        changed = add_team(team, project_dir)
    except TeamError as e:
        print(f"error: {e}\nnothing was written", file=sys.stderr)
        return 1
    print(next_steps(team, changed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
