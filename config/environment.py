"""Config models of an environment stack: gpu-platform:cluster and :nodeProvider (:platform is
config/platform.py's, re-exported here).

Every field is documented by the docstring below it; docs/configuration.md is generated from them
(`make docs`).
Defaults that depend on the environment (dev: zonal and destroyable; prod: regional and
protected) are filled in by `resolve_cluster_defaults`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .availability import check_gpu_availability
from .base import DNS_LABEL, GCP_LABEL_KEY, GCP_LABEL_VALUE, REGION, ConfigModel, read_cidr, zone_region
from .catalog import Catalog, series_of
from .errors import Broken, Problems, derived
from .node_types import MAX_QUALIFIED_NAME, longest_qualified_name
from .platform import PlatformConfig, check_platform, resolve_platform_defaults  # noqa: F401 - re-exported (config/platform.py)
from .zones import region_zones, regions, zone_problem
from .zones import source_url as zones_source

Environment = Literal["dev", "staging", "prod"]
ENVIRONMENTS = ("dev", "staging", "prod")
WEEKDAYS = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")
# Far above any machine of the catalog (about 100 USD/h for 8 × H200): a larger price is a typo.
MAX_USD_PER_HOUR = 1000
# Compute Engine's largest Persistent Disk or Hyperdisk, 64 TiB (https://cloud.google.com/compute/docs/disks,
# "Persistent Disk" and "Hyperdisk" size limits), in GB as the node pool and the node template take it.
MAX_DISK_GB = 65536


class SystemPool(ConfigModel):
    """The GKE node pool that runs the platform and the tenants' control planes."""

    machine_type: str = "e2-standard-4"
    """Machine type of the system nodes: a CPU machine type of config/catalog.yaml."""
    min_nodes: int = Field(1, ge=0)
    """Fewest nodes per zone of the cluster's location."""
    max_nodes: int = Field(3, ge=1)
    """Most nodes per zone of the cluster's location."""
    disk_size_gb: int = Field(100, ge=20, le=MAX_DISK_GB)
    """Boot disk of each system node, in GB."""


class ClusterNetwork(ConfigModel):
    """The host cluster's private ranges; tenants' networks must stay clear of them."""

    nodes_cidr: str = "10.0.0.0/20"
    """The GKE node subnet, a private IPv4 CIDR."""
    pods_cidr: str = "10.4.0.0/14"
    """The GKE pod range, a private IPv4 CIDR."""
    services_cidr: str = "10.8.0.0/20"
    """The GKE service range, a private IPv4 CIDR."""


class PrivateNodes(ConfigModel):
    """Nodes without public IPs; their egress goes through Cloud NAT."""

    enabled: bool = True
    """Whether the host cluster's nodes have no public IPs."""
    master_cidr: str = "172.16.0.0/28"
    """The control plane's /28 range, clear of every other range."""


class AuthorizedNetwork(ConfigModel):
    """A source range allowed to reach the cluster's IP endpoint."""

    cidr: str
    """The allowed source range, an IPv4 CIDR like 203.0.113.0/24."""
    name: str
    """What the range is, as GKE shows it (e.g. office)."""


class MaintenanceWindow(ConfigModel):
    """When GKE may upgrade and repair the cluster; it must give GKE at least 48 h per 32 days."""

    start_time: str = "03:00"
    """Start of each window, a UTC time HH:MM."""
    duration_hours: int = Field(4, ge=4, le=24)
    """Length of each window in hours."""
    days: tuple[Literal["MO", "TU", "WE", "TH", "FR", "SA", "SU"], ...] = WEEKDAYS
    """The days a window starts on."""


