"""The GitHub side of CI (pulumi-github): what the identities' token subjects rely on, as code.

- `main` protected: changes arrive through reviewed pull requests, so "jobs of refs/heads/main"
  means reviewed code; no force push, no deletion, admins included; a pull request merges only when
  its tests and its previews with their destroy gates passed (`REQUIRED_CHECKS`).
- Each deployment environment (`production`): required reviewers, who may not approve their own
  run, no admin bypass, and only protected branches may deploy to it.
- Each preview environment (`production-preview`): required reviewers, not self-approved.
- The drift environment: only protected branches (no reviewers: it runs on a schedule).
- Actions' own token: read-only by default, and it may not approve pull requests. A preview job
  holds `pull-requests: write` (its comment) while running the branch's code: with approvals
  allowed, that code could approve its own pull request and count as the review `main` requires.
- The repository variables the workflows read (no secrets exist).

GitHub's environment rules are what the subjects `repo:<r>:environment:<name>` stand for; the
Workload Identity provider adds the ref check on top for the deployment and drift environments.
"""

from __future__ import annotations

import pulumi
import pulumi_github as github

from ci_config import BootstrapConfig

# The status checks a pull request needs before it merges: .github/workflows/pulumi.yml's jobs `test`
# and `gates` (every preview of the stacks the change touches and its destroy gate, or no reason to run).
TEST_CHECK = "Unit tests and offline plan"
GATES_CHECK = "Previews and destroy gates"
REQUIRED_CHECKS = (TEST_CHECK, GATES_CHECK)


class GithubRepository(pulumi.ComponentResource):
    environments: dict[str, github.RepositoryEnvironment]
    workflow_permissions: github.WorkflowRepositoryPermissions

    def __init__(self, name: str, config: BootstrapConfig, variables: dict[str, pulumi.Input[str]], opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-platform-bootstrap:ci:GithubRepository", name, None, opts)
        owner, repository = config.repository.split("/", 1)
        provider = github.Provider(f"{name}-provider", owner=owner, opts=pulumi.ResourceOptions(parent=self))
        child = pulumi.ResourceOptions(parent=self, provider=provider)
        reviewers = [github.RepositoryEnvironmentReviewerArgs(teams=list(config.reviewer_teams) or None, users=list(config.reviewer_users) or None)]

        github.BranchProtection(
            f"{name}-main",
            repository_id=repository,
            pattern="main",
            enforce_admins=True,
            allows_deletions=False,
            allows_force_pushes=False,
            required_pull_request_reviews=[
                github.BranchProtectionRequiredPullRequestReviewArgs(
                    required_approving_review_count=1, dismiss_stale_reviews=True, require_last_push_approval=True
                )
            ],
            required_status_checks=[github.BranchProtectionRequiredStatusCheckArgs(strict=True, contexts=list(REQUIRED_CHECKS))],
            opts=child,
        )

        # pulumi-github 6.15.0 WorkflowRepositoryPermissions (GitHub "Workflow permissions" of the
        # repository's Actions settings): GITHUB_TOKEN read-only unless a job asks for more, and
        # never able to approve a pull request.
        self.workflow_permissions = github.WorkflowRepositoryPermissions(
            f"{name}-workflow-permissions",
            repository=repository,
            default_workflow_permissions="read",
            can_approve_pull_request_reviews=False,
            opts=child,
        )

        protected_only = github.RepositoryEnvironmentDeploymentBranchPolicyArgs(protected_branches=True, custom_branch_policies=False)

        def environment(env_name: str, **rules) -> None:
            self.environments[env_name] = github.RepositoryEnvironment(
                f"{name}-{env_name}", repository=repository, environment=env_name, can_admins_bypass=False, opts=child, **rules
            )

        self.environments = {}
        for env in config.environments:
            if env.deploy.environment:
                environment(env.deploy.environment, reviewers=reviewers, prevent_self_review=True, deployment_branch_policy=protected_only)
            if env.preview.environment:
                # Pull-request refs are never protected branches: no branch policy, reviewers only.
                environment(env.preview.environment, reviewers=reviewers, prevent_self_review=True)
        environment(config.drift_environment, deployment_branch_policy=protected_only)
        for variable, value in variables.items():
            github.ActionsVariable(f"{name}-{variable.lower().replace('_', '-')}", repository=repository, variable_name=variable, value=value, opts=child)
        self.register_outputs({"environments": sorted(self.environments)})
