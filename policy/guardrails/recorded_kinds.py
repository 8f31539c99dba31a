"""The kinds stack-resources-by-record (guardrails/recorded.py) holds, and what it admits of each
beside the record: how a kind is recorded and matched (`SPECS`), the defaults its provider's Check
fills in (`PROVIDER_DEFAULTS`, each with its upstream source) and the forms of values the cloud
assigns (`COMPUTED`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from . import recorded_forms as forms
from .common import (  # the types several policies name; the rest below are this policy's own
    ADDRESS,
    BACKUP_PLAN,
    DATASET,
    KUBERNETES_PROVIDER,
    MONITORED_PROJECT,
    RESTORE_PLAN,
    SERVICE,
    TABLE,
    CUSTOM_ROLES,
    DATA,
    FIREWALL,
    GKE_CLUSTER,
    GKE_NODE_POOL,
    HELM_RELEASES,
    NODE_PROVIDER,
    PLATFORM_PROJECT,
    PROJECT,
    VIRTUAL_CLUSTER_INSTANCE,
)

GCP_PROVIDER = "pulumi:providers:gcp"
NOTIFICATION_CHANNEL = "gcp:monitoring/notificationChannel:NotificationChannel"
ALERT_POLICY = "gcp:monitoring/alertPolicy:AlertPolicy"
NAMESPACE = "kubernetes:core/v1:Namespace"
RBAC_TYPES = tuple(f"kubernetes:rbac.authorization.k8s.io/v1:{kind}" for kind in ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"))
NETWORK = "gcp:compute/network:Network"
SUBNETWORK = "gcp:compute/subnetwork:Subnetwork"
ROUTER = "gcp:compute/router:Router"
ROUTER_NAT = "gcp:compute/routerNat:RouterNat"
RESERVATION = "gcp:compute/reservation:Reservation"
API_SERVICE = "gcp:projects/service:Service"
SERVICE_ACCOUNT = "gcp:serviceaccount/account:Account"
IAM_MEMBERS = ("gcp:projects/iAMMember:IAMMember", "gcp:serviceaccount/iAMMember:IAMMember", "gcp:compute/subnetworkIAMMember:SubnetworkIAMMember")
COMMAND = "command:local:Command"
COMMAND_PROVIDER = "pulumi:providers:command"
# The provider versions the program pins (program_data.json, from its installed SDKs).
PROVIDER_VERSIONS: Mapping[str, str] = DATA["providerVersions"]
SOURCE = "policy/stacks/<stack>.json (make policy-data)"


@dataclass(frozen=True)
class Spec:
    """How one kind is recorded and matched: `key`, the field naming one resource of the kind (None:
    the stack's resources of the kind are compared as a set); `fields`, the fields judged (None:
    all); `ignored`, fields another policy judges (or the provider's Check drops); `zero_unset`,
    a zero value counts as unset (the provider hands every field over); `read`, how the compared
    form reads documents the inputs hold as text."""

    label: str
    key: tuple[str, ...] | None
    fields: tuple[str, ...] | None = None
    ignored: tuple[str, ...] = ()
    zero_unset: bool = False
    read: Callable[[dict[str, Any]], dict[str, Any]] | None = None


SPECS: dict[str, Spec] = {
    GKE_NODE_POOL: Spec("node pool", ("name",)),
    GKE_CLUSTER: Spec("cluster", ("name",)),
    NETWORK: Spec("network", ("name",)),
    SUBNETWORK: Spec("subnetwork", ("name",)),
    ROUTER: Spec("router", ("name",)),
    ROUTER_NAT: Spec("Cloud NAT", ("name",)),
    ADDRESS: Spec("address", ("name",)),
    FIREWALL: Spec("firewall rule", ("name",)),
    RESERVATION: Spec("reservation", ("name",)),
    PROJECT: Spec("project", ("projectId",)),
    API_SERVICE: Spec("API", ("service",)),
    SERVICE_ACCOUNT: Spec("service account", ("accountId",)),
    **{t: Spec("custom role", ("roleId",)) for t in CUSTOM_ROLES},
    **{t: Spec("IAM member", None) for t in IAM_MEMBERS},
    MONITORED_PROJECT: Spec("monitored project", ("name",)),
    NOTIFICATION_CHANNEL: Spec("notification channel", ("displayName",)),
    DATASET: Spec("dataset", ("datasetId",)),
    TABLE: Spec("table", ("tableId",)),
    RESTORE_PLAN: Spec("restore plan", ("name",)),
    BACKUP_PLAN: Spec("backup plan", ("name",)),
    ALERT_POLICY: Spec("alert policy", ("displayName",)),
    NAMESPACE: Spec("namespace", ("metadata", "name")),
    GCP_PROVIDER: Spec("GCP provider", None),
    # The kubeconfig is kubernetes-providers-by-design's (its form) and kubernetes-providers-own-cluster's (its server).
    KUBERNETES_PROVIDER: Spec("Kubernetes provider", None, ignored=("kubeconfig",)),
    # Every input of a release: its Check drops `compat`, which is no field of its Release type
    # (pulumi/pulumi-kubernetes provider/pkg/provider/helm_release.go `Release`, Check:
    # `resource.NewPropertyMap(newRelease)`, commit 94977969d64112b04e19945818a7d5d5f38f631d), and
    # hands every field over, the unset ones at their zero value.
    **{t: Spec("Helm release", ("name",), ignored=("compat",), zero_unset=True) for t in HELM_RELEASES},
    NODE_PROVIDER: Spec("NodeProvider", ("metadata", "name")),
    PLATFORM_PROJECT: Spec("platform project", ("metadata", "name")),
    VIRTUAL_CLUSTER_INSTANCE: Spec("VirtualClusterInstance", ("metadata", "name"), read=forms.instance_form),
    # Its environment (a kubeconfig, judged by form) is commands-by-design's.
    COMMAND: Spec("command", None, ignored=("environment",)),
    # The default provider the engine makes for the commands: its inputs are the stack's `command:`
    # configuration, which no stack has, and its version.
    COMMAND_PROVIDER: Spec("command provider", None),
    SERVICE: Spec("Service", ("metadata", "name")),
    **{t: Spec(t.rsplit(":", 1)[-1], ("metadata", "name")) for t in RBAC_TYPES},
}

# Defaults a bridged provider's Check fills in where the program sets nothing, per kind: path (`[]`
# stands for any index) → value. Every `Default:` of the fields judged, zero ones included, read
# from hashicorp/terraform-provider-google tag v7.9.0 (commit 34da6e75d778be372149429e8eed085049906b08),
# google/services/…: container/resource_container_node_pool.go (upgrade_settings.strategy,
# management.auto_repair and auto_upgrade), container/node_config.go (preemptible, spot,
# shielded_instance_config.enable_secure_boot and enable_integrity_monitoring),
# monitoring/resource_monitoring_notification_channel.go (enabled, force_delete),
# monitoring/resource_monitoring_alert_policy.go (enabled, documentation.mime_type),
# bigquery/resource_bigquery_table.go (deletion_protection, ignore_auto_generated_schema),
# bigquery/resource_bigquery_dataset.go (location, delete_contents_on_destroy), google/provider/
# provider.go (add_terraform_attribution_label), container/resource_container_cluster.go (the
# top-level deletion_protection, enable_kubernetes_alpha, enable_legacy_abac, enable_shielded_nodes,
# network, enable_cilium_clusterwide_network_policy, enable_l4_ilb_subsetting,
# disable_l4_lb_firewall_reconciliation, enable_multi_networking, enable_fqdn_network_policy;
# ip_allocation_policy.stack_type), compute/resource_compute_firewall.go (priority),
# compute/resource_compute_address.go (address_type), compute/resource_compute_network.go
# (auto_create_subnetworks, network_firewall_policy_enforcement_order, delete_default_routes_on_create),
# compute/resource_compute_router_nat.go (the idle timeouts, type), compute/resource_compute_reservation.go
# (specific_reservation_required), resourcemanager/resource_google_project.go (deletion_policy,
# auto_create_network), resourcemanager/resource_google_project_iam_custom_role.go (stage),
# resourcemanager/resource_google_service_account.go (disabled). The defaults of blocks the program
# never writes (windows_node_config, cluster_autoscaling, a subnetwork's log_config, a router's bgp,
# external_data_configuration, materialized_view, …) are left out: such a block is refused whole.
# gkebackup's backup and restore plans, resourcemanager/resource_google_project_service.go, the IAM
# members (tpgiamresource/resource_iam_member.go), compute/resource_compute_subnetwork.go and
# compute/resource_compute_router.go at the top level, and monitoring/resource_monitoring_monitored_project.go
# have none; nor has a local command (pulumi/pulumi-command tag v1.2.1 provider/pkg/provider/local/base.go:
# no `SetDefault`), and the Kubernetes provider's Check adds none to a custom resource (its
# `normalizeInputs` keeps an object of a kind it has no type for as it is: pulumi/pulumi-kubernetes
# provider/pkg/clients/unstructured.go `Normalize`, commit 94977969d64112b04e19945818a7d5d5f38f631d)
# while server-side apply is on, the provider's default since v4, and the provider names no
# namespace of its own: the program's providers set neither (components/gke_cluster.py,
# __main__.py); with apply client-side it would add the `app.kubernetes.io/managed-by` label.
# (`enableL4IlbSubsetting` has `Default: false` there; should a later provider drop it, excusing
# `false` still admits only what the cluster does with the field unset.)
_NODE_CONFIG_DEFAULTS = {
    "preemptible": False,
    "spot": False,
    "shieldedInstanceConfig.enableSecureBoot": False,
    "shieldedInstanceConfig.enableIntegrityMonitoring": True,
}
_NODE_DEFAULTS = {f"nodeConfig.{k}": v for k, v in _NODE_CONFIG_DEFAULTS.items()}
PROVIDER_DEFAULTS: dict[str, dict[str, Any]] = {
    GKE_NODE_POOL: {"upgradeSettings.strategy": "SURGE", "management.autoRepair": True, "management.autoUpgrade": True, **_NODE_DEFAULTS},
    GKE_CLUSTER: {
        **_NODE_DEFAULTS,
        "deletionProtection": True,
        "enableKubernetesAlpha": False,
        "enableLegacyAbac": False,
        "enableShieldedNodes": True,
        "network": "default",
        "enableCiliumClusterwideNetworkPolicy": False,
        "enableL4IlbSubsetting": False,
        "disableL4LbFirewallReconciliation": False,
        "enableMultiNetworking": False,
        "enableFqdnNetworkPolicy": False,
        "ipAllocationPolicy.stackType": "IPV4",
    },
    FIREWALL: {"priority": 1000},
    ADDRESS: {"addressType": "EXTERNAL"},
    NETWORK: {"autoCreateSubnetworks": True, "networkFirewallPolicyEnforcementOrder": "AFTER_CLASSIC_FIREWALL", "deleteDefaultRoutesOnCreate": False},
    ROUTER_NAT: {
        "type": "PUBLIC",
        "icmpIdleTimeoutSec": 30,
        "tcpEstablishedIdleTimeoutSec": 1200,
        "tcpTimeWaitTimeoutSec": 120,
        "tcpTransitoryIdleTimeoutSec": 30,
        "udpIdleTimeoutSec": 30,
    },
    RESERVATION: {"specificReservationRequired": False},
    PROJECT: {"deletionPolicy": "PREVENT", "autoCreateNetwork": True},
    **{t: {"stage": "GA"} for t in CUSTOM_ROLES},
    SERVICE_ACCOUNT: {"disabled": False},
    NOTIFICATION_CHANNEL: {"enabled": True, "forceDelete": False},
    ALERT_POLICY: {"enabled": True, "documentation.mimeType": "text/markdown"},
    TABLE: {"deletionProtection": True, "ignoreAutoGeneratedSchema": False},
    DATASET: {"location": "US", "deleteContentsOnDestroy": False},
    GCP_PROVIDER: {"addTerraformAttributionLabel": True},
}

# Values the program's run cannot know (recorded as null), per kind: path → the form the real value
# has, `{project}` the stack's project, `{address}` an IPv4 address. An alert policy notifies each
# channel the program creates by its name, which Cloud Monitoring assigns:
# projects/<project>/notificationChannels/<id>
# (https://cloud.google.com/monitoring/api/ref_v3/rest/v3/projects.notificationChannels, `name`). A
# control plane admits its tenant's NAT addresses, which Compute Engine picks when it creates them
# (https://cloud.google.com/compute/docs/reference/rest/v1/addresses, `address`): which ones,
# vcluster-control-plane-nat-addresses judges.
COMPUTED: dict[str, dict[str, str]] = {
    ALERT_POLICY: {"notificationChannels[]": "projects/{project}/notificationChannels/{id}"},
    VIRTUAL_CLUSTER_INSTANCE: {"spec.template.helmRelease.values.controlPlane.service.spec.loadBalancerSourceRanges[]": "{address}/32"},
}
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_FORMS = {"{project}": None, "{id}": ("<id>", "[0-9]+"), "{address}": ("<address>", rf"{_OCTET}(?:\.{_OCTET}){{3}}")}
