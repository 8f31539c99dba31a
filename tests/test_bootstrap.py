"""The CI bootstrap (bootstrap/), run under the mock engine from its committed stack file: who can
obtain which identity (the provider's condition, evaluated on GitHub token claims; one subject per
binding), the roles exactly as the docs list them, no keys, its Pulumi Cloud teams, OIDC rules and
policy group, and configuration errors reported all at once before anything is registered."""

from __future__ import annotations

import copy
import re

import policies as P
import pulumi
import pytest
import yaml
from ci_config import MAIN_REF
from bootstrap_support import run_shipped_bootstrap
from policy_support import analyze, args_of, requirement_pins, violations
from docs_support import section
from shipped_stacks import SHIPPED_DIR, SHIPPED_STACKS, shipped_bootstrap_values, shipped_values

from config import yaml_io
from config.stack_files import PROJECT_DIR, list_stacks, read_stack_values
from tools.mock_engine import ProgramRun, run_program

BOOTSTRAP_DIR = PROJECT_DIR / "bootstrap"
MAIN = BOOTSTRAP_DIR / "__main__.py"
PROJECT = "gpu-platform-bootstrap"
REPO = "acme/gpu-platform"
NS = PROJECT + ":"
SA_MEMBER = "gcp:serviceaccount/iAMMember:IAMMember"
PROJECT_MEMBER = "gcp:projects/iAMMember:IAMMember"
POOL = "projects/placeholder-project-number/locations/global/workloadIdentityPools/github-actions"
CI_ROLES = yaml.safe_load((BOOTSTRAP_DIR / "ci_roles.yaml").read_text())


def shipped_configuration() -> dict:
    """The bootstrap's configuration as shipped (tests/data/shipped/bootstrap/): exact figures are
    checked on it, whatever this checkout's bootstrap/Pulumi.ci.yaml (the user's `yours:`) holds."""
    return shipped_bootstrap_values()


@pytest.fixture(scope="module")
def run_bootstrap(shipped_records_dir):
    """The bootstrap on a configuration, beside the records of the stacks as shipped."""
    return lambda values, records_dir=shipped_records_dir: run_shipped_bootstrap(values, records_dir)


@pytest.fixture(scope="module")
def bootstrap(bootstrap_run) -> ProgramRun:
    return bootstrap_run


TEAM_PROJECT = "acme-ml-dev-vision"  # the shipped team stack's existing project (Pulumi.team-vision-dev.yaml)
# What the shipped stacks' records give each environment (policy/stack_records.py).
SHIPPED_ENVIRONMENT_STACKS = {"dev": ["dev", "team-vision-dev"], "prod": ["prod"]}
SHIPPED_TEAM_PROJECTS = {"dev": [TEAM_PROJECT], "prod": []}


@pytest.fixture(scope="module")
def variant(run_bootstrap, shipped_records_dir, tmp_path_factory) -> ProgramRun:
    """The configuration as shipped with prod creating no team projects, no team stack in dev (so
    no existing team project), and no Pulumi Cloud management."""
    records = tmp_path_factory.mktemp("records-without-team-stack")
    for path in shipped_records_dir.glob("*.json"):
        if path.stem != "team-vision-dev":
            (records / path.name).write_text(path.read_text())
    values = shipped_configuration()
    del values[NS + "environments"][1]["tenantProjects"]
    values[NS + "pulumiCloud"]["manage"] = False
    return run_bootstrap(values, records)


# --- Who can obtain which identity ----------------------------------------------------------------


def evaluate(condition: str, claims: dict[str, str]) -> bool:
    """Evaluates the provider's CEL condition, as generated (==, !=, &&, ||, parentheses, string
    literals and assertion.<claim>), for a GitHub token's claims."""
    assert re.fullmatch(r"[\sA-Za-z0-9_.'=!&|()/:\[\]\-]+", condition), condition
    python = re.sub(r"assertion\.([a-z_]+)", r"claims.get('\1')", condition).replace("&&", " and ").replace("||", " or ")
    return bool(eval(python, {"__builtins__": {}}, {"claims": claims}))  # noqa: S307 - our own generated expression


def token(sub_kind: str, ref: str, repository: str = REPO, repository_id: str = "812345678", actor: str = "octocat") -> dict[str, str]:
    return {"sub": f"repo:{repository}:{sub_kind}", "ref": ref, "repository": repository, "repository_id": repository_id, "actor": actor}


