"""GcpNodeProvider: the environment's one `management.loft.sh/v1` NodeProvider. Its node types are
generated from the catalog (config/node_types.py); its node template and both environment templates
are ours, inline (the official infrastructure template only in legacy mode)."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from config import node_properties as props
from config import versions
from config.node_types import NodeType

from .loft_api import (
    API_VERSION,
    GitSource,
    NodeEnvironmentTemplate,
    NodeProviderSpec,
    NodeTypeOverhead,
    NodeTypeSpec,
    TerraformSpec,
    TerraformTemplate,
)
from .options import depends_on_of
from .templates import environment_template, kubernetes_template, node_template

# How long one `tofu apply` may take: GPU VMs in a busy zone can take a while to be granted.
TEMPLATE_TIMEOUT = "30m"


@dataclass(frozen=True)
class GcpNodeProviderArgs:
    name: str
    environment: str
    region: str
    node_types: tuple[NodeType, ...]
    legacy_infrastructure: bool = False  # the official infrastructure template instead of ours


def node_provider_spec(args: GcpNodeProviderArgs) -> NodeProviderSpec:
    """The NodeProvider spec as plain data (also what the offline plan prints)."""
    if args.legacy_infrastructure:
        infrastructure = TerraformTemplate(
            git=GitSource(
                repository=versions.AUTO_NODES_GCP_REPOSITORY,
                commit=versions.AUTO_NODES_GCP_COMMIT,
                sub_path="environment/infrastructure",
            ),
            timeout=TEMPLATE_TIMEOUT,
        )
    else:
        infrastructure = TerraformTemplate(inline=environment_template(args.environment), timeout=TEMPLATE_TIMEOUT)
    # Ours, not the official environment/kubernetes: its CCM would manage one zone only
    # (templates/kubernetes/main.tf explains).
    kubernetes = TerraformTemplate(
        inline=kubernetes_template(tuple(sorted({nt.zone for nt in args.node_types}))), timeout=TEMPLATE_TIMEOUT
    )
    return NodeProviderSpec(
        display_name=f"GCP GPU nodes ({args.region})",
        # No properties of its own, `project` and `region` in particular: each tenant's auto-nodes
        # entry sets both (components/tenant_vcluster.py; the templates refuse an empty value), and
        # in project mode the tenant's `project` is the team's, not the host's. How the platform
        # would combine a second value set here is not public (the entry's properties also become
        # Karpenter requirements: vcluster-docs vcluster/_fragments/deploy/auto-nodes-scheduling.mdx),
        # and either outcome would put a tenant's VMs in the wrong project. `region` is left out
        # too although every tenant has the environment's: one owner per property.
        properties=None,
        terraform=TerraformSpec(
            node_template=TerraformTemplate(inline=node_template(), timeout=TEMPLATE_TIMEOUT),
            node_environment_template=NodeEnvironmentTemplate(infrastructure=infrastructure, kubernetes=kubernetes),
            node_types=[
                NodeTypeSpec(
                    name=nt.name,
                    display_name=_display_name(nt),
                    resources=nt.resources,
                    overhead=NodeTypeOverhead(kube_reserved=nt.kube_reserved),
                    properties=dict(nt.properties),
                    cost=nt.cost,
                    max_capacity=nt.max_capacity,
                )
                for nt in args.node_types
            ],
        ),
    )


_CAPACITY = {props.ON_DEMAND: "", props.SPOT: ", Spot", props.FLEX_START: ", Flex-start"}


def _display_name(nt: NodeType) -> str:
    what = f"{nt.gpu_count} × {nt.gpu}" if nt.gpu else "CPU"
    if nt.reserved:
        how = f", reservation {nt.properties[props.RESERVATION]} for {nt.properties[props.RESERVATION_TENANT]}"
    else:
        how = _CAPACITY[nt.capacity] + (f", rank {nt.rank}" if nt.rank > 1 else "")
    return f"{nt.machine_type} ({what}, {nt.zone}{how})"


class GcpNodeProvider(pulumi.ComponentResource):
    node_provider: k8s.apiextensions.CustomResource
    name: str
    node_types: tuple[NodeType, ...]

    def __init__(self, name: str, args: GcpNodeProviderArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-platform:platform:NodeProvider", name, None, opts)
        self.name = args.name
        self.node_types = args.node_types
        self.node_provider = k8s.apiextensions.CustomResource(
            f"{name}-node-provider",
            api_version=API_VERSION,
            kind="NodeProvider",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=args.name, labels={"app.kubernetes.io/part-of": "gpu-platform"}),
            spec=node_provider_spec(args).to_dict(),
            # Waits for the platform's management API (the caller's depends_on).
            opts=pulumi.ResourceOptions(parent=self, depends_on=depends_on_of(opts)),
        )
        self.register_outputs({"name": args.name, "nodeTypes": [nt.name for nt in args.node_types]})
