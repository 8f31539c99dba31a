"""docs/deploy.md's commands work when pasted: every kubectl command names the namespace it acts in,
and nothing is to be created in the host cluster before the `pulumi up` that creates the cluster."""

from __future__ import annotations

import re

from config.facts import PLATFORM_NAMESPACE
from config.stack_files import PROJECT_DIR

DEPLOY = (PROJECT_DIR / "docs" / "deploy.md").read_text()


def commands() -> list[str]:
    """The shell commands of the page's sh blocks, continuation lines joined."""
    blocks = re.findall(r"```sh\n(.*?)```", DEPLOY, flags=re.S)
    return [line.strip() for block in blocks for line in block.replace("\\\n", " ").splitlines() if line.strip()]


def test_every_kubectl_command_names_its_namespace():
    kubectl = [part for c in commands() for part in c.split("|") if re.search(r"\bkubectl\b", part)]
    assert kubectl
    for part in kubectl:
        assert f"-n {PLATFORM_NAMESPACE}" in part, part


def test_the_admin_password_secret_is_never_asked_for_before_the_cluster_exists():
    section = DEPLOY[DEPLOY.index("## The platform's admin login") :]
    section = section[: section.index("\n## ", 1)] if "\n## " in section[1:] else section
    assert "before the environment's first `pulumi up`" not in section
    assert "which the environment's first `pulumi up` creates" in section