class ClusterConfig(ConfigModel):
    """The GKE host cluster of an environment."""

    name: str | None = None
    """The cluster's name, a lowercase DNS label of at most 24 characters; unset: gpu-<environment>."""
    location: str | None = None
    """The region or one of its zones; unset: the first node-provider zone in dev and staging (zonal, cheap), the region in prod."""
    release_channel: Literal["RAPID", "REGULAR", "STABLE"] | None = None
    """The GKE release channel; unset: REGULAR (prod allows REGULAR and STABLE only)."""
    deletion_protection: bool | None = None
    """GKE deletion protection and Pulumi's protect flag; unset: on in prod only (false in prod is for decommissioning, and warned about)."""
    system_pool: SystemPool = SystemPool()
    """The system node pool, per zone of the location."""
    network: ClusterNetwork = ClusterNetwork()
    """The host cluster's ranges, private and not overlapping."""
    private_nodes: PrivateNodes = PrivateNodes()
    """Nodes without public IPs, behind Cloud NAT."""
    master_authorized_networks: tuple[AuthorizedNetwork, ...] = ()
    """Sources allowed on the IP endpoint; empty: it is closed, and kubectl and Pulumi use the IAM-authenticated DNS endpoint."""
    maintenance_window: MaintenanceWindow = MaintenanceWindow()
    """GKE's maintenance window, in UTC; it must give GKE at least 48 h per 32 days."""
    labels: dict[str, str] = {}
    """GCP labels on the cluster and its nodes (lowercase keys and values of [a-z0-9_-])."""


class Disk(ConfigModel):
    """A node's boot disk."""

    size_gb: int = Field(ge=20, le=MAX_DISK_GB)
    """Size in GB."""
    type: str = "pd-balanced"
    """Disk type, one the node's machine series supports (A3 Ultra always boots from hyperdisk-balanced)."""


class NodeProviderConfig(ConfigModel):
    """The GPU NodeProvider of an environment: the node types tenants' pools are made of."""

    name: str = "gcp-gpu"
    """The NodeProvider's name, a lowercase DNS label short enough for <name>.<node type> labels."""
    zones: tuple[str, ...] = Field(min_length=1)
    """Zones of gcp:region the nodes may run in; every GPU type must be offered in one of them (docs/gpu-nodes.md, "Availability")."""
    gpu_types: tuple[str, ...] = Field(min_length=1)
    """The GPU types offered to tenants, from config/catalog.yaml."""
    spot: bool = False
    """Also offer Spot twins of every GPU node type (required for GPU types sold as Spot only, such as A3 Ultra)."""
    gpu_quota: dict[str, int] = {}
    """Per GPU type, the regional GPU quota of each project tenants' VMs run in; required for every GPU type."""
    cpu_machine_types: tuple[str, ...] = ("e2-standard-2", "e2-standard-4")
    """Machine types of tenants' CPU nodes (their system pods), CPU machine types of config/catalog.yaml."""
    gpu_image_family: str | None = None
    """Image family of GPU nodes in project deeplearning-platform-release; unset: the catalog's Deep Learning VM family."""
    gpu_disk: Disk = Disk(size_gb=200)
    """Boot disk of GPU nodes."""
    cpu_disk: Disk = Disk(size_gb=50)
    """Boot disk of CPU nodes."""
    prices: dict[str, float] = {}
    """Machine type → on-demand USD/h in this region, overriding the catalog (the host for N1, the whole VM otherwise)."""
    quota_policy: Literal["warn", "fail"] | None = None
    """What happens when the tenants' GPU limits together exceed gpuQuota: warn, or fail (registers nothing); unset: fail in prod, warn elsewhere."""
    legacy_infrastructure: bool = False
    """Opt-in: the official infrastructure template and its broad 59-permission role (warned); every tenant must then be isolation: shared, as that template builds networks in the environment's project only, so prod also needs platform.allowSharedIsolation: true."""


def resolve_cluster_defaults(environment: str, region: str, cluster: ClusterConfig, zones: tuple[str, ...]) -> ClusterConfig:
    if isinstance(cluster, Broken):
        return cluster
    prod = derived(lambda: environment == "prod")
    return cluster.model_copy(
        update={
            "name": derived(lambda: cluster.name or f"gpu-{environment}"),
            # dev/staging: one zone (cheap, one control plane zone, nodes in one zone); prod: regional.
            "location": derived(lambda: cluster.location or _default_location(prod, region, zones)),
            "release_channel": derived(lambda: cluster.release_channel or "REGULAR"),
            "deletion_protection": derived(lambda: prod if cluster.deletion_protection is None else cluster.deletion_protection),
        }
    )


def _default_location(prod: bool, region: str, zones: tuple[str, ...]) -> str:
    in_region = [z for z in zones if zone_region(z) == region]
    return region if prod or not in_region else in_region[0]


