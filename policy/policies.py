"""The gpu-platform guardrails as CrossGuard policies, collected from policy/guardrails/.

Every rule is a plain validator function `fn(args, report_violation)` followed by its policy object
(a resource rule's is a `ResourcePolicy`, which starts every message with the resource's name), so
tests run the policies directly (tests/test_policies*.py) and `policy/__main__.py` only builds the
`PolicyPack` from `POLICIES`.

The pack is self-contained, so `pulumi policy publish policy` uploads everything it needs: it
imports nothing from the repository around it. What it checks against comes from the program's
and the bootstrap's own data through program_data.json (`make policy-data`; a test fails when it
is stale), and the vcluster.yaml inside each VirtualClusterInstance is read with the reader the
program itself uses (vcluster_reader.py).
"""

from __future__ import annotations

from guardrails import (
    backups,
    by_design,
    cost,
    gke,
    iam,
    kubeconfigs,
    placement,
    platform_objects,
    public_ranges,
    recorded,
    reservations,
    supply_chain,
    targets,
    tenancy,
    tenant_placement,
    vcluster_values,
)
from guardrails.backups import BACKUP_PLAN, backups_by_design  # noqa: F401
from guardrails.common import (  # noqa: F401  (re-exported for the tests and the docs check)
    BOOTSTRAP_PROJECT,
    CLUSTER_ENVIRONMENT_LABEL,
    CUSTOM_ROLES,
    DATA,
    FIREWALL,
    GKE_CLUSTER,
    GKE_NODE_POOL,
    HELM_RELEASES,
    INSTANCE_ENVIRONMENT_LABEL,
    INVENTORY,
    NETWORK_PEERINGS,
    NODE_PROVIDER,
    PLATFORM_PROJECT,
    PROGRAM_PROJECT,
    PROJECT,
    SERVICE_ACCOUNT_KEY,
    STACKS,
    VIRTUAL_CLUSTER_INSTANCE,
    WORKLOAD_IDENTITY_USER,
)
from guardrails.by_design import (  # noqa: F401
    commands_by_design,
    instance_charts_by_design,
    kubernetes_rbac_by_design,
    kubernetes_secrets_by_design,
    load_balancer_services,
    node_pool_service_account,
    release_by_design,
    resource_types_by_design,
    tenant_objects_by_design,
)
from guardrails.cost import (  # noqa: F401
    DEFAULT_MAX_GPUS_PER_TENANT,
    GPU_CEILING_NON_PROD,
    GPU_CEILING_PROD,
    MAX_GPUS_CONFIG,
    gpu_ceiling_nonprod,
    gpu_ceiling_prod,
)
from guardrails.gke import (  # noqa: F401
    firewall_not_open,
    gke_hardening,
    gke_prod_deletion_protection,
    no_network_peering,
    private_cluster,
    project_without_default_network,
)
from guardrails.iam import (  # noqa: F401
    conditioned_grants,
    custom_role_least_privilege,
    custom_role_permissions,
    federation_trust,
    grant_allow_list,
    member_kind,
    no_basic_roles,
    no_grants_on_host_network,
    no_service_account_keys,
    role_key,
    workload_identity_members,
)
from guardrails.kubeconfigs import KUBERNETES_PROVIDER, kubernetes_providers_by_design, kubernetes_providers_own_cluster  # noqa: F401
from guardrails.placement import gcp_placement_by_record  # noqa: F401
from guardrails.recorded import stack_resources_by_record  # noqa: F401
from guardrails.platform_objects import one_node_provider, platform_access_by_design, platform_objects_by_design  # noqa: F401
from guardrails.public_ranges import public_ranges_nonprod, public_ranges_prod  # noqa: F401
from guardrails.supply_chain import helm_release_version, instance_chart_versions, node_provider_templates  # noqa: F401
from guardrails.tenancy import (  # noqa: F401
    concrete_scope,
    no_host_cluster_role,
    single_node_provider,
    tenant_isolation,
    unprivileged_control_plane,
)
from guardrails.reservations import reservation_slices  # noqa: F401
from guardrails.targets import data_targets_by_design  # noqa: F401
from guardrails.tenant_placement import control_plane_resources, one_tenant_per_project, tenant_placement_by_design  # noqa: F401
from guardrails.vcluster_values import control_plane_isolation, nat_addresses, values_by_design  # noqa: F401

POLICIES = [
    *by_design.POLICIES,
    *recorded.POLICIES,
    *placement.POLICIES,
    *kubeconfigs.POLICIES,
    *gke.POLICIES,
    *public_ranges.POLICIES,
    *iam.POLICIES,
    *supply_chain.POLICIES,
    *tenancy.POLICIES,
    *tenant_placement.POLICIES,
    *reservations.POLICIES,
    *targets.POLICIES,
    *vcluster_values.POLICIES,
    *platform_objects.POLICIES,
    *cost.POLICIES,
    *backups.POLICIES,
]

# What the opt-in legacy mode (nodeProvider.legacyInfrastructure: true) violates on purpose: the
# official broad role, bound unconditioned, and control planes open to any joining node. A stack
# that opts in lowers exactly these through policy config (docs/guardrails.md "Guardrails").
LEGACY_MODE_POLICIES = [custom_role_permissions, custom_role_least_privilege, conditioned_grants, control_plane_isolation]
