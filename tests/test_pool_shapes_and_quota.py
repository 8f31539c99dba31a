"""Pool shapes (`gpuPools[i].machineTypes`, `maxVcpusPerGpu`) and the limits that follow them, and
the GPU quota of a whole environment: the sums, the scopes, warn or fail."""

from __future__ import annotations

import pytest
import yaml

from config import node_properties as props
from config.catalog import CATALOG_PATH
from config.quota import TenantEntry, quota_lines, quota_scope
from config.stack import EnvironmentStack, load_stack
from policy.kubernetes_reader import LOADER
from shipped_stacks import SHIPPED_DIR, problems

NS = "gpu-platform"


def load(values: dict, stack: str = "dev"):
    return load_stack(values, stack=stack, project_dir=SHIPPED_DIR)


def node(nt) -> float:
    """One node per hour as a person adds it up from config/catalog.yaml: the VM (its node type's
    price) and its boot disk at europe-west4's recorded disk price."""
    raw = yaml.load(CATALOG_PATH.read_text(), Loader=LOADER)["prices"]["europe-west4"]["disks"]  # noqa: S506 - a safe loader
    disk = raw[nt.properties[props.DISK_TYPE]]["usdPerGbMonth"] * int(nt.properties[props.DISK_SIZE_GB]) / 730
    return nt.usd_per_hour + disk


def nlp_pool(stack_values, **pool):
    values = stack_values("dev")
    values[f"{NS}:tenants"][0]["gpuPools"] = [{"gpu": "nvidia-l4", "maxGpus": 4, **pool}]
    env = load(values)
    assert isinstance(env, EnvironmentStack)
    return env.tenants[0].gpu_pools[0]


def test_by_default_a_pool_gets_the_smallest_shape_and_limits_for_it(stack_values):
    pool = nlp_pool(stack_values)
    assert pool.machine_types == ("g2-standard-4",)
    assert pool.limits == {"nvidia.com/gpu": "4", "cpu": "16", "memory": "64Gi"}
    assert {"property": props.INSTANCE_TYPE, "operator": "In", "values": ["g2-standard-4"]} in pool.selector
    # Busy = ceiling: one shape, 4 nodes of it.
    g2_standard_4 = node(pool.node_types[0])
    assert pool.busy_usd_per_hour == pytest.approx(4 * g2_standard_4)
    assert pool.usd_per_hour_ceiling == pytest.approx(4 * g2_standard_4)


def test_machine_types_widen_the_pool_and_its_limits(stack_values):
    pool = nlp_pool(stack_values, machineTypes=["g2-standard-4", "g2-standard-16"])
    assert pool.machine_types == ("g2-standard-4", "g2-standard-16")
    assert pool.limits == {"nvidia.com/gpu": "4", "cpu": "64", "memory": "256Gi"}
    price = {nt.machine_type: node(nt) for nt in pool.node_types}
    assert pool.busy_usd_per_hour == pytest.approx(4 * price["g2-standard-4"])
    assert pool.usd_per_hour_ceiling == pytest.approx(4 * price["g2-standard-16"])


def test_max_vcpus_per_gpu_admits_every_shape_up_to_it(stack_values):
    pool = nlp_pool(stack_values, maxVcpusPerGpu=12)
    assert pool.machine_types == ("g2-standard-4", "g2-standard-8", "g2-standard-12")
    assert pool.limits["cpu"] == str(4 * 12)
    # The ceiling is the limits fully used by the dearest shape they admit, not the family's largest.
    assert pool.usd_per_hour_ceiling == pytest.approx(4 * max(node(nt) for nt in pool.node_types))
    assert "g2-standard-32" not in pool.machine_types


def test_cpu_pool_ceiling_prices_the_nodes_its_limits_admit_of_each_type(stack_values):
    env = load(stack_values("dev"))
    cpu = env.tenants[0].cpu_pool
    prices = {nt.machine_type: node(nt) for nt in cpu.node_types}
    # cpu 8: four e2-standard-2 or two e2-standard-4, never "four of the largest".
    assert cpu.nodes_within_limits(next(nt for nt in cpu.node_types if nt.machine_type == "e2-standard-2")) == 4
    assert cpu.nodes_within_limits(next(nt for nt in cpu.node_types if nt.machine_type == "e2-standard-4")) == 2
    assert cpu.usd_per_hour_ceiling == pytest.approx(max(4 * prices["e2-standard-2"], 2 * prices["e2-standard-4"]))