@pytest.mark.parametrize(
    "claims, accepted",
    [
        (token("pull_request", "refs/pull/7/merge"), True),
        (token(f"ref:{MAIN_REF}", MAIN_REF), True),  # dev deploy
        (token("environment:production", MAIN_REF), True),  # prod deploy, approved, from main
        (token("environment:production", "refs/heads/feature"), False),  # prod environment from a branch
        (token("environment:drift", MAIN_REF), True),
        (token("environment:drift", "refs/pull/7/merge"), False),
        (token("environment:production-preview", "refs/pull/7/merge"), True),  # prod preview, approved
        (token("pull_request", "refs/pull/7/merge", repository="acme/other"), False),  # same owner, other repository
        (token("pull_request", "refs/pull/7/merge", repository="mallory/gpu-platform"), False),  # a fork
        (token(f"ref:{MAIN_REF}", MAIN_REF, repository_id="999"), False),  # a re-created repository of the same name
        (token("pull_request", "refs/pull/8/merge", actor="dependabot[bot]"), False),  # a Dependabot pull request
        (token("pull_request", "refs/pull/8/merge", actor="alice"), True),  # …a person's commit on top of it
        (token(f"ref:{MAIN_REF}", MAIN_REF, actor="dependabot[bot]"), True),  # `@dependabot merge` deploys as usual
    ],
)
def test_the_provider_condition(bootstrap, claims, accepted):
    provider = bootstrap.one("gcp:iam/workloadIdentityPoolProvider:WorkloadIdentityPoolProvider")
    assert evaluate(provider.input("attributeCondition"), claims) is accepted


def test_the_condition_names_the_repository_and_each_deployers_ref_or_environment(bootstrap):
    condition = bootstrap.one("gcp:iam/workloadIdentityPoolProvider:WorkloadIdentityPoolProvider").input("attributeCondition")
    assert f"assertion.repository == '{REPO}'" in condition and "repository_owner" not in condition
    assert f"assertion.ref == '{MAIN_REF}'" in condition  # dev deploys from main
    assert f"assertion.sub != 'repo:{REPO}:environment:production'" in condition  # prod deploys in `production`, from main
    assert bootstrap.outputs["attributeCondition"] == condition


def test_the_provider_trusts_github_and_maps_the_subject(bootstrap):
    provider = bootstrap.one("gcp:iam/workloadIdentityPoolProvider:WorkloadIdentityPoolProvider")
    assert provider.input("oidc") == {"issuerUri": "https://token.actions.githubusercontent.com"}
    assert provider.input("attributeMapping")["google.subject"] == "assertion.sub"
    assert provider.input("project") == "acme-ml-ci"


EXPECTED_SUBJECTS = {
    "gpu-ci-dev-deploy": f"repo:{REPO}:ref:{MAIN_REF}",
    "gpu-ci-dev-preview": f"repo:{REPO}:pull_request",
    "gpu-ci-dev-drift": f"repo:{REPO}:environment:drift",
    "gpu-ci-prod-deploy": f"repo:{REPO}:environment:production",
    "gpu-ci-prod-preview": f"repo:{REPO}:environment:production-preview",
    "gpu-ci-prod-drift": f"repo:{REPO}:environment:drift",
}


def test_each_identity_is_bound_to_exactly_one_subject(bootstrap):
    bindings = {}
    for reg in bootstrap.of_type(SA_MEMBER):
        assert reg.input("role") == "roles/iam.workloadIdentityUser"
        account = reg.input("serviceAccountId").rsplit("/", 1)[-1].split("@")[0]
        assert account not in bindings, f"{account} is bound twice"
        bindings[account] = reg.input("member")
    assert bindings == {account: f"principal://iam.googleapis.com/{POOL}/subject/{sub}" for account, sub in EXPECTED_SUBJECTS.items()}


def test_no_service_account_keys(bootstrap):
    assert bootstrap.of_type("gcp:serviceaccount/key:Key") == []
    assert {r.input("accountId") for r in bootstrap.of_type("gcp:serviceaccount/account:Account")} == set(EXPECTED_SUBJECTS)


# --- Roles, exactly as the docs list them --------------------------------------------------------


