"""gpu-platform-bootstrap: what the CI pipeline needs before it can run, created once per
organization by an administrator (`pulumi up` in bootstrap/). docs/ci.md "Continuous delivery".

Google Cloud: a Workload Identity pool trusting GitHub's tokens of one repository, and per
environment a deploy, a preview and a drift service account (no keys). Pulumi Cloud (unless
pulumiCloud.manage is false): per environment a read and a deploy team, an OIDC issuer mapping
each kind of job to one team token, and the policy group that enforces the guardrails.
GitHub (unless github.manage is false): `main` protected, the `production`, `production-preview`
and `drift` environments with their rules, and the repository variables the workflows read.
"""

import pulumi

from ci_config import ConfigProblems, parse
from ci_identities import EnvironmentIdentities, GithubTrust
from from_policy import stack_records
from github_repo import GithubRepository
from pulumi_cloud import PulumiCloudAccess, team_name

_config = pulumi.Config()
try:
    config = parse(
        {key: _config.get_object(key) for key in ("github", "environments", "pulumiCloud")}
        | {key: _config.get(key) for key in ("driftEnvironment", "roleIdPrefix")},
        pulumi.Config("gcp").get("project"),
        stack_records(),
    )
except ConfigProblems as e:
    raise pulumi.RunError(f"bootstrap configuration:\n{e}") from None

trust = GithubTrust("github", config)
identities = {env.name: EnvironmentIdentities(f"ci-{env.name}", config, env, trust) for env in config.environments}
if config.manage_pulumi_cloud:
    PulumiCloudAccess("pulumi-cloud", config)

# What .github/workflows/*.yml read (set by GithubRepository, or by hand with `gh variable set`).
variables: dict[str, pulumi.Input[str]] = {"GCP_WORKLOAD_IDENTITY_PROVIDER": trust.provider.name}
if config.pulumi_organization:
    variables["PULUMI_ORG"] = config.pulumi_organization
for name, found in identities.items():
    suffix = name.upper()
    for kind in ("deploy", "preview", "drift"):
        variables[f"GCP_{kind.upper()}_SERVICE_ACCOUNT_{suffix}"] = found.emails[kind]
    variables[f"PULUMI_READ_TEAM_{suffix}"] = team_name(name, "read")
    variables[f"PULUMI_DEPLOY_TEAM_{suffix}"] = team_name(name, "deploy")

if config.manage_github:
    GithubRepository("github-repository", config, variables)

pulumi.export("githubVariables", variables)
pulumi.export("attributeCondition", config.attribute_condition())
pulumi.export("subjects", {name: found.subjects for name, found in identities.items()})
