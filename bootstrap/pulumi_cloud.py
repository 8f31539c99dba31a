"""The Pulumi Cloud side of CI (pulumi-pulumiservice): per environment a team that may read its
stacks (previews, drift) and one that may update them (the environment stack and its team stacks,
which CI's deploy job updates after it); an OIDC issuer that trusts
GitHub's tokens and hands each job a short-lived token of exactly one of those teams; and the policy
group that enforces the published policy pack on every update of every stack.

A token's team is chosen by claims (pulumi-pulumiservice `AuthPolicyDefinition.rules`): repository,
subject, and the protected branch where the subject does not carry it. Team tokens need the
Enterprise or Business Critical edition (Pulumi docs, "OIDC token types by edition"); "Stack Read"
allows previews and decrypting the stack's secrets, "Stack Write" updates (Pulumi docs,
"Permission sets").
"""

from __future__ import annotations

import pulumi
import pulumi_pulumiservice as ps

from ci_config import DEPENDABOT, GITHUB_ISSUER, MAIN_REF, BootstrapConfig
from from_policy import policy_pack_version

POLICY_PACK = "gpu-platform-guardrails"  # policy/__main__.py PolicyPack(name=…)
TOKEN_LIFETIME_SECONDS = 2 * 3600  # a prod `pulumi up` that creates a regional cluster takes over an hour


def team_name(environment: str, access: str) -> str:
    return f"gpu-platform-ci-{environment}-{access}"


class PulumiCloudAccess(pulumi.ComponentResource):
    teams: dict[str, ps.Team]
    issuer: ps.OidcIssuer
    policy_group: ps.PolicyGroup

    def __init__(self, name: str, config: BootstrapConfig, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-platform-bootstrap:ci:PulumiCloudAccess", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        org, project, repo = config.pulumi_organization, config.pulumi_project, config.repository
        identity = {"repository": repo, "aud": f"urn:pulumi:org:{org}", **({"repository_id": config.repository_id} if config.repository_id else {})}

        self.teams = {}
        # First, before every allow rule: a Dependabot pull request's token gets no team token,
        # as the Google trust refuses it (ci_config.attribute_condition). Pulumi's docs do not say
        # how a deny and an allow matching the same token combine; the Google side holds alone.
        policies: list[ps.AuthPolicyDefinitionArgs] = []
        deny_dependabot = {**identity, "sub": config.pull_request_subject(), "actor": DEPENDABOT}
        for env in config.environments:
            read = self._team(f"{name}-{env.name}-read", org, team_name(env.name, "read"), f"Previews and drift checks of {env.name}", child)
            write = self._team(f"{name}-{env.name}-deploy", org, team_name(env.name, "deploy"), f"Deploys the {env.name} stacks", child)
            self.teams[f"{env.name}-read"], self.teams[f"{env.name}-deploy"] = read, write
            # Every listed stack, team stacks included: CI's deploy job updates them after the
            # environment stack (team stacks are deployed by the environment's deployer only).
            for stack in env.stacks:
                for access, team, scope in (("read", read, ps.TeamStackPermissionScope.READ), ("deploy", write, ps.TeamStackPermissionScope.EDIT)):
                    ps.TeamStackPermission(
                        f"{name}-{env.name}-{access}-{stack}",
                        organization=org,
                        project=project,
                        stack=stack,
                        team=team.name,
                        permission=scope,
                        opts=child,
                    )
            preview_rules = {**identity, "sub": env.preview.subject(repo)}
            drift_rules = {**identity, "sub": config.drift.subject(repo), "ref": MAIN_REF}
            deploy_rules = {**identity, "sub": env.deploy.subject(repo), "ref": MAIN_REF}
            if env.preview.pull_requests:
                policies.insert(
                    0,
                    ps.AuthPolicyDefinitionArgs(
                        decision=ps.AuthPolicyDecision.DENY, token_type=ps.AuthPolicyTokenType.TEAM, team_name=read.name, rules=deny_dependabot
                    ),
                )
            for team, rules in ((read, preview_rules), (read, drift_rules), (write, deploy_rules)):
                policies.append(
                    ps.AuthPolicyDefinitionArgs(
                        decision=ps.AuthPolicyDecision.ALLOW, token_type=ps.AuthPolicyTokenType.TEAM, team_name=team.name, rules=rules
                    )
                )

        self.issuer = ps.OidcIssuer(
            f"{name}-github",
            organization=org,
            name=f"github-{repo.replace('/', '-')}",
            url=GITHUB_ISSUER,
            max_expiration_seconds=TOKEN_LIFETIME_SECONDS,
            policies=policies,
            opts=child,
        )
        stacks = [ps.PolicyGroupStackReferenceArgs(name=s, routing_project=project) for env in config.environments for s in env.stacks]
        # The bootstrap stack itself is guarded too: its Workload Identity bindings, no keys.
        stacks.append(ps.PolicyGroupStackReferenceArgs(name=pulumi.get_stack(), routing_project=pulumi.get_project()))
        self.policy_group = ps.PolicyGroup(
            f"{name}-guardrails",
            name=POLICY_PACK,
            organization_name=org,
            entity_type="stacks",
            mode="preventative",
            stacks=stacks,
            # The version this checkout's pack publishes as (policy/pack_version.py): publish it
            # first (`make policy-publish`), then this stack moves the policy group to it.
            policy_packs=[ps.PolicyGroupPolicyPackReferenceInputArgs(name=POLICY_PACK, version_tag=policy_pack_version())],
            opts=child,
        )
        self.register_outputs({"teams": {k: t.name for k, t in self.teams.items()}, "issuer": self.issuer.name})

    @staticmethod
    def _team(resource_name: str, org: str, name: str, description: str, opts: pulumi.ResourceOptions) -> ps.Team:
        return ps.Team(
            resource_name,
            organization_name=org,
            team_type="pulumi",
            name=name,
            display_name=name,
            description=f"{description} (GitHub Actions through OIDC; no members).",
            opts=opts,
        )