def readme_roles() -> set[tuple[str, str, str]]:
    rows = re.findall(r"^\| (deploy|preview|drift) \| (project|team project|folder|billing account) \| `([^`]+)` \|", section("The identities"), flags=re.MULTILINE)
    assert rows, "docs/ci.md \"The identities\" has no role table"
    scopes = {"project": "project", "team project": "teamProject", "folder": "folder", "billing account": "billingAccount"}
    return {(identity, scopes[scope], role) for identity, scope, role in rows}


def data_roles() -> set[tuple[str, str, str]]:
    scopes = ("project", "teamProject", "folder", "billingAccount")
    return {(kind, scope, e["role"]) for kind, spec in CI_ROLES["identities"].items() for scope in scopes for e in spec.get(scope) or []}


def registered_roles(*runs: ProgramRun) -> set[tuple[str, str, str]]:
    scopes = {PROJECT_MEMBER: "project", "gcp:folder/iAMMember:IAMMember": "folder", "gcp:billing/accountIamMember:AccountIamMember": "billingAccount"}
    found = set()
    for run in runs:
        for typ, scope in scopes.items():
            for reg in run.of_type(typ):
                environment, kind = re.match(r"serviceAccount:gpu-ci-([a-z0-9]+)-([a-z]+)@", reg.input("member")).groups()
                on = "teamProject" if scope == "project" and reg.input("project") != f"acme-ml-{environment}" else scope
                role = reg.input("role")
                custom = re.fullmatch(r"projects/[^/]+/roles/gpuPlatformCi_(\w+)", role)
                found.add((kind, on, f"custom:{custom.group(1)}" if custom else role))
    return found


def test_roles_exactly_as_readme_lists_them(bootstrap, variant):
    assert readme_roles() == data_roles() == registered_roles(bootstrap, variant)


def test_every_environment_gets_its_own_identities_on_its_own_project(bootstrap):
    """On its environment's project, or on the existing team projects of its stacks, nowhere else."""
    for reg in bootstrap.of_type(PROJECT_MEMBER):
        environment = re.match(r"serviceAccount:gpu-ci-([a-z0-9]+)-", reg.input("member")).group(1)
        assert reg.input("project") in [f"acme-ml-{environment}", *SHIPPED_TEAM_PROJECTS[environment]], reg.name


def test_each_environments_stacks_and_team_projects_come_from_the_stack_records(shipped_records_dir):
    """From the pack's records of the stacks as shipped (what `make policy-data` writes to
    policy/stacks/): dev's team stack and its existing project; prod's created projects are not
    team projects (its folder grants cover them); the shared tenants' project is the environment's."""
    from from_policy import existing_team_projects, stacks_of
    from stack_records import load_records

    records = load_records(shipped_records_dir)
    assert {env: stacks_of(records, env) for env in ("dev", "prod")} == SHIPPED_ENVIRONMENT_STACKS
    assert {env: existing_team_projects(records, env) for env in ("dev", "prod")} == SHIPPED_TEAM_PROJECTS
    assert records["prod"]["tenants"]["research"]["projectCreated"] is True  # acme-prod-research, in the folder


def test_a_list_set_by_hand_is_refused_with_where_it_comes_from_now(run_bootstrap):
    """Earlier versions listed each environment's stacks and team projects in Pulumi.ci.yaml."""
    values = shipped_configuration()
    values[NS + "environments"][0].update(stacks=["dev", "team-vision-dev"], teamProjects=[TEAM_PROJECT])
    with pytest.raises(pulumi.RunError) as raised:
        run_bootstrap(values)
    message = str(raised.value)
    assert "environments[0].stacks: no longer set here; each environment's stacks and existing team projects come from the policy pack's stack records (policy/stacks/" in message
    assert "environments[0].teamProjects: no longer set here" in message


def test_a_stack_of_an_environment_without_an_entry_is_refused(run_bootstrap):
    """prod's stack recorded, prod's entry gone: CI could neither preview nor deploy it."""
    values = shipped_configuration()
    del values[NS + "environments"][1]
    with pytest.raises(pulumi.RunError, match=r"environments: no entry for environment 'prod' of stack prod \(policy/stacks/prod.json\), so CI could neither"):
        run_bootstrap(values)