def check_cluster(environment: str, region: str, cluster: ClusterConfig, catalog: Catalog, problems: Problems) -> None:
    """Checks of the resolved cluster config; appends to `problems`. Each `checking` block is one
    independent check (see config/errors.py)."""
    with problems.checking("cluster.name"):
        if not DNS_LABEL.match(cluster.name) or len(cluster.name) > 24:
            # 24: the node service account id "<name>-nodes" may have at most 30 characters.
            problems.add("cluster.name", f"{cluster.name!r} must be a lowercase DNS label of at most 24 characters")
    with problems.checking("cluster.location"):
        location = cluster.location
        if location != region and zone_region(location) != region:
            problems.add("cluster.location", f"{location!r} is neither region {region} nor one of its zones")
        elif location != region and zone_problem(location, region):
            problems.add("cluster.location", zone_problem(location, region))
    with problems.checking("cluster.releaseChannel"):
        if environment == "prod" and cluster.release_channel == "RAPID":
            problems.add("cluster.releaseChannel", "RAPID is not allowed in prod; allowed: REGULAR, STABLE")
    with problems.checking("cluster.systemPool.machineType"):
        system_series = series_of(cluster.system_pool.machine_type)
        if catalog.series.get(system_series, {}).get("gpuAttach") == "builtin":
            problems.add("cluster.systemPool.machineType", f"{cluster.system_pool.machine_type!r} is a GPU machine; the system pool runs only the platform")
        elif cluster.system_pool.machine_type not in catalog.cpu_machines():
            problems.add("cluster.systemPool.machineType", unknown_cpu_machine(cluster.system_pool.machine_type, catalog))
    with problems.checking("cluster.systemPool.minNodes"):
        if cluster.system_pool.min_nodes > cluster.system_pool.max_nodes:
            problems.add("cluster.systemPool.minNodes", f"{cluster.system_pool.min_nodes} is above maxNodes {cluster.system_pool.max_nodes}")

    ranges = {}
    for key, name in (("nodes_cidr", "nodesCidr"), ("pods_cidr", "podsCidr"), ("services_cidr", "servicesCidr")):
        path = f"cluster.network.{name}"
        with problems.checking(path):
            text = getattr(cluster.network, key)
            net, problem = read_cidr(text, "10.0.0.0/20")
            if problem:
                problems.add(path, problem)
            elif not net.is_private:
                problems.add(path, f"{net} is not a private range like 10.0.0.0/20")
            else:
                ranges[path] = net
    with problems.checking("cluster.privateNodes.masterCidr"):
        if cluster.private_nodes.enabled:
            master, problem = read_cidr(cluster.private_nodes.master_cidr, "172.16.0.0/28")
            if problem or master.prefixlen != 28:
                problems.add("cluster.privateNodes.masterCidr", problem or f"{master} must be a /28 CIDR like 172.16.0.0/28")
            else:
                ranges["cluster.privateNodes.masterCidr"] = master
    for (path_a, a), (path_b, b) in _pairs(list(ranges.items())):
        if a.overlaps(b):
            problems.add(path_b, f"{b} overlaps {path_a} ({a})")
    with problems.checking("cluster.masterAuthorizedNetworks"):
        seen: dict[str, int] = {}
        for i, network in enumerate(cluster.master_authorized_networks):
            with problems.checking(f"cluster.masterAuthorizedNetworks[{i}].cidr"):
                net, problem = read_cidr(network.cidr, "203.0.113.0/24")
                if problem:
                    problems.add(f"cluster.masterAuthorizedNetworks[{i}].cidr", problem)
                elif str(net) in seen:
                    problems.add(f"cluster.masterAuthorizedNetworks[{i}].cidr", f"{net} is listed twice (also masterAuthorizedNetworks[{seen[str(net)]}])")
                else:
                    seen[str(net)] = i

    with problems.checking("cluster.maintenanceWindow.startTime"):
        window = cluster.maintenance_window
        hh, _, mm = window.start_time.partition(":")
        if not (hh.isdigit() and mm.isdigit() and len(hh) == 2 and len(mm) == 2 and int(hh) < 24 and int(mm) < 60):
            problems.add("cluster.maintenanceWindow.startTime", f"{window.start_time!r} is not a UTC time like 03:00")
    with problems.checking("cluster.maintenanceWindow"):
        window = cluster.maintenance_window
        if not window.days:
            problems.add("cluster.maintenanceWindow.days", "needs at least one day")
        else:
            # GKE requires at least 48 h of maintenance availability in any 32-day window.
            hours = len(set(window.days)) * window.duration_hours * 32 / 7
            if hours < 48:
                problems.add(
                    "cluster.maintenanceWindow",
                    f"gives about {hours:.0f} h per 32 days; GKE needs at least 48 h (add days or lengthen durationHours)",
                )
    with problems.checking("cluster.labels"):
        for key, value in cluster.labels.items():
            if not GCP_LABEL_KEY.match(key) or not GCP_LABEL_VALUE.match(value):
                problems.add(f"cluster.labels.{key}", "GCP labels need lowercase keys and values of [a-z0-9_-], at most 63 characters")


