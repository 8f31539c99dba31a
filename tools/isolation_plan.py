"""The offline plan's view of tenant isolation (hooks in tools/plan.py): per tenant, its GCP project
and isolation mode (`tenant_line`, `tenant_fields`), and what each security setting beyond the safe
value lets its pods reach (`REACH`, also read by the comparison's report, tools/plan_compare.py).
"""

from __future__ import annotations

from typing import Any

from config.isolation import placement
from config.tenant_security import SETTINGS, as_yaml

# --- per tenant ------------------------------------------------------------------------------------


# What each value of a security setting beyond the safe one lets the team's pods reach, for the plan.
REACH = {
    ("isolation", "shared"): (
        "its VMs and node identity live in the environment's project: a pod with the node identity reads every VM's metadata there "
        "(other shared teams' join data, the host cluster's nodes)"
    ),
    ("loadBalancerServices", True): "its node identity manages load balancers and firewall rules of its project",
    ("nodeMetadata", "exposed"): "every pod on its nodes can obtain the node identity's token from the metadata server",
    ("podSecurityStandard", "privileged"): (
        "any pod may use hostNetwork, run privileged or mount host paths: it reaches the metadata server, and so the node "
        "identity, whatever nodeMetadata says, and takes over its node"
    ),
}


def reach_notes(settings: dict[str, Any]) -> list[str]:
    """What a tenant's security settings beyond the safe values let its pods reach."""
    return [f"{key} {as_yaml(value)}: {REACH[key, value]}" for key, value in settings.items() if (key, value) in REACH]


def tenant_fields(plan: Any, tenant_plan: Any) -> dict[str, Any]:
    """GCP project and isolation of one tenant of a StackPlan (tools/plan.py)."""
    facts = plan.loaded.facts
    tenant = tenant_plan.tenant
    where = placement(tenant, environment=facts.environment, host_project=facts.project, tenant_projects=facts.tenant_projects)
    if where is None:  # the program refused it already; the plan never gets here
        return {"gcpProject": None, "isolation": tenant.isolation}
    return {
        "gcpProject": where.project,
        "isolation": where.isolation,
        "projectCreated": where.create,
        "natAddresses": 0 if facts.legacy_infrastructure else tenant.network.nat_addresses,
        "nodeMetadata": tenant.node_metadata,
        "loadBalancerServices": tenant.load_balancer_services,
        "persistentDisks": tenant.persistent_disks,
        "podSecurityStandard": tenant.pod_security_standard,
    }


def tenant_line(plan: Any, tenant_plan: Any) -> str:
    f = tenant_fields(plan, tenant_plan)
    if f["isolation"] == "shared":
        where = f"GCP project {f['gcpProject']} (shared with the environment and its other shared tenants: see the warning)"
    else:
        where = f"GCP project {f['gcpProject']} ({'created by Pulumi' if f['projectCreated'] else 'existing'}, the team's own)"
    line = (
        f"isolation {f['isolation']}: {where}; control plane accepts joins from {f['natAddresses']} static NAT address(es) only; "
        f"node metadata {f['nodeMetadata']}; pod security {f['podSecurityStandard']}; load balancers {as_yaml(f['loadBalancerServices'])}; "
        f"persistent disks {as_yaml(f['persistentDisks'])}"
    )
    notes = reach_notes({key: f[key] for key in SETTINGS if key in f})
    return line + "".join(f"\n    SECURITY: {note}" for note in notes)
