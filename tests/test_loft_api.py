"""The NodeProvider, Project and VirtualClusterInstance objects the program builds use only field
names of the management.loft.sh/v1 API: the JSON names of the platform's OpenAPI document
(loft-sh/loft api/openapi-spec/swagger.json at tag v4.11.2, commit f524f4a6, definitions
com.github.loft-sh.api.v4.pkg.apis.management.v1.* and the storage.v1 types they refer to; node
types: `TerraformNodeTypeSpec` and `NodeTypeOverhead`; docs/sources.md "vCluster Platform API").
A misspelled field fails here, not in
`pulumi up`."""

from __future__ import annotations

from typing import Any

import pytest

NODE_PROVIDER = "kubernetes:management.loft.sh/v1:NodeProvider"
VCI = "kubernetes:management.loft.sh/v1:VirtualClusterInstance"
PROJECT = "kubernetes:management.loft.sh/v1:Project"

GIT = {"repository", "branch", "commit", "tag", "subPath", "credentials", "fetchInterval", "extraEnv"}
TEMPLATE = {"inline": str, "git": GIT, "timeout": str}
ACCESS_RULE = {"users", "teams", "clusterRole"}
OBJECT_ACCESS = {"name", "verbs", "users", "teams", "subresources"}  # storage.v1.Access

# field → allowed sub-fields (a set: leaf fields; a dict: nested objects; a list: items of the list).
NODE_PROVIDER_SPEC = {
    "properties": dict,
    "terraform": {
        "nodeTemplate": TEMPLATE,
        "nodeEnvironmentTemplate": {**TEMPLATE, "infrastructure": TEMPLATE, "kubernetes": TEMPLATE},
        "nodeTypes": [
            {
                "name": str,
                "metadata": {"labels", "annotations"},
                "providerRef": str,
                "properties": dict,
                "resources": dict,
                "overhead": {"kubeReserved"},
                "cost": int,
                "displayName": str,
                "nodeTemplate": TEMPLATE,
                "maxCapacity": int,
            }
        ],
    },
    "bcm": dict,
    "kubeVirt": dict,
    "clusterAPI": dict,
    "metal3": dict,
    "displayName": str,
}
VCI_SPEC = {
    "displayName": str,
    "description": str,
    "owner": {"user", "team"},
    "templateRef": {"name", "version", "syncOnce"},
    "template": {
        "metadata": dict,
        "instanceTemplate": dict,
        "apps": list,
        "charts": [
            {
                "name", "version", "repoURL", "username", "usernameRef", "password", "passwordRef",
                "insecureSkipTlsVerify", "releaseName", "releaseNamespace", "values", "wait", "timeout",
            }
        ],
        "objects": str,
        "access": {"defaultClusterRole": str, "rules": [ACCESS_RULE]},
        "pro": {"enabled"},
        "helmRelease": {
            "chart": {"name", "repo", "username", "password", "version", "insecureSkipTlsVerify"},
            "values": str,
        },
        "accessPoint": dict,
        "forwardToken": bool,
        "forwardTokenMode": str,
        "spaceTemplate": dict,
    },
    "clusterRef": {"cluster", "namespace", "virtualCluster"},
    "parameters": str,
    "extraAccessRules": [ACCESS_RULE],
    "access": [OBJECT_ACCESS],
    "networkPeer": dict,
    "external": bool,
    "standalone": bool,
}
PROJECT_SPEC = {
    "access": [OBJECT_ACCESS],
    "allowedClusters": [{"name"}],
    "allowedNodeProfiles": list,
    "allowedNodeTypes": [{"name"}],
    "allowedRunners": list,
    "allowedTemplates": list,
    "argoCD": dict,
    "defaultNodeProfile": str,
    "description": str,
    "displayName": str,
    "members": [{"clusterRole", "group", "kind", "name"}],
    "namespacePattern": {"space", "virtualCluster"},
    "namespaceTemplate": dict,
    "owner": {"user", "team"},
    "quotas": dict,
    "requirePreset": dict,
    "requireTemplate": dict,
    "vault": dict,
}