def environment_warnings(environment: str, cluster: ClusterConfig, node_provider: NodeProviderConfig) -> list[str]:
    """Allowed, but worth a reviewer's eye: the program logs these and the plan prints them."""
    warnings = []
    if environment == "prod" and not cluster.deletion_protection:
        warnings.append(
            "cluster.deletionProtection is false in prod: the next `pulumi up` lifts GKE deletion protection and "
            "Pulumi's protect flag, so a following `pulumi destroy` deletes the cluster. Only for decommissioning."
        )
    if node_provider.legacy_infrastructure:
        warnings.append(
            "nodeProvider.legacyInfrastructure is true: the platform's identity gets the official broad role "
            "(resourcemanager.projects.setIamPolicy, iam.roles.create, service-account creation) and creates tenant "
            "networks outside Pulumi's state. Whoever controls the platform pod can make itself project owner."
        )
    return warnings


def check_node_provider(region: str, np: NodeProviderConfig, catalog: Catalog, problems: Problems) -> None:
    with problems.checking("nodeProvider.name"):
        if not DNS_LABEL.match(np.name):
            problems.add("nodeProvider.name", f"{np.name!r} must be a lowercase DNS label")
    with problems.checking("nodeProvider.zones"):
        for i, zone in enumerate(np.zones):
            if zone_region(zone) != region or not zone.startswith(region + "-") or len(zone) != len(region) + 2:
                problems.add(f"nodeProvider.zones[{i}]", f"{zone!r} is not in region {region}")
            elif zone_problem(zone, region):
                problems.add(f"nodeProvider.zones[{i}]", zone_problem(zone, region))
    known = ", ".join(catalog.gpus)
    where = region if isinstance(region, str) else "the region"
    with problems.checking("nodeProvider.gpuTypes"):
        for i, gpu in enumerate(np.gpu_types):
            with problems.checking(f"nodeProvider.gpuQuota.{gpu}"):
                if gpu not in catalog.gpus:
                    problems.add(f"nodeProvider.gpuTypes[{i}]", f"{gpu!r} is not offered; known: {known}")
                elif gpu not in np.gpu_quota:
                    problems.add(
                        f"nodeProvider.gpuQuota.{gpu}",
                        f"missing; set it to the project's {gpu} quota in {where} (Compute Engine quota page), e.g. gpuQuota: {{{gpu}: 8}}",
                    )
    with problems.checking("nodeProvider.gpuQuota"):
        for gpu, quota in np.gpu_quota.items():
            with problems.checking(f"nodeProvider.gpuQuota.{gpu}"):
                if gpu not in np.gpu_types:
                    problems.add(f"nodeProvider.gpuQuota.{gpu}", f"{gpu!r} is not in gpuTypes ({', '.join(np.gpu_types)})")
                elif quota < 1:
                    problems.add(f"nodeProvider.gpuQuota.{gpu}", f"{quota} must be at least 1")
                elif gpu in catalog.gpus and quota < min(catalog.gpu_counts(gpu)):
                    problems.add(
                        f"nodeProvider.gpuQuota.{gpu}",
                        f"{quota} is below the smallest {gpu} shape ({min(catalog.gpu_counts(gpu))} GPUs): no node type could start",
                    )
    # Availability and node-type names are judged by the zones only once these are sound.
    zones = problems.derive(lambda: np.zones, "nodeProvider.zones")
    with problems.checking("nodeProvider.gpuTypes"):
        check_gpu_availability(region, zones, np.gpu_types, np.spot, catalog, problems)
    with problems.checking("nodeProvider.name"):
        known_gpus = tuple(g for g in np.gpu_types if g in catalog.gpus)
        known_cpus = tuple(m for m in np.cpu_machine_types if m in catalog.machines)
        longest = longest_qualified_name(np.name, catalog, known_gpus, known_cpus, zones)
        if len(longest) > MAX_QUALIFIED_NAME:
            problems.add(
                "nodeProvider.name",
                f"{np.name!r} is too long: the platform labels nodes with <provider>.<node type>, at most {MAX_QUALIFIED_NAME} "
                f"characters, and {longest!r} has {len(longest)}",
            )
    with problems.checking("nodeProvider.cpuMachineTypes"):
        for i, machine in enumerate(np.cpu_machine_types):
            if machine not in catalog.cpu_machines():
                problems.add(f"nodeProvider.cpuMachineTypes[{i}]", unknown_cpu_machine(machine, catalog))
    with problems.checking("nodeProvider.prices"):
        for machine, price in np.prices.items():
            if machine not in catalog.machines:
                problems.add(f"nodeProvider.prices.{machine}", f"{machine!r} is not in the catalog; known: {', '.join(catalog.machines)}")
            elif not 0 < price <= MAX_USD_PER_HOUR:
                problems.add(f"nodeProvider.prices.{machine}", f"{price} must be a positive USD/h price of at most {MAX_USD_PER_HOUR}")
    all_disk_types = disk_types(catalog)
    for key in ("gpuDisk", "cpuDisk"):
        with problems.checking(f"nodeProvider.{key}.type"):
            disk = np.gpu_disk if key == "gpuDisk" else np.cpu_disk
            if disk.type not in all_disk_types:
                problems.add(f"nodeProvider.{key}.type", f"{disk.type!r} is not allowed; allowed: {', '.join(all_disk_types)}")
    with problems.checking("nodeProvider.gpuImageFamily"):
        if np.gpu_image_family is not None and not DNS_LABEL.match(np.gpu_image_family):
            problems.add("nodeProvider.gpuImageFamily", f"{np.gpu_image_family!r} is not an image family name")


