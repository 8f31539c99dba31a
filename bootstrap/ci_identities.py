"""The Google side of CI: a Workload Identity pool that trusts GitHub's OIDC tokens of one
repository, and per environment three service accounts without keys, each reachable by exactly one
kind of GitHub job:

    deploy   `pulumi up`                       jobs of refs/heads/main (dev) or of environment `production` (prod)
    preview  `pulumi preview`, read-only       pull-request jobs (dev) or environment `production-preview` (prod)
    drift    `pulumi preview --refresh`        environment `drift`, from refs/heads/main only

Roles come from ci_roles.yaml (docs/ci.md "The identities" lists the same). A binding names one
token subject (`principal://…/subject/<sub>`), never a whole pool or repository owner: Google's
principal identifiers, https://cloud.google.com/iam/docs/principal-identifiers, and
google-github-actions/auth README (tag v3.0.0), "Direct Workload Identity Federation" and its
warning about conditioning on repository_owner alone.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import pulumi
import pulumi_gcp as gcp
import yaml

from ci_config import GITHUB_ISSUER, IDENTITY_KINDS, POOL_ID, PROVIDER_ID, BootstrapConfig, Environment, account_id

ROLES_PATH = Path(__file__).with_name("ci_roles.yaml")
CUSTOM = "custom:"
WORKLOAD_IDENTITY_USER = "roles/iam.workloadIdentityUser"
# What the pool project and each environment project must serve for the token exchange.
POOL_APIS = ("iam.googleapis.com", "iamcredentials.googleapis.com", "sts.googleapis.com", "cloudresourcemanager.googleapis.com")
ENVIRONMENT_APIS = ("iam.googleapis.com", "iamcredentials.googleapis.com", "cloudresourcemanager.googleapis.com")
# google.subject is the token's `sub` (repository + environment, ref or pull_request); the others
# are kept for audit logs and principalSet lookups.
ATTRIBUTE_MAPPING = {
    "google.subject": "assertion.sub",
    "attribute.repository": "assertion.repository",
    "attribute.repository_id": "assertion.repository_id",
    "attribute.ref": "assertion.ref",
}


@dataclass(frozen=True)
class RoleGrant:
    role: str  # roles/… or custom:<key>
    why: str


@functools.lru_cache(maxsize=None)
def load_ci_roles(path: Path = ROLES_PATH) -> dict:
    return yaml.safe_load(path.read_text())


def identity_roles(kind: str, scope: str) -> list[RoleGrant]:
    return [RoleGrant(e["role"], e["why"]) for e in load_ci_roles()["identities"][kind].get(scope) or []]


class GithubTrust(pulumi.ComponentResource):
    """The Workload Identity pool and its GitHub provider, with the attribute condition."""

    pool: gcp.iam.WorkloadIdentityPool
    provider: gcp.iam.WorkloadIdentityPoolProvider

    def __init__(self, name: str, config: BootstrapConfig, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-platform-bootstrap:ci:GithubTrust", name, None, opts)
        apis = [
            gcp.projects.Service(f"{name}-{api.split('.')[0]}", project=config.pool_project, service=api, disable_on_destroy=False, opts=pulumi.ResourceOptions(parent=self))
            for api in POOL_APIS
        ]
        after_apis = pulumi.ResourceOptions(parent=self, depends_on=apis)
        self.pool = gcp.iam.WorkloadIdentityPool(
            f"{name}-pool",
            project=config.pool_project,
            workload_identity_pool_id=POOL_ID,
            display_name="GitHub Actions",
            description=f"GitHub Actions of {config.repository}: deploy, preview and drift identities of gpu-platform.",
            opts=after_apis,
        )
        self.provider = gcp.iam.WorkloadIdentityPoolProvider(
            f"{name}-provider",
            project=config.pool_project,
            workload_identity_pool_id=self.pool.workload_identity_pool_id,
            workload_identity_pool_provider_id=PROVIDER_ID,
            display_name="GitHub",
            description=f"Tokens of {config.repository} only; deployment and drift environments only from the protected branch.",
            attribute_mapping=ATTRIBUTE_MAPPING,
            attribute_condition=config.attribute_condition(),
            oidc=gcp.iam.WorkloadIdentityPoolProviderOidcArgs(issuer_uri=GITHUB_ISSUER),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.register_outputs({"pool": self.pool.name, "provider": self.provider.name})

    def principal(self, subject: str) -> pulumi.Output[str]:
        """The one GitHub job subject, as an IAM member of this pool."""
        return self.pool.name.apply(lambda pool: f"principal://iam.googleapis.com/{pool}/subject/{subject}")


class EnvironmentIdentities(pulumi.ComponentResource):
    """One environment's deploy, preview and drift service accounts, their roles, and the one
    GitHub subject each may be obtained by."""

    accounts: dict[str, gcp.serviceaccount.Account]
    emails: dict[str, pulumi.Output[str]]
    subjects: dict[str, str]

    def __init__(self, name: str, config: BootstrapConfig, environment: Environment, trust: GithubTrust, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-platform-bootstrap:ci:EnvironmentIdentities", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        apis = [
            gcp.projects.Service(f"{name}-{api.split('.')[0]}", project=environment.project, service=api, disable_on_destroy=False, opts=child)
            for api in ENVIRONMENT_APIS
        ]
        after_apis = pulumi.ResourceOptions(parent=self, depends_on=apis)
        custom_roles = self._custom_roles(name, config, environment, after_apis)

        self.accounts, self.emails, self.subjects = {}, {}, {}
        for kind in IDENTITY_KINDS:
            spec = load_ci_roles()["identities"][kind]
            account = gcp.serviceaccount.Account(
                f"{name}-{kind}",
                project=environment.project,
                account_id=account_id(environment.name, kind),
                display_name=f"gpu-platform CI {environment.name} {kind}",
                description=f"{spec['description']} ({environment.name}). No keys: GitHub jobs reach it through Workload Identity Federation.",
                opts=after_apis,
            )
            member = account.email.apply(lambda email: f"serviceAccount:{email}")
            for grant in identity_roles(kind, "project"):
                role, role_resource = custom_roles.get(grant.role, (grant.role, None))
                gcp.projects.IAMMember(
                    f"{name}-{kind}-{_suffix(grant.role)}",
                    project=environment.project,
                    role=role,
                    member=member,
                    opts=pulumi.ResourceOptions(parent=self, depends_on=[*apis, *([role_resource] if role_resource else [])]),
                )
            for team_project in environment.team_projects:
                for grant in identity_roles(kind, "teamProject"):
                    gcp.projects.IAMMember(
                        f"{name}-{kind}-{team_project}-{_suffix(grant.role)}", project=team_project, role=grant.role, member=member, opts=child
                    )
            if environment.tenant_projects.folder:
                for grant in identity_roles(kind, "folder"):
                    gcp.folder.IAMMember(
                        f"{name}-{kind}-folder-{_suffix(grant.role)}", folder=environment.tenant_projects.folder, role=grant.role, member=member, opts=child
                    )
            if environment.tenant_projects.billing_account:
                for grant in identity_roles(kind, "billingAccount"):
                    gcp.billing.AccountIamMember(
                        f"{name}-{kind}-billing-{_suffix(grant.role)}",
                        billing_account_id=environment.tenant_projects.billing_account,
                        role=grant.role,
                        member=member,
                        opts=child,
                    )
            subject = config.jobs(environment, kind).subject(config.repository)
            gcp.serviceaccount.IAMMember(
                f"{name}-{kind}-github",
                service_account_id=account.name,
                role=WORKLOAD_IDENTITY_USER,
                member=trust.principal(subject),
                opts=child,
            )
            self.accounts[kind], self.emails[kind], self.subjects[kind] = account, account.email, subject
        self.register_outputs({"emails": self.emails, "subjects": self.subjects})

    def _custom_roles(
        self, name: str, config: BootstrapConfig, environment: Environment, opts: pulumi.ResourceOptions
    ) -> dict[str, tuple[str, gcp.projects.IAMCustomRole]]:
        """custom:<key> → (the role's full name, the role), for every custom role an identity is given."""
        used = {g.role for kind in IDENTITY_KINDS for g in identity_roles(kind, "project") if g.role.startswith(CUSTOM)}
        names = {}
        for role in sorted(used):
            key = role.removeprefix(CUSTOM)
            spec = load_ci_roles()["customRoles"][key]
            role_id = f"{config.role_id_prefix}_{key}"
            created = gcp.projects.IAMCustomRole(
                f"{name}-{key}",
                project=environment.project,
                role_id=role_id,
                title=spec["title"],
                description=spec["description"],
                permissions=list(spec["permissions"]),
                stage="GA",
                opts=opts,
            )
            # Known before the role exists, so previews (and the policy pack) see it.
            names[role] = (f"projects/{environment.project}/roles/{role_id}", created)
        return names


def _suffix(role: str) -> str:
    return role.rsplit("/", 1)[-1].removeprefix(CUSTOM).replace(".", "-").replace("_", "-").lower()