def test_preview_and_drift_identities_cannot_write():
    readers = {
        "roles/compute.viewer",
        "roles/container.viewer",
        "roles/iam.roleViewer",
        "roles/iam.securityReviewer",
        "roles/iam.serviceAccountViewer",
        "roles/serviceusage.serviceUsageViewer",
        "roles/monitoring.viewer",
        "roles/bigquery.metadataViewer",  # datasets' and tables' metadata, never their rows
        "roles/gkebackup.viewer",  # Backup for GKE Viewer: "read-only access to all Backup for GKE resources"
    }
    for kind in ("preview", "drift"):
        for scope in ("project", "teamProject", "folder"):
            for entry in CI_ROLES["identities"][kind][scope]:
                role = entry["role"]
                if role.startswith("custom:"):
                    permissions = CI_ROLES["customRoles"][role.removeprefix("custom:")]["permissions"]
                    assert all(p.endswith((".get", ".list")) for p in permissions), role
                else:
                    assert role in readers, f"{kind}: {role} is not a read-only role"
    preview = {e["role"] for e in CI_ROLES["identities"]["preview"]["project"]}
    assert not any(r.startswith("custom:") for r in preview), "pull requests never read cluster Secrets"


def test_no_ci_identity_reads_secrets_through_a_project(bootstrap):
    """Issue 27 item 3: no custom role of the bootstrap holds container.secrets.*, and the only
    Kubernetes roles CI identities get on a project are container.viewer (preview, drift: no
    Secrets) and the deployer's container.admin (`pulumi up` installs the platform chart, which binds
    cluster-admin, and Kubernetes lets only a holder of a role's permissions bind it). The drift
    check reads the platform namespace's Secrets through RBAC there (tests/test_platform_access.py)."""
    assert CI_ROLES["customRoles"] == {}
    custom = bootstrap.of_type("gcp:projects/iAMCustomRole:IAMCustomRole")
    assert not [r for r in custom if any(p.startswith("container.secrets.") for p in r.input("permissions"))]
    container_roles = {}
    for r in bootstrap.registrations:
        if r.type.endswith(("iAMMember:IAMMember", "IamMember:AccountIamMember")) and "container" in str(r.input("role")):
            kind = re.match(r"serviceAccount:gpu-ci-[a-z0-9]+-([a-z]+)@", r.input("member")).group(1)
            container_roles.setdefault(kind, set()).add(r.input("role"))
    assert container_roles == {"deploy": {"roles/container.admin"}, "preview": {"roles/container.viewer"}, "drift": {"roles/container.viewer"}}


def test_tenant_project_grants_only_when_configured(bootstrap, variant):
    folder = bootstrap.of_type("gcp:folder/iAMMember:IAMMember")
    assert folder and {r.input("folder") for r in folder} == {"folders/123456789012"}
    assert all("gpu-ci-prod-" in r.input("member") for r in folder)  # only the environment that set it
    [billing] = bootstrap.of_type("gcp:billing/accountIamMember:AccountIamMember")
    assert billing.input("billingAccountId") == "012345-6789AB-CDEF01" and billing.input("member").startswith("serviceAccount:gpu-ci-prod-deploy@")
    assert variant.of_type("gcp:folder/iAMMember:IAMMember") == variant.of_type("gcp:billing/accountIamMember:AccountIamMember") == []


def test_existing_team_projects_get_exactly_the_team_project_roles(bootstrap, variant):
    """dev's team stack has an existing project (CI deploys team stacks): exactly the team-project
    roles there; nothing there without that stack (the variant)."""
    assert not [r for r in variant.of_type(PROJECT_MEMBER) if r.input("project") == TEAM_PROJECT]
    granted = {(r.input("member").split("@")[0].removeprefix("serviceAccount:"), r.input("role")) for r in bootstrap.of_type(PROJECT_MEMBER) if r.input("project") == TEAM_PROJECT}
    expected = {(f"gpu-ci-dev-{kind}", e["role"]) for kind, spec in CI_ROLES["identities"].items() for e in spec["teamProject"]}
    assert granted == expected
    assert not {role for _, role in granted} & {"roles/container.admin", "roles/iam.serviceAccountUser"}  # no cluster there, no actAs


# --- Pulumi Cloud ---------------------------------------------------------------------------------


