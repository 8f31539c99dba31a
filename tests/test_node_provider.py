"""GcpNodeProvider: node types from the catalog, our three templates inline, and the opt-in legacy
mode."""

from __future__ import annotations

import pytest
import yaml

import components.templates as templates
from components.node_provider import GcpNodeProviderArgs, node_provider_spec
from config import versions
from config.catalog import load_catalog
from config import capacity as cap
from config.node_types import Offering, generate_node_types
from config.stack import load_stack
from config.stack_files import read_stack_values
from shipped_stacks import SHIPPED_DIR, run_shipped

NODE_PROVIDER = "kubernetes:management.loft.sh/v1:NodeProvider"
VCI = "kubernetes:management.loft.sh/v1:VirtualClusterInstance"


def test_node_provider_is_cluster_scoped_and_named(dev_run):
    provider = dev_run.one(NODE_PROVIDER)
    assert provider.input("apiVersion") == "management.loft.sh/v1" and provider.input("kind") == "NodeProvider"
    assert provider.input("metadata", "name") == "gcp-gpu"
    assert provider.input("metadata", "namespace") is None


def test_templates_are_ours_and_inline(dev_run):
    terraform = dev_run.one(NODE_PROVIDER).input("spec", "terraform")
    assert terraform["nodeTemplate"]["inline"] == templates.NODE_TEMPLATE.read_text()
    environment = terraform["nodeEnvironmentTemplate"]
    assert environment["infrastructure"]["inline"] == (
        templates.ENVIRONMENT_TEMPLATE.read_text()
        .replace(templates.ENVIRONMENT_PLACEHOLDER, "dev")
        .replace(templates.PROJECT_NAMESPACE_PREFIX_PLACEHOLDER, "p-")
    )
    assert "git" not in terraform["nodeTemplate"] and "git" not in environment["infrastructure"]


def test_kubernetes_template_is_ours_with_the_zones_of_the_node_types(dev_run, prod_run):
    for run in (dev_run, prod_run):
        provider = run.one(NODE_PROVIDER)
        kubernetes = provider.input("spec", "terraform", "nodeEnvironmentTemplate", "kubernetes")
        zones = tuple(sorted({nt["properties"]["gpu-platform/zone"] for nt in provider.input("spec", "terraform", "nodeTypes")}))
        assert kubernetes == {"inline": templates.kubernetes_template(zones), "timeout": "30m"}
        assert f'compact(split(",", "{",".join(zones)}"))' in kubernetes["inline"]
        assert "__GPU_PLATFORM_" not in kubernetes["inline"]
    assert zones == ("us-central1-a", "us-central1-b", "us-central1-c")


def test_the_node_provider_sets_no_project_or_region_each_tenant_sets_both(dev_run, prod_run, tenant_run):
    """`project` is the team's in project mode: a second value on the NodeProvider (the host's)
    would meet it in the platform's merge or as a Karpenter requirement. Each tenant's auto-nodes
    entry is the one place both are set, concretely."""
    for run in (dev_run, prod_run):
        spec = run.one(NODE_PROVIDER).input("spec")
        assert not spec.get("properties")
        for node_type in spec["terraform"]["nodeTypes"]:
            assert not {"project", "region"} & set(node_type["properties"])
    instances = [(i, "europe-west4") for run in (dev_run, tenant_run) for i in run.of_type(VCI)] + [(i, "us-central1") for i in prod_run.of_type(VCI)]
    assert len(instances) >= 4
    for instance, region in instances:
        values = yaml.safe_load(instance.input("spec", "template", "helmRelease", "values"))
        [entry] = values["privateNodes"]["autoNodes"]
        assert entry["properties"]["region"] == region
        # The tenant's own project (the team's in project mode), as the instance's annotation says.
        assert entry["properties"]["project"] == instance.input("metadata", "annotations", "gpu-platform/gcp-project")


