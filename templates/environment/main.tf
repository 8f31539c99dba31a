# "infrastructure" environment template of the gpu-platform NodeProvider. It creates nothing.
#
# The vCluster Platform runs it with OpenTofu once per vCluster, before the vCluster's first node
# (embedded inline by GcpNodeProvider: one file, no modules). Pulumi has already created the
# tenant's network, subnet (with Cloud NAT) and node service account, and written their names on
# the tenant's auto-nodes entry as gpu-platform/network, gpu-platform/subnetwork and
# gpu-platform/node-service-account (an account id: property values must be label values, an
# e-mail is not). This template hands them on under the output names that the node template
# (templates/node/main.tf) and the kubernetes template (templates/kubernetes/main.tf) read, plus
# the region's zones (the output the official templates define; nothing of ours reads it).
#
# It trusts none of those properties: anyone who can edit a virtual cluster's values could point
# them at another tenant's network or identity. The names are derived instead from the vCluster's
# name (the tenant) and the environment, which GcpNodeProvider writes into this file, and a
# property that names anything else is refused. The vCluster's name alone is not enough: anyone
# allowed to create an instance in some platform project could name it after another team. Each
# team's instance lives in the team's own platform project, whose namespace is p-<team>
# (components/platform_project.py), so an instance elsewhere is refused.
#
# `project` is the tenant's GCP project (its own, or the environment's for a shared tenant) and is
# read from the properties: the names checked here exist only in the tenant's own project, and the
# platform may use only the subnet and service account Pulumi made for the tenant (bindings on
# those objects), so a different project yields no network and no identity.
#
# Its only input is `var.vcluster`, which the platform declares itself; do not declare it here
# (templates/vcluster_variable.tf holds a copy for local checks only). The variable is
# sensitive, so values are unwrapped with nonsensitive(): they are resource names, not secrets.
#
# The platform's identity holds compute.zones.list and nothing else that applies here
# (config/permissions.yaml `autoNodes`), so the only cloud call is the zone list.

terraform {
  required_version = ">= 1.6"

  required_providers {
    google = {
      source  = "hashicorp/google"
      version = "6.50.0"
    }
  }
}

provider "google" {
  project = local.project
  region  = local.region
}

locals {
  # Rendered by GcpNodeProvider (components/templates.py): this file serves one environment.
  environment = "__GPU_PLATFORM_ENVIRONMENT__"
  # The platform passes a node environment `var.vcluster.instance`, "Full tenant cluster instance
  # object" (the VirtualClusterInstance, whose metadata.namespace is its platform project's
  # namespace), and `var.vcluster.namespace`, "Project namespace of the vCluster": vcluster-docs
  # commit 0f45a068f platform/administer/node-providers/terraform.mdx, "Available terraform vCluster
  # variables". The official template reads the same field (loft-sh/vcluster-auto-nodes-gcp tag
  # v0.1.1 environment/infrastructure/locals.tf).
  vcluster_name      = try(nonsensitive(var.vcluster.instance.metadata.name), "")
  vcluster_namespace = try(nonsensitive(var.vcluster.instance.metadata.namespace), "")
  # The team's platform project is named after the team; its namespace carries the prefix the
  # platform is configured with (`config.projectNamespacePrefix` in its Helm values, rendered in by
  # GcpNodeProvider from config/facts.py; the platform config reference, vcluster-docs
  # platform/api/_partials/resources/config/reference.mdx: "Omitted defaults to p-").
  team_namespace = "__GPU_PLATFORM_PROJECT_NAMESPACE_PREFIX__${local.vcluster_name}"
  # components/tenant_network.py names all three "<environment>-<tenant>-nodes".
  tenant_name = "${local.environment}-${local.vcluster_name}-nodes"
  # templates/node/main.tf names every VM of the tenant with this prefix; the platform's VM role
  # is conditioned on it (config/isolation.py node_name_prefix).
  node_name_prefix = "${local.environment}-${local.vcluster_name}-"

  # project and region may be comma lists; the first element is used, wildcards are refused.
  project = trimspace(split(",", try(nonsensitive(var.vcluster.properties["project"]), ""))[0])
  region  = trimspace(split(",", try(nonsensitive(var.vcluster.properties["region"]), ""))[0])

  network              = trimspace(try(nonsensitive(var.vcluster.properties["gpu-platform/network"]), ""))
  subnetwork           = trimspace(try(nonsensitive(var.vcluster.properties["gpu-platform/subnetwork"]), ""))
  node_service_account = trimspace(try(nonsensitive(var.vcluster.properties["gpu-platform/node-service-account"]), ""))

  wildcard = "[*?\\[\\]{}]"
}

# Every check on the inputs hangs off this data source, so a bad property fails before anything is
# read; its result is the `availability_zones` output of the official templates' contract.
data "google_compute_zones" "available" {
  project = local.project
  region  = local.region
  status  = "UP"

  lifecycle {
    precondition {
      condition     = local.project != "" && !can(regex(local.wildcard, local.project))
      error_message = "Property project must be a concrete GCP project id, not empty or a wildcard (got \"${local.project}\"). Pulumi sets it on each tenant's auto-nodes entry (TenantVCluster)."
    }
    precondition {
      condition     = local.region != "" && !can(regex(local.wildcard, local.region))
      error_message = "Property region must be a concrete GCP region, not empty or a wildcard (got \"${local.region}\"). Pulumi sets it on each tenant's auto-nodes entry (TenantVCluster)."
    }
    precondition {
      condition     = local.vcluster_name != ""
      error_message = "The platform passed no vCluster name (instance.metadata.name); the tenant's network and identity are named after it."
    }
    precondition {
      condition     = local.vcluster_namespace == local.team_namespace
      error_message = "vCluster ${local.vcluster_name} is in namespace \"${local.vcluster_namespace}\", not in its team's platform project namespace \"${local.team_namespace}\": only the team's own instance gets the team's network and identity."
    }
    precondition {
      condition     = local.network == local.tenant_name
      error_message = "Property gpu-platform/network must be \"${local.tenant_name}\", the network Pulumi created for vCluster ${local.vcluster_name} in environment ${local.environment} (got \"${local.network}\"): a vCluster's VMs start in its own network only."
    }
    precondition {
      condition     = local.subnetwork == local.tenant_name
      error_message = "Property gpu-platform/subnetwork must be \"${local.tenant_name}\", the subnet Pulumi created for vCluster ${local.vcluster_name} in environment ${local.environment} (got \"${local.subnetwork}\"): a vCluster's VMs start in its own subnet only."
    }
    precondition {
      condition     = local.node_service_account == local.tenant_name
      error_message = "Property gpu-platform/node-service-account must be \"${local.tenant_name}\", the node service account Pulumi created for vCluster ${local.vcluster_name} in environment ${local.environment} (got \"${local.node_service_account}\"): a vCluster's VMs run as its own identity only."
    }
  }
}

# Output names are the contract with the node template and the kubernetes template (the same as
# the official infrastructure template's, which legacy mode uses in this one's place).
output "network_name" {
  value = local.network
}

output "subnet_name" {
  value = local.subnetwork
}

output "service_account_email" {
  value = "${local.node_service_account}@${local.project}.iam.gserviceaccount.com"
}

output "availability_zones" {
  value = data.google_compute_zones.available.names
}

output "node_name_prefix" {
  value = local.node_name_prefix
}
