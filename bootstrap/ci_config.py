"""The bootstrap stack's configuration, checked as a whole: every problem reported at once, with its
key, before anything is registered.

Who may obtain an identity is said as the GitHub OIDC token's `sub` claim, which GitHub builds from
the repository and the job's context (GitHub docs, "OpenID Connect reference", subject claims):
`repo:<owner>/<name>:environment:<env>` for a job in an environment, `repo:<owner>/<name>:pull_request`
for a pull-request job, `repo:<owner>/<name>:ref:<ref>` for any other job.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from from_policy import existing_team_projects, stacks_of

MAIN_REF = "refs/heads/main"  # the protected branch: only reviewed code runs from it
GITHUB_ISSUER = "https://token.actions.githubusercontent.com"
IDENTITY_KINDS = ("deploy", "preview", "drift")
POOL_ID = "github-actions"  # the Workload Identity pool and its GitHub provider
PROVIDER_ID = "github"
# GitHub's OIDC token carries `actor`, the account that started the run (kept on re-runs): a
# Dependabot pull request's runs have this one. Its pull_request subject is every pull request's.
DEPENDABOT = "dependabot[bot]"

_REPOSITORY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,38}/[A-Za-z0-9._-]{1,100}$")
_ENVIRONMENT_NAME = re.compile(r"^[a-z][a-z0-9]{0,11}$")  # fits service account ids gpu-ci-<env>-preview
_GITHUB_ENVIRONMENT = re.compile(r"^[A-Za-z0-9._-]{1,255}$")
_PROJECT_ID = re.compile(r"^[a-z][-a-z0-9]{4,28}[a-z0-9]$")
_STACK = re.compile(r"^[A-Za-z0-9._-]+$")
_ROLE_PREFIX = re.compile(r"^[A-Za-z][A-Za-z0-9]{0,40}$")
_BILLING_ACCOUNT = re.compile(r"^[0-9A-F]{6}-[0-9A-F]{6}-[0-9A-F]{6}$")


class ConfigProblems(ValueError):
    """Every problem of the bootstrap configuration, one per line."""


@dataclass(frozen=True)
class GitHubJobs:
    """Which GitHub jobs may obtain an identity: those in `environment`, or pull-request jobs, or
    jobs of `ref` (the protected branch)."""

    environment: str | None = None
    pull_requests: bool = False
    ref: str | None = None

    def subject(self, repository: str) -> str:
        if self.environment:
            return f"repo:{repository}:environment:{self.environment}"
        if self.pull_requests:
            return f"repo:{repository}:pull_request"
        return f"repo:{repository}:ref:{self.ref}"


@dataclass(frozen=True)
class TenantProjects:
    folder: str | None = None  # folders/<id>
    billing_account: str | None = None


@dataclass(frozen=True)
class Environment:
    name: str
    project: str
    # Its environment stacks and team stacks: the committed stacks whose gpu-platform:environment
    # is `name`, from the pack's records (policy/stacks/, from_policy.py), never listed by hand.
    stacks: tuple[str, ...]
    deploy: GitHubJobs
    preview: GitHubJobs
    tenant_projects: TenantProjects = field(default_factory=TenantProjects)
    # Existing GCP projects of the environment's tenants (`gcpProject: <id>`), inline or in team
    # stacks, from the same records: its deployer builds their networks and identities there,
    # previews and drift read them.
    team_projects: tuple[str, ...] = ()


def account_id(environment: str, kind: str) -> str:
    return f"gpu-ci-{environment}-{kind}"


@dataclass(frozen=True)
class Identity:
    """One CI service account: whose, of which kind, reachable by which token subject, on what."""

    environment: Environment
    kind: str
    subject: str

    @property
    def account_id(self) -> str:
        return account_id(self.environment.name, self.kind)

    @property
    def email(self) -> str:
        return f"{self.account_id}@{self.environment.project}.iam.gserviceaccount.com"


@dataclass(frozen=True)
class BootstrapConfig:
    pool_project: str
    repository: str
    repository_id: str | None
    environments: tuple[Environment, ...]
    drift_environment: str
    role_id_prefix: str
    pulumi_organization: str | None
    pulumi_project: str
    manage_pulumi_cloud: bool
    manage_github: bool = False
    reviewer_teams: tuple[int, ...] = ()
    reviewer_users: tuple[int, ...] = ()

    @property
    def drift(self) -> GitHubJobs:
        return GitHubJobs(environment=self.drift_environment)

    def jobs(self, environment: Environment, kind: str) -> GitHubJobs:
        return {"deploy": environment.deploy, "preview": environment.preview, "drift": self.drift}[kind]

    def identities(self) -> list[Identity]:
        return [Identity(e, kind, self.jobs(e, kind).subject(self.repository)) for e in self.environments for kind in IDENTITY_KINDS]

    def main_only_subjects(self) -> list[str]:
        """Subjects of GitHub environments that may only run from the protected branch: every
        deployment environment and the drift environment (GitHub puts no ref in those subjects,
        so the provider's condition adds it)."""
        subjects = [e.deploy.subject(self.repository) for e in self.environments if e.deploy.environment]
        return [*subjects, self.drift.subject(self.repository)]

    def pull_request_subject(self) -> str:
        return GitHubJobs(pull_requests=True).subject(self.repository)

    def attribute_condition(self) -> str:
        """The Workload Identity provider's condition (CEL): tokens of this repository only, the
        deployment and drift environments only from the protected branch, and no pull-request token
        of a Dependabot run (the workflow gives those `make test` only; the trust agrees)."""
        clauses = [f"assertion.repository == '{self.repository}'"]
        if self.repository_id:
            clauses.append(f"assertion.repository_id == '{self.repository_id}'")
        not_main_only = " && ".join(f"assertion.sub != '{s}'" for s in self.main_only_subjects())
        clauses.append(f"(assertion.ref == '{MAIN_REF}' || ({not_main_only}))")
        clauses.append(f"(assertion.sub != '{self.pull_request_subject()}' || assertion.actor != '{DEPENDABOT}')")
        return " && ".join(clauses)


def _jobs(raw: Any, key: str, problems: list[str], *, deploy: bool) -> GitHubJobs:
    allowed = (
        f"{{ref: {MAIN_REF}}} or {{environment: <a protected GitHub environment>}}"
        if deploy
        else "{pullRequests: true} or {environment: <a GitHub environment with required reviewers>}"
    )
    if not isinstance(raw, dict):
        problems.append(f"{key}: {raw!r} is not a mapping; allowed: {allowed}")
        return GitHubJobs(ref=MAIN_REF)
    environment, ref, pulls = raw.get("environment"), raw.get("ref"), raw.get("pullRequests")
    unknown = sorted(set(raw) - {"environment", "ref", "pullRequests"})
    if unknown:
        problems.append(f"{key}: unknown key(s) {unknown}; allowed: {allowed}")
    given = [k for k, v in (("environment", environment), ("ref", ref), ("pullRequests", pulls)) if v not in (None, False)]
    if len(given) != 1:
        problems.append(f"{key}: set exactly one of environment, ref, pullRequests (got {given or 'none'}); allowed: {allowed}")
        return GitHubJobs(ref=MAIN_REF)
    if environment is not None:
        if not isinstance(environment, str) or not _GITHUB_ENVIRONMENT.match(environment):
            problems.append(f"{key}.environment: {environment!r} is not a GitHub environment name")
        return GitHubJobs(environment=str(environment))
    if deploy and pulls:
        problems.append(f"{key}.pullRequests: a pull request may never deploy; allowed: {allowed}")
    if not deploy and ref is not None:
        problems.append(f"{key}.ref: previews run for pull requests or in an environment; allowed: {allowed}")
    if ref is not None and ref != MAIN_REF:
        problems.append(f"{key}.ref: {ref!r} is not the protected branch; allowed: {MAIN_REF}")
    return GitHubJobs(pull_requests=bool(pulls), ref=ref)


# Keys of an environment entry that earlier versions listed by hand and the records now give.
DERIVED_KEYS = ("stacks", "teamProjects")
ENTRY_KEYS = ("name", "project", "deploy", "preview", "tenantProjects")


def _environment(raw: Any, i: int, problems: list[str], records: dict[str, dict[str, Any]]) -> Environment | None:
    key = f"environments[{i}]"
    if not isinstance(raw, dict):
        problems.append(f"{key}: {raw!r} is not a mapping")
        return None
    for derived in (k for k in DERIVED_KEYS if k in raw):
        problems.append(
            f"{key}.{derived}: no longer set here; each environment's stacks and existing team projects come from the policy "
            "pack's stack records (policy/stacks/, written by make policy-data from the stack files): remove the key"
        )
    unknown = sorted(set(raw) - set(ENTRY_KEYS) - set(DERIVED_KEYS))
    if unknown:
        problems.append(f"{key}: unknown key(s) {unknown}; allowed: {', '.join(ENTRY_KEYS)}")
    name, project = str(raw.get("name", "")), str(raw.get("project", ""))
    if not _ENVIRONMENT_NAME.match(name):
        problems.append(f"{key}.name: {name!r} is not allowed; allowed: a lowercase name of at most 12 letters and digits, e.g. dev or prod")
    if not _PROJECT_ID.match(project):
        problems.append(f"{key}.project: {project!r} is not a GCP project id")
    stacks = [s for s in stacks_of(records, name) if _STACK.match(s)]
    for stack in (s for s, record in records.items() if record["environment"] == name and record["project"] != project):
        problems.append(f"{key}.project: {project!r} is not the project of its stack {stack} ({records[stack]['project']!r} in policy/stacks/{stack}.json)")
    deploy = _jobs(raw.get("deploy"), f"{key}.deploy", problems, deploy=True)
    preview = _jobs(raw.get("preview"), f"{key}.preview", problems, deploy=False)
    if deploy.environment and deploy.environment == preview.environment:
        problems.append(f"{key}.preview.environment: {preview.environment!r} is the deployment environment; allowed: another one")
    tenant = raw.get("tenantProjects") or {}
    folder, billing = tenant.get("folder"), tenant.get("billingAccount")
    if folder is not None and not re.match(r"^folders/\d+$", str(folder)):
        problems.append(f"{key}.tenantProjects.folder: {folder!r} is not allowed; allowed: folders/<numeric id>")
    if billing is not None and not _BILLING_ACCOUNT.match(str(billing)):
        problems.append(f"{key}.tenantProjects.billingAccount: {billing!r} is not allowed; allowed: a billing account id XXXXXX-XXXXXX-XXXXXX")
    team_projects = [p for p in existing_team_projects(records, name) if _PROJECT_ID.match(p)]
    return Environment(name, project, tuple(stacks), deploy, preview, TenantProjects(folder, billing), tuple(team_projects))


def parse(values: dict[str, Any], pool_project: str | None, records: dict[str, dict[str, Any]] | None = None) -> BootstrapConfig:
    """`values`: the stack's config keys without namespace (github, environments, pulumiCloud,
    driftEnvironment, roleIdPrefix); `records`: the pack's stack records (from_policy.py), each
    environment's stacks and existing team projects. Raises ConfigProblems listing every problem."""
    records = records or {}
    problems: list[str] = []
    github = values.get("github") or {}
    repository = str(github.get("repository", ""))
    if not _REPOSITORY.match(repository):
        problems.append(f"github.repository: {repository!r} is not allowed; allowed: <owner>/<name> of the repository whose workflows deploy")
    repository_id = github.get("repositoryId")
    if repository_id is not None and not str(repository_id).isdigit():
        problems.append(f"github.repositoryId: {repository_id!r} is not allowed; allowed: the numeric id (gh api repos/<owner>/<name> --jq .id)")
    if not pool_project or not _PROJECT_ID.match(pool_project):
        problems.append(f"gcp:project: {pool_project!r} is not allowed; allowed: the project that holds the Workload Identity pool")
    raw_environments = values.get("environments")
    if not isinstance(raw_environments, list) or not raw_environments:
        problems.append("environments: not set; allowed: one entry per environment, e.g. [{name: dev, …}, {name: prod, …}]")
        raw_environments = []
    environments = [e for i, raw in enumerate(raw_environments) if (e := _environment(raw, i, problems, records)) is not None]
    names = [e.name for e in environments]
    for duplicate in sorted({n for n in names if names.count(n) > 1}):
        problems.append(f"environments: {duplicate!r} appears twice")
    for stack, record in sorted(records.items()):
        if record["environment"] not in names:
            problems.append(
                f"environments: no entry for environment {record['environment']!r} of stack {stack} (policy/stacks/{stack}.json), so CI "
                f"could neither preview nor deploy it; allowed: add {{name: {record['environment']}, project: …, deploy: …, preview: …}}"
            )
    drift = str(values.get("driftEnvironment") or "drift")
    taken = {j.environment for e in environments for j in (e.deploy, e.preview) if j.environment}
    if drift in taken:
        problems.append(f"driftEnvironment: {drift!r} is also a deployment or preview environment; allowed: an environment of its own")
    prefix = str(values.get("roleIdPrefix") or "gpuPlatformCi")
    if not _ROLE_PREFIX.match(prefix):
        problems.append(f"roleIdPrefix: {prefix!r} is not allowed; allowed: letters and digits, starting with a letter")
    manage_github = github.get("manage", True) is not False
    reviewers = github.get("reviewers") or {}
    teams, users = reviewers.get("teams") or [], reviewers.get("users") or []
    if not all(isinstance(i, int) for i in [*teams, *users]):
        problems.append(f"github.reviewers: {reviewers!r} is not allowed; allowed: {{teams: [<id>], users: [<id>]}} of numeric ids (gh api orgs/<org>/teams/<slug> --jq .id)")
    elif manage_github and not (teams or users):
        problems.append("github.reviewers: not set; allowed: the teams or users who approve `production` and `production-preview` jobs, e.g. {teams: [1234567]} (or github.manage: false)")
    cloud = values.get("pulumiCloud") or {}
    manage = cloud.get("manage", True) is not False
    organization = cloud.get("organization")
    if manage and not organization:
        problems.append("pulumiCloud.organization: not set; allowed: your Pulumi organization (or pulumiCloud.manage: false)")
    if problems:
        raise ConfigProblems("\n".join(f"  {p}" for p in problems))
    return BootstrapConfig(
        pool_project=str(pool_project),
        repository=repository,
        repository_id=str(repository_id) if repository_id is not None else None,
        environments=tuple(environments),
        drift_environment=drift,
        role_id_prefix=prefix,
        pulumi_organization=organization,
        pulumi_project=str(cloud.get("project") or "gpu-platform"),
        manage_pulumi_cloud=manage,
        manage_github=manage_github,
        reviewer_teams=tuple(t for t in teams if isinstance(t, int)),
        reviewer_users=tuple(u for u in users if isinstance(u, int)),
    )