def test_each_kind_of_job_gets_one_team_token(bootstrap):
    issuer = bootstrap.one("pulumiservice:index:OidcIssuer")
    assert issuer.input("url") == "https://token.actions.githubusercontent.com"
    policies = issuer.input("policies")
    # First a deny rule for Dependabot's pull-request tokens, as the Google trust has.
    [deny] = [p for p in policies if p["decision"] == "deny"]
    assert policies[0] == deny and deny["tokenType"] == "team" and deny["teamName"] == "gpu-platform-ci-dev-read"
    assert deny["rules"] == {"repository": REPO, "aud": "urn:pulumi:org:acme", "repository_id": "812345678", "sub": f"repo:{REPO}:pull_request", "actor": "dependabot[bot]"}
    policies = policies[1:]
    rules = {(p["teamName"], p["rules"]["sub"]): p["rules"] for p in policies}
    assert all(p["tokenType"] == "team" and p["decision"] == "allow" for p in policies)
    assert set(rules) == {
        ("gpu-platform-ci-dev-read", f"repo:{REPO}:pull_request"),
        ("gpu-platform-ci-dev-read", f"repo:{REPO}:environment:drift"),
        ("gpu-platform-ci-dev-deploy", f"repo:{REPO}:ref:{MAIN_REF}"),
        ("gpu-platform-ci-prod-read", f"repo:{REPO}:environment:production-preview"),
        ("gpu-platform-ci-prod-read", f"repo:{REPO}:environment:drift"),
        ("gpu-platform-ci-prod-deploy", f"repo:{REPO}:environment:production"),
    }
    for (team, sub), rule in rules.items():
        assert rule["repository"] == REPO and rule["aud"] == "urn:pulumi:org:acme"
        if team.endswith("-deploy") or sub.endswith(":drift"):
            assert rule["ref"] == MAIN_REF, (team, sub)


def test_team_stack_permissions(bootstrap):
    """Each environment's read team reads, and its deploy team updates, every stack listed for it:
    the environment stack and its team stacks, which CI deploys after it (docs/teams.md "Add a team")."""
    granted = {(r.input("team"), r.input("stack"), r.input("permission")) for r in bootstrap.of_type("pulumiservice:index:TeamStackPermission")}
    read, edit = 101, 102  # TeamStackPermissionScope.READ / EDIT
    listed = {(env, s) for env, stacks in SHIPPED_ENVIRONMENT_STACKS.items() for s in stacks}
    assert granted == {(f"gpu-platform-ci-{env}-{team}", s, level) for env, s in listed for team, level in (("read", read), ("deploy", edit))}


def test_the_policy_group_enforces_the_checked_out_pack_on_every_stack(bootstrap):
    """Every stack of every environment and the bootstrap's own, with the version this checkout's
    pack publishes as (`make policy-publish`: PulumiPolicy.yaml's version and the digest of the
    pack's files, policy/pack_version.py)."""
    from pack_version import base_version, digest, pack_version

    group = bootstrap.one("pulumiservice:index:PolicyGroup")
    assert group.input("mode") == "preventative" and group.input("entityType") == "stacks"
    stacks = {(s["routingProject"], s["name"]) for s in group.input("stacks")}
    assert stacks == {("gpu-platform", s) for s in ("dev", "team-vision-dev", "prod")} | {(PROJECT, "ci")}
    main_py = (PROJECT_DIR / "policy" / "__main__.py").read_text()
    [pack] = group.input("policyPacks")
    assert pack["versionTag"] == pack_version() == f"{base_version()}-{digest()}" and f'name="{pack["name"]}"' in main_py


def test_github_variables(bootstrap):
    variables = bootstrap.outputs["githubVariables"]
    assert variables["GCP_WORKLOAD_IDENTITY_PROVIDER"] == f"{POOL}/providers/github"
    assert variables["GCP_DEPLOY_SERVICE_ACCOUNT_PROD"] == "gpu-ci-prod-deploy@acme-ml-prod.iam.gserviceaccount.com"
    assert variables["PULUMI_READ_TEAM_DEV"] == "gpu-platform-ci-dev-read" and variables["PULUMI_ORG"] == "acme"


def test_without_pulumi_cloud_management_nothing_of_it_is_registered(variant):
    assert not [r for r in variant.registrations if r.type.startswith("pulumiservice:")]


# --- The guardrails hold for the bootstrap too ----------------------------------------------------