def test_node_types_are_the_generated_offer(dev_run, stack_values):
    env = load_stack(stack_values("dev"), stack="dev", project_dir=SHIPPED_DIR)
    rendered = {nt["name"]: nt for nt in dev_run.one(NODE_PROVIDER).input("spec", "terraform", "nodeTypes")}
    assert set(rendered) == {nt.name for nt in env.offer.node_types}
    for nt in env.offer.node_types:
        spec = rendered[nt.name]
        assert spec["resources"] == nt.resources
        assert spec["overhead"] == {"kubeReserved": nt.kube_reserved}
        assert spec["properties"] == nt.properties
        assert spec.get("cost") == nt.cost  # left out where the region records no price
        assert spec.get("maxCapacity") == nt.max_capacity
    # g2-standard-8: the full 8 vCPU / 32 GiB; 90m and 3.56 GiB of reserve as overhead (the kubelet's
    # eviction threshold is its own, not part of it: config/catalog.py `reserve`).
    l4 = rendered["g2-standard-8-europe-west4-b-spot"]
    assert l4["resources"] == {"cpu": "8", "memory": "32768Mi", "nvidia.com/gpu": "1"}
    assert l4["overhead"] == {"kubeReserved": {"cpu": "90m", "memory": "3646Mi"}}
    # Pooled types have no maxCapacity: the platform would count every tenant's nodes of the type
    # against it, while quota is each project's (config/node_types.py).
    assert "maxCapacity" not in l4
    # The europe-west4 g2-standard-8 host plus one L4, at Spot and on-demand prices, in milli-USD/h,
    # after rank 1 and before the tie-break (zone b: dev's second zone; g2-standard-8: the L4's
    # second shape): config/capacity.py.
    band, step = cap.RANK_BAND, cap.PRICE_STEP
    assert l4["cost"] == band + round((0.14299 + 0.2438) * 1000) * step + 101 + 1
    assert rendered["g2-standard-8-europe-west4-b"]["cost"] == band + round((0.30857 + 0.58804) * 1000) * step + 101 + 1
    assert l4["properties"]["gpu-platform/capacity-type"] == "spot"
    assert l4["properties"]["gpu-platform/capacity-option"] == "r1-spot"


def test_a_gpu_node_type_without_a_recorded_price_comes_last_in_its_rank():
    # The catalog records no H100 price in us-west1 (config/catalog.yaml says why): its cost is the
    # highest of its rank, never a low one, and never left to the platform's formula, which would
    # put it out of every pool's order.
    offer = generate_node_types(
        catalog=load_catalog(), region="us-west1", zones=("us-west1-a",), gpu_types=("nvidia-h100-80gb",), offering=Offering(spot=True),
        gpu_quota={"nvidia-h100-80gb": 8}, cpu_machine_types=(), gpu_disk=(200, "pd-balanced"), cpu_disk=(50, "pd-balanced"),
    )
    args = GcpNodeProviderArgs(name="gcp-gpu", environment="dev", region="us-west1", node_types=offer.node_types)
    rendered = node_provider_spec(args).to_dict()["terraform"]["nodeTypes"]
    assert rendered and all(nt["cost"] == cap.RANK_BAND + cap.UNPRICED * cap.PRICE_STEP + 1 for nt in rendered)


def test_a_template_change_changes_the_node_provider(tmp_path, monkeypatch):
    node_types = load_stack(read_stack_values(SHIPPED_DIR, "dev"), stack="dev", project_dir=SHIPPED_DIR).offer.node_types
    args = GcpNodeProviderArgs(name="gcp-gpu", environment="dev", region="europe-west4", node_types=node_types)
    before = node_provider_spec(args).to_dict()
    changed = tmp_path / "main.tf"
    changed.write_text(templates.NODE_TEMPLATE.read_text() + "\n# a reviewed change\n")
    monkeypatch.setattr(templates, "NODE_TEMPLATE", changed)
    after = node_provider_spec(args).to_dict()
    assert after["terraform"]["nodeTemplate"]["inline"].endswith("# a reviewed change\n")
    assert after != before