def test_bad_pool_shapes_are_errors_naming_the_key(stack_values):
    values = stack_values("dev")
    values[f"{NS}:tenants"][0]["gpuPools"] = [
        {"gpu": "nvidia-l4", "maxGpus": 4, "machineTypes": ["g2-standard-4", "g2-standard-24", "n1-standard-4"]},
        {"gpu": "nvidia-l4", "maxGpus": 4, "gpusPerNode": 2, "machineTypes": ["g2-standard-24"], "maxVcpusPerGpu": 8},
        {"gpu": "nvidia-tesla-t4", "maxGpus": 4, "maxVcpusPerGpu": 2},
    ]
    found = problems(values)
    shapes = "g2-standard-4, g2-standard-8, g2-standard-12, g2-standard-16, g2-standard-32"
    what = "of the pool's capacity options in environment dev"
    assert f"tenants[0].gpuPools[0].machineTypes[1]: 'g2-standard-24' is not a shape of 1 × nvidia-l4 {what}; shapes: {shapes}" in found
    assert f"tenants[0].gpuPools[0].machineTypes[2]: 'n1-standard-4' is not a shape of 1 × nvidia-l4 {what}; shapes: {shapes}" in found
    assert "tenants[0].gpuPools[1].maxVcpusPerGpu: set either machineTypes or maxVcpusPerGpu, not both" in found
    assert any(p.startswith("tenants[0].gpuPools[2].maxVcpusPerGpu: 2 admits no shape of 1 × nvidia-tesla-t4; the smallest has 4 vCPUs per GPU") for p in found), found


def test_quota_policy_fail_is_the_prod_default_and_an_error(stack_values):
    values = stack_values("prod")
    values[f"{NS}:nodeProvider"].pop("reservations")  # research's, which these tenants replace
    # Shared tenants add up against the environment's project's quota.
    values[f"{NS}:platform"]["allowSharedIsolation"] = True
    values[f"{NS}:platform"]["approvedTenantSecurity"] = {f"team{i}": {"isolation": "shared"} for i in range(3)}
    values[f"{NS}:tenants"] = [
        {"name": f"team{i}", "isolation": "shared", "network": {"cidr": f"10.160.{4 * i}.0/22"}, "gpuPools": [{"gpu": "nvidia-l4", "maxGpus": 8}]}
        for i in range(3)
    ]
    found = problems(values, "prod")
    assert found == [
        "nodeProvider.gpuQuota.nvidia-l4: GPU quota: the tenants of host project acme-ml-prod may ask for 24 nvidia-l4 on-demand GPUs together "
        "(team0 (tenants[0]): 8, team1 (tenants[1]): 8, team2 (tenants[2]): 8); the quota in us-central1 is 16; "
        "nodeProvider.quotaPolicy is fail (raise the quota or lower the tenants' maxGpus)"
    ]
    values[f"{NS}:nodeProvider"]["quotaPolicy"] = "warn"
    env = load(values, "prod")
    assert [w for w in env.warnings if w.startswith("GPU quota:")] and env.quota[0].exceeded


def test_quota_scopes_follow_the_isolation_mode(stack_values):
    """Each GCP project that runs tenant VMs has its own regional GPU quota: tenants sharing the
    host project add up together against the environment's; a tenant in its own project counts
    alone against that project's, whether it names the project, Pulumi creates it under a name it
    chose, or Pulumi generates the name."""
    import dataclasses

    from config.isolation import TenantProjects
    from config.tenant import Tenant

    env = load(stack_values("dev"))
    facts = dataclasses.replace(
        env.facts,
        gpu_quota={"nvidia-l4": 8},
        tenant_projects=TenantProjects(folder="123", billing_account="012345-6789AB-CDEF01", prefix="acme"),
    )

    def tenant(name: str, **isolation) -> Tenant:
        return Tenant.model_validate(
            {"name": name, "network": {"cidr": "10.160.0.0/22"}, "gpuPools": [{"gpu": "nvidia-l4", "maxGpus": 6}], **isolation}
        )

    tenants = [
        tenant("a", isolation="shared"),
        tenant("b", isolation="shared"),
        tenant("c", gcpProject="team-c-project"),
        tenant("d", gcpProject={"id": "team-d-project", "create": True}),
        tenant("e"),
    ]
    lines = quota_lines([TenantEntry(t, "test") for t in tenants], facts)
    assert [(q.scope, q.asked, q.exceeded) for q in lines] == [
        ("host project acme-ml-dev", 12, True),
        ("project team-c-project", 6, False),
        ("project team-d-project", 6, False),
        ("project acme-dev-e", 6, False),
    ]
    assert quota_scope(tenants[4], facts) == "project acme-dev-e"
    # Projects Pulumi creates have no GPU quota until it is granted, a team's existing project has
    # its own: never "ok" against the environment's numbers.
    assert [(q.new_project, q.state) for q in lines] == [
        (None, "EXCEEDED"),
        (None, "assumed; check the project's quota"),
        ("team-d-project", "new project: request quota"),
        ("acme-dev-e", "new project: request quota"),
    ]
