"""The keys of a stack file the program reads, documented in one place.

`StackKeys` is the `gpu-platform:` namespace as a model: one field per key, its type and default as
Pulumi.yaml declares them, its docstring what the key is for. It is not used to parse a stack
(config/stack.py does that key by key, to report every problem at once); it is the source of the
configuration reference (docs/configuration.md) and of Pulumi.yaml's descriptions
(`make docs`, tools/config_reference.py), and a test holds it to the keys the program reads.
`GcpKeys` documents the two `gcp:` keys an environment stack needs.
"""

from __future__ import annotations

import difflib
import functools
import importlib.metadata
import importlib.util
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from .base import ConfigModel
from .errors import Problem
from .environment import ClusterConfig, PlatformConfig
from .node_provider import NodeProviderConfig
from .monitoring import MonitoringConfig
from .tenant import Tenant


class StackKeys(ConfigModel):
    """The gpu-platform: keys of a stack file."""

    environment: Literal["dev", "staging", "prod"]
    """Every stack: the environment it belongs to, which sets safe defaults (prod: deletion protection, a regional cluster, the REGULAR or STABLE channel)."""
    cluster: ClusterConfig = ClusterConfig()
    """Environment stacks: the GKE host cluster."""
    platform: PlatformConfig = PlatformConfig()
    """Environment stacks: the vCluster Platform, where Pulumi creates teams' GCP projects, and whether tenants may share the environment's project."""
    node_provider: NodeProviderConfig | None = None
    """Environment stacks: the GPU NodeProvider, required there."""
    tenants: tuple[Tenant, ...] = ()
    """Environment stacks: tenants created inline, one virtual cluster each, by default in a GCP project of the team's own."""
    monitoring: MonitoringConfig = MonitoringConfig()
    """Environment stacks: GPU metrics, dashboards, alerts and cost per team (docs/observability.md), and every tenant's monitoring default."""
    platform_admin_password: str = ""
    """No longer read, and refused when set (secret or not), since every preview of the stack decrypts its secrets; the platform's admin password is created inside the cluster, in Secret vcluster-platform-admin-password (docs/deploy.md, "The platform's admin login")."""
    environment_stack: str = ""
    """Tenant stacks: the fully qualified environment stack, <org>/gpu-platform/<stack>; setting it makes this a tenant stack."""
    tenant: Tenant | None = None
    """Tenant stacks: this team's tenant, with the same fields as an entry of `tenants`, by default in a GCP project of its own."""


class GcpKeys(ConfigModel):
    """The gcp: keys the program reads: environment stacks need both."""

    project: str
    """The environment's GCP project, where the host cluster runs (pulumi config set gcp:project <project-id>)."""
    region: str
    """The environment's region, like europe-west4 (pulumi config set gcp:region <region>)."""


@functools.cache
def gcp_provider_keys() -> frozenset[str]:
    """The config keys the gcp provider declares (without `gcp:`), read from the installed SDK's
    own declaration of them: pulumi_gcp/config/vars.py, one `__config__.get…('<key>')` per key
    (pulumi-gcp as pinned in requirements.txt)."""
    spec = importlib.util.find_spec("pulumi_gcp")
    assert spec is not None and spec.submodule_search_locations, "pulumi-gcp is not installed"
    source = (Path(next(iter(spec.submodule_search_locations))) / "config" / "vars.py").read_text()
    return frozenset(re.findall(r"__config__\.get\w*\('(\w+)'\)", source))


def unknown_gcp_keys(keys: Iterable[str]) -> list[Problem]:
    """`gcp:` keys the gcp provider does not know, such as a misspelt `gcp:projet`: reported (the
    program would otherwise report gcp:project missing, and nothing about the key it was given),
    with the key meant where one is close."""
    ours = [f.alias or name for name, f in GcpKeys.model_fields.items()]
    found = []
    for key in sorted(keys):
        name = key.removeprefix("gcp:")
        if not key.startswith("gcp:") or name in ours or name in gcp_provider_keys():
            continue
        meant = difflib.get_close_matches(name, ours, n=1, cutoff=0.6) or difflib.get_close_matches(name, sorted(gcp_provider_keys()), n=1)
        hint = f"; did you mean `gcp:{meant[0]}`?" if meant else f"; this program reads {', '.join(f'gcp:{k}' for k in ours)}"
        found.append(Problem(key, f"unknown key: not a setting of the gcp provider (pulumi-gcp {importlib.metadata.version('pulumi-gcp')}){hint}"))
    return found
