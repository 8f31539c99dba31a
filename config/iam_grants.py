"""The IAM grants the program makes by design (config/iam_grants.yaml): the components take their
role tables from here, and the policy pack's allow-list is generated from the same data."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from . import yaml_io
from .isolation import instance_name_condition, vm_name_condition

GRANTS_PATH = Path(__file__).with_name("iam_grants.yaml")

PRINCIPALS = ("platform", "gkeNodes", "tenantNodes")
SCOPES = ("project", "serviceAccount", "subnetwork")
WHEN = ("persistentDisks", "loadBalancerServices", "monitoring")
TARGETS = ("platform", "tenantNodes", "self")
CONDITIONS = {"vmNames": vm_name_condition, "instanceNames": instance_name_condition}
CUSTOM_PREFIX = "custom:"
PREFIX_PLACEHOLDER = "<PREFIX>"


def condition_templates() -> dict[str, dict[str, str]]:
    """condition name → the condition the program writes, with <PREFIX> where the VM name
    prefix <environment>-<tenant>- goes."""
    return {name: build(PREFIX_PLACEHOLDER) for name, build in CONDITIONS.items()}


@dataclass(frozen=True)
class Grant:
    principal: str
    member: str  # serviceAccount | workloadIdentity:<namespace>/<ksa>
    role: str  # roles/… or custom:<key>
    scope: str
    why: str
    when: str | None = None
    target: str | None = None  # scope serviceAccount: whose account it is bound on
    condition: str | None = None  # a key of CONDITIONS: the IAM condition it always carries
    own_project: bool = False  # scope project: only on the project of the member's account
    # scope project: never on the environment's project (its host cluster's volumes and network)
    not_on_environment_project: bool = False

    @property
    def custom_role_key(self) -> str | None:
        return self.role.removeprefix(CUSTOM_PREFIX) if self.role.startswith(CUSTOM_PREFIX) else None


@functools.lru_cache(maxsize=None)
def load_grants(path: Path = GRANTS_PATH) -> tuple[Grant, ...]:
    grants = []
    for i, raw in enumerate(yaml_io.load(path.read_text())["grants"]):
        grant = Grant(
            raw["principal"],
            raw["member"],
            raw["role"],
            raw["scope"],
            raw["why"],
            raw.get("when"),
            raw.get("target"),
            raw.get("condition"),
            raw.get("ownProject", False),
            raw.get("notOnEnvironmentProject", False),
        )
        where = f"{path.name} grants[{i}]"
        if grant.principal not in PRINCIPALS or grant.scope not in SCOPES or grant.when not in (None, *WHEN):
            raise ValueError(f"{where}: principal, scope or when is not one of {PRINCIPALS}, {SCOPES}, {WHEN}")
        if (grant.target is not None) != (grant.scope == "serviceAccount") or grant.target not in (None, *TARGETS):
            raise ValueError(f"{where}: a grant on a serviceAccount names its target, one of {TARGETS}; others none")
        if grant.condition not in (None, *CONDITIONS) or ((grant.own_project or grant.not_on_environment_project) and grant.scope != "project"):
            raise ValueError(f"{where}: condition is not one of {tuple(CONDITIONS)}, or ownProject or notOnEnvironmentProject is set off a project")
        if not (grant.member == "serviceAccount" or grant.member.startswith("workloadIdentity:")):
            raise ValueError(f"{where}: member {grant.member!r} is neither serviceAccount nor workloadIdentity:<ns>/<ksa>")
        grants.append(grant)
    return tuple(grants)


def predefined_roles(principal: str, scope: str, when: str | None = None) -> dict[str, str]:
    """role → why, for the predefined roles `principal` gets on `scope` (with option `when`)."""
    return {
        g.role: g.why
        for g in load_grants()
        if g.principal == principal and g.scope == scope and g.when == when and g.custom_role_key is None
    }