def unknown_fields(value: Any, schema: Any, path: str = "spec") -> list[str]:
    if isinstance(schema, list):
        assert isinstance(value, list), f"{path} should be a list"
        return [p for i, item in enumerate(value) for p in unknown_fields(item, schema[0], f"{path}[{i}]")]
    if isinstance(schema, (set, frozenset)):
        assert isinstance(value, dict), f"{path} should be an object"
        return [f"{path}.{k}" for k in value if k not in schema]
    if isinstance(schema, dict):
        assert isinstance(value, dict), f"{path} should be an object"
        found = []
        for key, sub in value.items():
            if key not in schema:
                found.append(f"{path}.{key}")
            else:
                found += unknown_fields(sub, schema[key], f"{path}.{key}")
        return found
    return []  # a leaf type: anything goes below it (maps of properties, free-form objects)


@pytest.mark.parametrize("run_name", ["dev_run", "prod_run"])
def test_node_provider_uses_only_api_fields(request, run_name):
    run = request.getfixturevalue(run_name)
    spec = run.one(NODE_PROVIDER).input("spec")
    assert unknown_fields(spec, NODE_PROVIDER_SPEC) == []
    assert spec["terraform"]["nodeTypes"], "no node types"


def test_virtual_cluster_instances_use_only_api_fields(dev_run, tenant_run):
    instances = dev_run.of_type(VCI) + tenant_run.of_type(VCI)
    assert len(instances) == 3
    assert any(vci.input("spec").get("access") for vci in instances)
    for vci in instances:
        assert unknown_fields(vci.input("spec"), VCI_SPEC) == []


def test_projects_use_only_api_fields(dev_run, tenant_run, prod_run):
    projects = dev_run.of_type(PROJECT) + tenant_run.of_type(PROJECT) + prod_run.of_type(PROJECT)
    assert len(projects) == 4
    for project in projects:
        assert set(project.input("metadata")) <= {"name", "labels"}, "a Project is cluster-scoped"
        assert unknown_fields(project.input("spec"), PROJECT_SPEC) == []
    # A member needs a role (storage.v1.Member requires clusterRole).
    for member in [m for p in projects for m in p.input("spec").get("members") or []]:
        assert member["clusterRole"] and member["kind"] in ("User", "Team") and member["group"] == "storage.loft.sh"


def test_the_walker_catches_a_misspelled_field():
    spec = {"terraform": {"nodeTemplate": {"inline": "x", "gti": {}}}, "displayname": "x"}
    assert unknown_fields(spec, NODE_PROVIDER_SPEC) == ["spec.terraform.nodeTemplate.gti", "spec.displayname"]


def test_node_types_carry_integers_where_the_api_wants_int64(dev_run):
    for node_type in dev_run.one(NODE_PROVIDER).input("spec", "terraform", "nodeTypes"):
        assert "cost" not in node_type or float(node_type["cost"]).is_integer()
        assert node_type.get("maxCapacity") is None or float(node_type["maxCapacity"]).is_integer()
        assert all(isinstance(v, str) for v in node_type["resources"].values())
        assert all(isinstance(v, str) for v in node_type["properties"].values())


def test_node_types_send_the_full_shape_as_resources_and_the_reserve_as_overhead(dev_run):
    """TerraformNodeTypeSpec.resources is "the full resources for a single node"; the kubelet's share
    goes to overhead.kubeReserved (platform 4.11.2 OpenAPI spec)."""
    from config.catalog import load_catalog, reserve

    catalog = load_catalog()
    node_types = dev_run.one(NODE_PROVIDER).input("spec", "terraform", "nodeTypes")
    g2 = next(nt for nt in node_types if nt["properties"]["gpu-platform/instance-type"] == "g2-standard-8")
    assert g2["resources"] == {"cpu": "8", "memory": "32768Mi", "nvidia.com/gpu": "1"}
    cpu, memory = reserve(8, 32)
    assert g2["overhead"] == {"kubeReserved": {"cpu": f"{cpu}m", "memory": f"{memory}Mi"}}
    # 6 % + 1 % + 2 × 0.5 % + 4 × 0.25 % of a core; 25 % of 4 GiB + 20 % of 4 + 10 % of 8 + 6 % of 16.
    # No eviction threshold: the kubelet keeps that apart (its evictionHard, in the tenant's values).
    assert (cpu, memory) == (90, 3646)  # 3.56 GiB = 3645.44 Mi, rounded up
    for nt in node_types:
        machine = catalog.machines[nt["properties"]["gpu-platform/instance-type"]]
        assert nt["resources"]["cpu"] == str(machine.vcpus)
        assert nt["resources"]["memory"] == f"{int(machine.memory_gb * 1024)}Mi"