def test_the_bootstrap_stack_passes_the_policy_pack(bootstrap, committed_bootstrap_run):
    """As shipped (judged by the shipped data), and this checkout's, by this checkout's pack."""
    assert analyze(bootstrap) == []
    if committed_bootstrap_run is not bootstrap:
        from policy_support import committed_bootstrap_inventory, pack_bootstrap, pack_stacks
        from stack_records import load_records

        from tools import policy_data

        with pack_bootstrap(policy_data.bootstrap_data(), committed_bootstrap_inventory()), pack_stacks(load_records(PROJECT_DIR / "policy" / "stacks")):
            assert analyze(committed_bootstrap_run) == []


@pytest.mark.parametrize(
    "member",
    [
        f"principalSet://iam.googleapis.com/{POOL}/*",
        f"principalSet://iam.googleapis.com/{POOL}/attribute.repository_owner/acme",
        f"principal://iam.googleapis.com/{POOL}/subject/repo:acme/*",
    ],
)
def test_a_wider_federation_binding_is_rejected(bootstrap, member):
    binding = bootstrap.one(SA_MEMBER, "prod-deploy-github")
    found = violations(P.workload_identity_members, args_of(bootstrap, binding, props={**binding.plain_inputs, "member": member}))
    target = binding.plain_inputs["serviceAccountId"].rsplit("/", 1)[-1]
    assert len(found) == 1 and found[0].startswith(f"{binding.name} (on service account {target!r}): member: {member!r} is not allowed"), found


def test_a_deployer_role_on_a_preview_identity_is_still_allowed_only_by_design(bootstrap):
    """The allow-list of the bootstrap project is ci_roles.yaml: projectIamAdmin is by design for a
    deployer, but a role outside the file (say, owner-equivalent compute.admin) is not."""
    binding = bootstrap.one(PROJECT_MEMBER, "ci-dev-preview-compute-viewer")
    [message] = violations(P.grant_allow_list, args_of(bootstrap, binding, props={**binding.plain_inputs, "role": "roles/compute.admin"}))
    assert message.startswith(f"{binding.name} (on project ") and "is not a grant gpu-platform-bootstrap makes by design" in message


# --- Configuration ---------------------------------------------------------------------------------


def test_every_configuration_problem_is_reported_at_once_and_nothing_is_registered(run_bootstrap):
    values = shipped_configuration()
    values[NS + "github"] = {"repository": "gpu-platform", "repositoryId": "abc"}
    values[NS + "environments"][0]["deploy"] = {"pullRequests": True}
    values[NS + "environments"][1]["deploy"] = {"ref": "refs/heads/release"}
    values[NS + "environments"][1]["preview"] = {"environment": "production", "ref": MAIN_REF}
    values[NS + "pulumiCloud"] = {"manage": True}
    with pytest.raises(pulumi.RunError) as raised:
        run_bootstrap(values)
    message = str(raised.value)
    for expected in (
        "github.repository: 'gpu-platform' is not allowed; allowed: <owner>/<name>",
        "github.repositoryId: 'abc' is not allowed",
        "environments[0].deploy.pullRequests: a pull request may never deploy",
        "environments[1].deploy.ref: 'refs/heads/release' is not the protected branch; allowed: refs/heads/main",
        "environments[1].preview: set exactly one of environment, ref, pullRequests",
        "pulumiCloud.organization: not set",
    ):
        assert expected in message, message
    assert raised.value.registrations == []  # type: ignore[attr-defined]


def test_the_stack_file_sets_only_declared_keys():
    declared = set(yaml_io.load((BOOTSTRAP_DIR / "Pulumi.yaml").read_text())["config"])
    keys = {k.split(":", 1)[1] for k in yaml_io.load((BOOTSTRAP_DIR / "Pulumi.ci.yaml").read_text())["config"] if k.startswith(NS)}
    assert keys <= declared


def test_bootstrap_pins_match_the_program():
    bootstrap, program = requirement_pins(BOOTSTRAP_DIR / "requirements.txt"), {**requirement_pins(PROJECT_DIR / "requirements.txt"), **requirement_pins(PROJECT_DIR / "requirements-dev.txt")}
    assert set(bootstrap) == {"pulumi", "pulumi-gcp", "pulumi-github", "pulumi-pulumiservice", "pyyaml"}
    assert {name: program.get(name) for name in bootstrap} == bootstrap


# --- GitHub ---------------------------------------------------------------------------------------