def unknown_cpu_machine(machine: str, catalog: Catalog) -> str:
    return (
        f"{machine!r} is not a CPU machine type of the catalog; known: {', '.join(catalog.cpu_machines())} "
        "(another one needs its entry under `machines` and its prices in config/catalog.yaml)"
    )


def disk_types(catalog: Catalog) -> list[str]:
    """The boot disk types a node may have: those of the catalog's machine series."""
    return sorted({t for s in catalog.series.values() for t in s["diskTypes"]} | {"hyperdisk-balanced"})


def image_family_warnings(node_provider: NodeProviderConfig, catalog: Catalog) -> list[str]:
    """A GPU image family the catalog does not know may lack the NVIDIA driver the nodes rely on:
    allowed (Google publishes new families), but said, with how to make it known."""
    image, family = catalog.gpu_image, node_provider.gpu_image_family
    if family is None or family in image.families or not DNS_LABEL.match(family):
        return []
    return [
        f"nodeProvider.gpuImageFamily: {family!r} is not an image family config/catalog.yaml knows "
        f"(images.gpu.families: {', '.join(image.families)}). GPU nodes boot the newest image of it in project {image.project} "
        "and the GPU Operator installs no driver (driver.enabled=false), so it must ship the NVIDIA driver. Check that it exists "
        f"(gcloud compute images describe-from-family {family} --project {image.project}), then add it to images.gpu.families "
        "in config/catalog.yaml."
    ]


def check_region(region: str, problems: Problems) -> bool:
    if not REGION.match(region):
        problems.add("gcp:region", f"{region!r} is not a GCP region like europe-west4")
        return False
    if region_zones(region) is None:
        problems.add("gcp:region", f"{region!r} is not a Compute Engine region config/zones.yaml records (from {zones_source()}); known: {', '.join(regions())}")
        return False
    return True


def _pairs(items):
    for i, a in enumerate(items):
        for b in items[i + 1 :]:
            yield a, b