def test_templates_are_read_once_per_program(stack_values):
    values = stack_values("dev")
    values["gpu-platform:tenants"] = values["gpu-platform:tenants"] * 1  # two tenants
    templates.read_template.cache_clear()
    templates.kubernetes_template.cache_clear()
    run_shipped(values, stack="dev")
    assert templates.read_template.cache_info().misses == 3  # node, environment and kubernetes template


@pytest.fixture(scope="module")
def legacy_run(legacy_dev_run):
    return legacy_dev_run  # one run of the legacy mode per session (tests/conftest.py)


def test_legacy_mode_uses_the_official_infrastructure_template_and_broad_role(legacy_run):
    infrastructure = legacy_run.one(NODE_PROVIDER).input("spec", "terraform", "nodeEnvironmentTemplate", "infrastructure")
    assert infrastructure["git"] == {
        "repository": "https://github.com/loft-sh/vcluster-auto-nodes-gcp.git",
        "commit": versions.AUTO_NODES_GCP_COMMIT,
        "subPath": "environment/infrastructure",
    }
    [role] = [r for r in legacy_run.of_type("gcp:projects/iAMCustomRole:IAMCustomRole") if r.input("roleId").endswith("_autoNodes")]
    assert "resourcemanager.projects.setIamPolicy" in role.input("permissions")
    assert len(role.input("permissions")) == 59
    # Pulumi builds no tenant networks then; the template does, from the tenant's CIDR.
    assert not legacy_run.of_type("gpu-platform:tenants:Network")
    assert not legacy_run.of_type("gcp:compute/network:Network")[1:]  # only the GKE network
    vci = legacy_run.one("kubernetes:management.loft.sh/v1:VirtualClusterInstance", "nlp")
    assert "vcluster.com/vpc-cidr: 10.160.0.0/22" in vci.input("spec", "template", "helmRelease", "values")


def test_legacy_mode_is_warned_about(legacy_run):
    [warning] = [w for w in legacy_run.warnings if "legacyInfrastructure" in w]
    assert warning.startswith("nodeProvider.legacyInfrastructure is true: the platform's identity gets the official broad role")
    # Legacy mode binds its broad role on the environment's project, unconditionally, and builds
    # no per-tenant grants of its own.
    [binding] = [m for m in legacy_run.of_type("gcp:projects/iAMMember:IAMMember") if m.input("role") == "projects/acme-ml-dev/roles/gpuPlatform_dev_autoNodes"]
    assert binding.input("condition") is None
    assert not legacy_run.of_type("gpu-platform:tenants:Project")


def test_gpu_node_types_carry_the_gpu_label_and_cpu_types_never_do(dev_run, prod_run):
    """Every GPU node type the NodeProvider registers carries NFD's NVIDIA PCI label, by which the
    GPU Operator deploys its operands (config/node_properties.py GPU_NODE_LABELS); a CPU node type
    never does, and none presets nvidia.com/gpu.present, which the operator writes itself."""
    from config import node_properties as props

    for run in (dev_run, prod_run):
        node_types = run.one(NODE_PROVIDER).input("spec", "terraform", "nodeTypes")
        gpu = [nt for nt in node_types if nt["properties"][props.ACCELERATOR] != props.NO_ACCELERATOR]
        cpu = [nt for nt in node_types if nt["properties"][props.ACCELERATOR] == props.NO_ACCELERATOR]
        assert gpu and cpu
        for nt in gpu:
            assert nt["properties"]["feature.node.kubernetes.io/pci-10de.present"] == "true", nt["name"]
        for nt in cpu:
            assert "feature.node.kubernetes.io/pci-10de.present" not in nt["properties"], nt["name"]
        assert not any("nvidia.com/gpu.present" in nt["properties"] for nt in node_types)
