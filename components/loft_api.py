"""Typed builders for the vCluster Platform's `management.loft.sh/v1` objects we create.

The Kubernetes SDK has no types for these custom resources, so a misspelled field would only
surface in a real `pulumi up`. These dataclasses are the only way the program builds them; their
field names are checked in tests/test_loft_api.py against the API's JSON field lists (the platform's
OpenAPI document, loft-sh/loft api/openapi-spec/swagger.json at tag v4.11.2, definitions
com.github.loft-sh.api.v4.pkg.apis.management.v1.*; see docs/sources.md "vCluster Platform API").
Unset fields (None) are left out.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

API_VERSION = "management.loft.sh/v1"


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


class ApiObject:
    """Serialises dataclass fields to the API's camelCase JSON, dropping unset fields."""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            if value is None:
                continue
            out[f.metadata.get("json", _camel(f.name))] = _plain(value)
        return out


def _plain(value: Any) -> Any:
    if isinstance(value, ApiObject):
        return value.to_dict()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


# --- NodeProvider (cluster-scoped) -----------------------------------------------------------


@dataclass
class GitSource(ApiObject):
    repository: str
    sub_path: str | None = None
    commit: str | None = None
    tag: str | None = None
    branch: str | None = None


@dataclass
class TerraformTemplate(ApiObject):
    inline: str | None = None
    git: GitSource | None = None
    timeout: str | None = None


@dataclass
class NodeEnvironmentTemplate(ApiObject):
    infrastructure: TerraformTemplate | None = None
    kubernetes: TerraformTemplate | None = None


@dataclass
class NodeTypeOverhead(ApiObject):
    kube_reserved: dict[str, str] | None = None  # kubelet and other system daemons


@dataclass
class NodeTypeSpec(ApiObject):
    name: str
    resources: dict[str, str]  # the node's full resources
    properties: dict[str, str]
    overhead: NodeTypeOverhead | None = None
    cost: int | None = None
    max_capacity: int | None = None
    display_name: str | None = None


@dataclass
class TerraformSpec(ApiObject):
    node_template: TerraformTemplate
    node_environment_template: NodeEnvironmentTemplate
    node_types: list[NodeTypeSpec] = field(default_factory=list)


@dataclass
class NodeProviderSpec(ApiObject):
    terraform: TerraformSpec
    properties: dict[str, str] | None = None
    display_name: str | None = None


# --- VirtualClusterInstance (namespaced, in the project namespace) ----------------------------


@dataclass
class ChartRef(ApiObject):
    name: str
    repo: str
    version: str


@dataclass
class HelmRelease(ApiObject):
    chart: ChartRef
    values: str  # the whole vcluster.yaml as one YAML string


@dataclass
class TemplateChart(ApiObject):
    name: str
    repo_url: str = field(metadata={"json": "repoURL"})
    version: str
    release_name: str | None = None
    release_namespace: str | None = None
    values: str | None = None
    wait: bool | None = None
    timeout: str | None = None


@dataclass
class AccessRule(ApiObject):
    cluster_role: str
    users: list[str] | None = None
    teams: list[str] | None = None


@dataclass
class InstanceAccess(ApiObject):
    default_cluster_role: str | None = None
    rules: list[AccessRule] | None = None


@dataclass
class ProSettings(ApiObject):
    enabled: bool


@dataclass
class VirtualClusterTemplate(ApiObject):
    helm_release: HelmRelease
    charts: list[TemplateChart] | None = None
    objects: str | None = None  # in-tenant objects, one multi-document YAML string
    access: InstanceAccess | None = None
    pro: ProSettings | None = None
    forward_token: bool | None = None


@dataclass
class ClusterRef(ApiObject):
    cluster: str
    namespace: str


@dataclass
class ObjectAccess(ApiObject):
    """storage.v1.Access: who may do what with the platform object itself (not inside it)."""

    verbs: list[str]
    name: str | None = None
    users: list[str] | None = None
    teams: list[str] | None = None
    subresources: list[str] | None = None


@dataclass
class VirtualClusterInstanceSpec(ApiObject):
    template: VirtualClusterTemplate
    cluster_ref: ClusterRef
    display_name: str | None = None
    description: str | None = None
    extra_access_rules: list[AccessRule] | None = None
    access: list[ObjectAccess] | None = None


# --- Project (cluster-scoped; the platform creates its namespace p-<name>) ----------------------


@dataclass
class ProjectMember(ApiObject):
    """storage.v1.Member: kind User or Team of group storage.loft.sh, with a project role."""

    kind: str
    name: str
    cluster_role: str
    group: str = "storage.loft.sh"


@dataclass
class AllowedCluster(ApiObject):
    name: str


@dataclass
class AllowedNodeType(ApiObject):
    name: str  # a NodeType's name, or "<provider>.*" for every node type of a NodeProvider


@dataclass
class ProjectSpec(ApiObject):
    display_name: str | None = None
    description: str | None = None
    members: list[ProjectMember] | None = None
    allowed_clusters: list[AllowedCluster] | None = None
    # Unset: every node type is allowed; an empty list: none (management.v1.ProjectSpec).
    allowed_node_types: list[AllowedNodeType] | None = None
