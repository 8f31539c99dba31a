"""After `pulumi destroy`: is anything of the run left in the project that would keep billing or
block the next run? A pure scan over `gcloud … list --format=json` output, and the commands to
delete what it finds (or, when the scan itself cannot run, how to find it by hand).

An object belongs to the run when its name starts with one of the run's prefixes (every prefix
carries the run id), when its labels name the run's cluster or tenant, or when Kubernetes wrote the
tenant's host namespace into its description (load balancers and volumes GKE made for it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .gce import last_segment
from .settings import RUN_LABEL, RunNames

# kind → the gcloud listing (run with --project and --format=json). In deletion order: what uses
# a thing comes before it.
LISTINGS: dict[str, tuple[str, ...]] = {
    # The tenant's Backup for GKE plans ({region}: the run's), before the cluster they name.
    "restore plan": ("beta", "container", "backup-restore", "restore-plans", "list", "--location={region}"),
    "backup plan": ("beta", "container", "backup-restore", "backup-plans", "list", "--location={region}"),
    "cluster": ("container", "clusters", "list"),
    "instance": ("compute", "instances", "list"),
    "disk": ("compute", "disks", "list"),
    "forwarding rule": ("compute", "forwarding-rules", "list"),
    "target pool": ("compute", "target-pools", "list"),
    "firewall rule": ("compute", "firewall-rules", "list"),
    "address": ("compute", "addresses", "list"),
    "router": ("compute", "routers", "list"),
    "subnetwork": ("compute", "networks", "subnets", "list"),
    "network": ("compute", "networks", "list"),
    "service account": ("iam", "service-accounts", "list"),
    "custom role": ("iam", "roles", "list"),  # without --show-deleted: deleted roles are not listed
}

# kind → the delete command's words; the location flag is added from the object.
DELETE = {
    "restore plan": "gcloud beta container backup-restore restore-plans delete",
    "backup plan": "gcloud beta container backup-restore backup-plans delete",
    "cluster": "gcloud container clusters delete",
    "instance": "gcloud compute instances delete",
    "disk": "gcloud compute disks delete",
    "forwarding rule": "gcloud compute forwarding-rules delete",
    "target pool": "gcloud compute target-pools delete",
    "firewall rule": "gcloud compute firewall-rules delete",
    "address": "gcloud compute addresses delete",
    "router": "gcloud compute routers delete",
    "subnetwork": "gcloud compute networks subnets delete",
    "network": "gcloud compute networks delete",
    "service account": "gcloud iam service-accounts delete",
    "custom role": "gcloud iam roles delete",
}
GLOBAL_OR_REGIONAL = {"forwarding rule", "address"}
BACKUP_KINDS = {"restore plan", "backup plan"}  # named projects/<p>/locations/<region>/…/<name>


@dataclass(frozen=True)
class Leftover:
    kind: str
    name: str
    location: str  # zone, region, or "" for global objects
    command: str

    def to_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "name": self.name, "location": self.location, "command": self.command}


def name_prefixes(names: RunNames) -> tuple[str, ...]:
    # The GKE cluster's own VPC, subnet, router, NAT and node account are named after it; GKE names
    # its node VMs, their disks and its firewall rules gke-<cluster>-…
    return (f"{names.cluster}-", f"gke-{names.cluster}-", names.tenant_prefix)


def belongs_to_run(kind: str, obj: dict[str, Any], names: RunNames) -> bool:
    if kind == "custom role":
        role_id = last_segment(obj.get("name"))
        return role_id.startswith(f"{names.role_id_prefix}_") and not obj.get("deleted")
    if kind == "cluster":
        return obj.get("name") == names.cluster
    if kind in BACKUP_KINDS:  # components/tenant_backup.py names them <environment>-<tenant>[-restore]
        plan = f"{names.environment}-{names.tenant}"
        return last_segment(obj.get("name")) in (plan, f"{plan}-restore")
    name = str(obj.get("email", "")).split("@")[0] if kind == "service account" else str(obj.get("name", ""))
    if name in (names.cluster, names.platform_service_account) or name.startswith(name_prefixes(names)):
        return True
    labels = obj.get("labels") or {}
    if labels.get(RUN_LABEL) == names.run_id or labels.get("goog-k8s-cluster-name") == names.cluster:
        return True
    # The node template labels the tenant's VMs and their boot disks vcluster=<tenant>.
    if names.tenant in (labels.get("vcluster"), labels.get("tenant")):
        return True
    if kind == "firewall rule" and last_segment(obj.get("network")) in (names.cluster, names.tenant_network):
        return True
    return mentions_namespace(obj.get("description"), names.host_namespace)


def mentions_namespace(description: str | None, namespace: str) -> bool:
    """GKE's service controller describes a LoadBalancer's forwarding rule, target pool and firewall
    rule as {"kubernetes.io/service-name": "<namespace>/<service>"}; the PD CSI driver describes
    a volume's disk with "kubernetes.io/created-for/pvc/namespace": "<namespace>"."""
    try:
        parsed = json.loads(description or "")
    except ValueError:
        return False
    if not isinstance(parsed, dict):
        return False
    return any(v == namespace or str(v).startswith(f"{namespace}/") for v in parsed.values())