def test_main_is_protected_with_reviews_the_test_job_and_the_previews_gates(bootstrap):
    protection = bootstrap.one("github:index/branchProtection:BranchProtection")
    assert protection.input("pattern") == "main" and protection.input("repositoryId") == "gpu-platform"
    assert protection.input("enforceAdmins") is True and protection.input("allowsForcePushes") is False
    [reviews] = protection.input("requiredPullRequestReviews")
    assert reviews["requiredApprovingReviewCount"] >= 1 and reviews["dismissStaleReviews"] is True
    [checks] = protection.input("requiredStatusChecks")
    workflow = yaml.safe_load((PROJECT_DIR / ".github" / "workflows" / "pulumi.yml").read_text())
    assert checks["contexts"] == [workflow["jobs"]["test"]["name"], workflow["jobs"]["gates"]["name"]]
    assert checks["strict"] is True


def test_the_environments_the_subjects_stand_for(bootstrap):
    environments = {r.input("environment"): r.plain_inputs for r in bootstrap.of_type("github:index/repositoryEnvironment:RepositoryEnvironment")}
    assert set(environments) == {"production", "production-preview", "drift"}
    protected_only = {"protectedBranches": True, "customBranchPolicies": False}
    for name in ("production", "production-preview"):
        env = environments[name]
        assert env["reviewers"] == [{"teams": [4567890]}] and env["preventSelfReview"] is True and env["canAdminsBypass"] is False, name
    assert environments["production"]["deploymentBranchPolicy"] == protected_only
    assert "deploymentBranchPolicy" not in environments["production-preview"]  # pull-request refs must be able to use it
    assert environments["drift"]["deploymentBranchPolicy"] == protected_only and "reviewers" not in environments["drift"]


def test_the_repository_variables_are_the_outputs(bootstrap):
    variables = {r.input("variableName"): r.input("value") for r in bootstrap.of_type("github:index/actionsVariable:ActionsVariable")}
    assert variables == bootstrap.outputs["githubVariables"]
    assert {r.input("repository") for r in bootstrap.of_type("github:index/actionsVariable:ActionsVariable")} == {"gpu-platform"}


def test_reviewers_are_required_when_github_is_managed(run_bootstrap):
    values = shipped_configuration()
    del values[NS + "github"]["reviewers"]
    with pytest.raises(pulumi.RunError, match=r"github.reviewers: not set; allowed: the teams or users who approve"):
        run_bootstrap(values)
    values[NS + "github"]["manage"] = False
    assert not [r for r in run_bootstrap(values).registrations if r.type.startswith("github:")]


def test_actions_cannot_approve_pull_requests(bootstrap):
    """A preview job holds pull-requests: write while running the branch's code: it must not be
    able to approve its own pull request (pulumi-github 6.15.0 WorkflowRepositoryPermissions)."""
    permissions = bootstrap.one("github:index/workflowRepositoryPermissions:WorkflowRepositoryPermissions")
    assert permissions.plain_inputs == {"repository": "gpu-platform", "defaultWorkflowPermissions": "read", "canApprovePullRequestReviews": False}
    workflow = yaml.safe_load((PROJECT_DIR / ".github" / "workflows" / "pulumi.yml").read_text())
    previews = [job for job in workflow["jobs"].values() if any((s.get("with") or {}).get("command") == "preview" for s in job.get("steps") or [])]
    assert previews and all(job["permissions"]["pull-requests"] == "write" for job in previews)  # why it matters


# --- Every committed stack has what it needs in the bootstrap ------------------------------------------


def committed_stacks() -> dict[str, dict]:
    return {stack: copy.deepcopy(read_stack_values(PROJECT_DIR, stack)) for stack in list_stacks(PROJECT_DIR)}


def coverage_problems(run: ProgramRun, environments: list[dict], stacks: dict[str, dict]) -> list[str]:
    """What the stack files need from a run of the bootstrap and lack: every stack in its
    environment's read and deploy teams and the policy group (CI previews and deploys it, the
    guardrails hold for it), its tenants' existing projects (as the stack files say: `gcpProject:
    <id>`) granted to the environment's CI identities (CI's deployer deploys inline tenants and team
    stacks), and an environment stack that creates team projects its folder and billing account."""
    permitted = {(r.input("team"), r.input("stack")) for r in run.of_type("pulumiservice:index:TeamStackPermission")}
    grouped = {s["name"] for r in run.of_type("pulumiservice:index:PolicyGroup") for s in r.input("stacks")}
    deployers = {(m.group(1), r.input("project")) for r in run.of_type(PROJECT_MEMBER) if (m := re.match(r"serviceAccount:gpu-ci-([a-z0-9]+)-deploy@", r.input("member")))}
    by_name = {e["name"]: e for e in environments}
    problems = []
    for stack, values in stacks.items():
        env = values["gpu-platform:environment"]
        if {(f"gpu-platform-ci-{env}-read", stack), (f"gpu-platform-ci-{env}-deploy", stack)} - permitted or stack not in grouped:
            problems.append(f"{stack}: not among the stacks of bootstrap environment {env!r} (its teams, the policy group)")
            continue
        wanted = (values.get("gpu-platform:platform") or {}).get("tenantProjects")
        given = by_name.get(env, {}).get("tenantProjects") or {}
        if wanted and (given.get("folder"), given.get("billingAccount")) != (wanted["folder"], wanted["billingAccount"]):
            problems.append(f"{stack}: creates team projects in {wanted['folder']}, billed to {wanted['billingAccount']}; its bootstrap entry grants {given or 'nothing'}")
        for tenant in [values.get("gpu-platform:tenant") or {}, *(values.get("gpu-platform:tenants") or [])]:
            project = tenant.get("gcpProject")
            spec = {"id": project} if isinstance(project, str) else project or {}
            if spec.get("id") and not spec.get("create") and (env, spec["id"]) not in deployers:
                problems.append(f"{stack}: tenant {tenant['name']}'s existing project {spec['id']} has no roles of {env}'s CI deployer")
    return problems


def test_every_committed_stack_gets_what_it_needs_from_the_bootstrap(committed_bootstrap_run):
    """This checkout's bootstrap, with this checkout's stack records, covers every stack file."""
    environments = read_stack_values(PROJECT_DIR / "bootstrap", "ci")[NS + "environments"]
    assert coverage_problems(committed_bootstrap_run, environments, committed_stacks()) == []


def test_the_coverage_check_fails_on_what_the_review_found(bootstrap, run_bootstrap, shipped_records_dir, tmp_path):
    """On the stacks as shipped (tests/data/shipped/): a bootstrap run whose records lack the team
    stack (stale records: `make policy-data` not run) and whose prod entry lacks tenantProjects,
    and a tenant moved to an existing project its records do not know."""
    assert list_stacks(SHIPPED_DIR) == sorted(SHIPPED_STACKS)
    stacks = {stack: shipped_values(stack) for stack in SHIPPED_STACKS}
    environments = shipped_configuration()[NS + "environments"]
    assert coverage_problems(bootstrap, environments, stacks) == []
    stacks["dev"]["gpu-platform:tenants"][0]["gcpProject"] = "acme-ml-dev-nlp"  # dev's deployer has no rights there
    for path in shipped_records_dir.glob("*.json"):
        if path.stem != "team-vision-dev":
            (tmp_path / path.name).write_text(path.read_text())
    values = shipped_configuration()
    del values[NS + "environments"][1]["tenantProjects"]
    stale = run_bootstrap(values, tmp_path)
    assert coverage_problems(stale, values[NS + "environments"], stacks) == [
        "dev: tenant nlp's existing project acme-ml-dev-nlp has no roles of dev's CI deployer",
        "prod: creates team projects in folders/123456789012, billed to 012345-6789AB-CDEF01; its bootstrap entry grants nothing",
        "team-vision-dev: not among the stacks of bootstrap environment 'dev' (its teams, the policy group)",
    ]


def test_an_entry_whose_project_is_not_its_stacks_is_refused(run_bootstrap):
    """The entry's project is where the environment's CI identities and their roles go: the one its
    stacks deploy to (each record's project), not a "yours:" value left half edited."""
    values = shipped_configuration()
    values[NS + "environments"][0]["project"] = "acme-ml-other"
    with pytest.raises(pulumi.RunError) as raised:
        run_bootstrap(values)
    message = str(raised.value)
    for stack in ("dev", "team-vision-dev"):
        assert f"environments[0].project: 'acme-ml-other' is not the project of its stack {stack} ('acme-ml-dev' in policy/stacks/{stack}.json)" in message