def scan(listings: dict[str, list[dict[str, Any]]], names: RunNames, project: str | None = None) -> list[Leftover]:
    """Everything of the run in one project's listings (default: the environment's), in deletion
    order. In project mode the tenant's project is scanned as well (its network, node identity,
    custom roles, VMs and disks are there)."""
    found = []
    for kind in LISTINGS:
        for obj in listings.get(kind) or []:
            if belongs_to_run(kind, obj, names):
                found.append(leftover(kind, obj, project or names.project))
    return found


def leftover(kind: str, obj: dict[str, Any], project: str) -> Leftover:
    if kind == "service account":
        name = obj["email"]
    elif kind in ("custom role", *BACKUP_KINDS):
        name = last_segment(obj["name"])
    else:
        name = obj["name"]
    parts = str(obj.get("name", "")).split("/")
    if kind in BACKUP_KINDS:
        location = parts[3] if len(parts) > 3 and parts[2] == "locations" else ""
        flag = f"--location {location}" if location else ""
    elif kind == "cluster":
        location, flag = obj.get("location", ""), f"--location {obj.get('location', '')}"
    elif obj.get("zone"):
        location = last_segment(obj["zone"])
        flag = f"--zone {location}"
    elif obj.get("region"):
        location = last_segment(obj["region"])
        flag = f"--region {location}"
    else:
        location, flag = "", ("--global" if kind in GLOBAL_OR_REGIONAL else "")
    command = " ".join(filter(None, (DELETE[kind], name, flag, f"--project {project}", "--quiet")))
    return Leftover(kind, name, location, command)


def find_by_hand(names: RunNames) -> list[str]:
    """gcloud listings that show what the run may have left, for when the scan cannot run: in the
    environment's project, then (project mode) the same in the tenant's."""
    return [command for project in names.projects for command in _listings(names, project)]


def _listings(names: RunNames, project: str) -> list[str]:
    p = f"--project {project}"
    prefixes = "|".join((names.cluster, f"gke-{names.cluster}-", names.tenant_prefix))
    owned = f"labels.vcluster={names.tenant} OR labels.goog-k8s-cluster-name={names.cluster}"
    described = f"description~{names.host_namespace}"
    plans = f"{names.environment}-{names.tenant}"
    return [
        f'gcloud beta container backup-restore restore-plans list {p} --location {names.region} --filter="name~/{plans}-restore$"',
        f'gcloud beta container backup-restore backup-plans list {p} --location {names.region} --filter="name~/{plans}$"',
        f'gcloud container clusters list {p} --filter="name={names.cluster}"',
        f'gcloud compute instances list {p} --filter="{owned}"',
        f'gcloud compute disks list {p} --filter="{owned} OR {described}"',
        f'gcloud compute forwarding-rules list {p} --filter="{described}"',
        f'gcloud compute target-pools list {p} --filter="{described}"',
        f'gcloud compute firewall-rules list {p} --filter="name~^({prefixes}) OR {described}"',
        f'gcloud compute routers list {p} --filter="name~^({prefixes})"',
        # The tenant's static Cloud NAT addresses (<environment>-<tenant>-nat-<i>).
        f'gcloud compute addresses list {p} --filter="name~^({prefixes})"',
        f'gcloud compute networks subnets list {p} --filter="name~^({prefixes})"',
        f'gcloud compute networks list {p} --filter="name~^({prefixes})"',
        f'gcloud iam service-accounts list {p} --filter="email~^({names.platform_service_account}|{prefixes})"',
        f'gcloud iam roles list {p} --filter="name~/{names.role_id_prefix}_"',
    ]
