"""Pinned versions of everything the platform deploys.

One place, so a version bump is one reviewed diff. Sources: the chart repositories named below
(https://charts.loft.sh index, NVIDIA/gpu-operator release tags), loft-sh/vcluster
pkg/platform/version.go (the vCluster → platform minimum table) and loft-sh/vcluster-auto-nodes-gcp
tags (templates); paths, tags and commits per pin in docs/sources.md "Pinned versions".
"""

from __future__ import annotations

PLATFORM_CHART = "vcluster-platform"
PLATFORM_CHART_REPO = "https://charts.loft.sh"
PLATFORM_CHART_VERSION = "4.11.2"

VCLUSTER_CHART = "vcluster"
VCLUSTER_CHART_REPO = "https://charts.loft.sh"
VCLUSTER_CHART_VERSION = "0.36.1"
# The tenant control plane's data volume: the chart's default claim
# (chart/values.yaml `controlPlane.statefulSet.persistence.volumeClaim.size: 5Gi`, loft-sh/vcluster
# tag v0.36.1), on the host cluster's default StorageClass, `standard-rwo` = pd-balanced on GKE
# (https://cloud.google.com/kubernetes-engine/docs/how-to/persistent-volumes/gce-pd-csi-driver).
VCLUSTER_CONTROL_PLANE_VOLUME_GI = 5
VCLUSTER_CONTROL_PLANE_DISK_CLASS = "pd-balanced"

GPU_OPERATOR_CHART = "gpu-operator"
GPU_OPERATOR_CHART_REPO = "https://helm.ngc.nvidia.com/nvidia"
GPU_OPERATOR_VERSION = "v25.10.1"

# Inside each tenant cluster, applied by our kubernetes environment template
# (templates/kubernetes/main.tf): the GCP cloud controller manager and the Compute Engine PD CSI
# driver with its sidecars. Tags, not digests: registry.k8s.io tags of these projects are release
# tags. The set is the one loft-sh/vcluster-auto-nodes-gcp tag v0.1.1 runs together
# (environment/kubernetes/manifests/ccm.yaml.tftpl, csi.yaml.tftpl), each from its project:
CCM_IMAGE = "registry.k8s.io/cloud-provider-gcp/cloud-controller-manager:v33.1.1"  # kubernetes/cloud-provider-gcp tag ccm/v33.1.1
PD_CSI_DRIVER_IMAGE = "registry.k8s.io/cloud-provider-gcp/gcp-compute-persistent-disk-csi-driver:v1.13.9"  # kubernetes-sigs/gcp-compute-persistent-disk-csi-driver tag v1.13.9
CSI_PROVISIONER_IMAGE = "registry.k8s.io/sig-storage/csi-provisioner:v5.2.0"  # kubernetes-csi/external-provisioner tag v5.2.0
CSI_ATTACHER_IMAGE = "registry.k8s.io/sig-storage/csi-attacher:v4.8.1"  # kubernetes-csi/external-attacher tag v4.8.1
CSI_RESIZER_IMAGE = "registry.k8s.io/sig-storage/csi-resizer:v1.13.2"  # kubernetes-csi/external-resizer tag v1.13.2
CSI_SNAPSHOTTER_IMAGE = "registry.k8s.io/sig-storage/csi-snapshotter:v8.2.1"  # kubernetes-csi/external-snapshotter tag v8.2.1
CSI_NODE_REGISTRAR_IMAGE = "registry.k8s.io/sig-storage/csi-node-driver-registrar:v2.13.0"  # kubernetes-csi/node-driver-registrar tag v2.13.0

# Inside each tenant with monitoring on (components/monitoring_documents.py). The collector is
# Google Cloud Managed Service for Prometheus' drop-in Prometheus (self-deployed collection,
# https://cloud.google.com/stackdriver/docs/managed-prometheus/setup-unmanaged), the image Google's
# own managed collector DaemonSet runs in GoogleCloudPlatform/prometheus-engine tag v0.17.2
# (manifests/operator.yaml, charts/values.global.yaml `images.prometheus`). Its source is
# GoogleCloudPlatform/prometheus tag v2.53.5-gmp.1 (the tag without the -gke.N build suffix),
# whose google/export package writes to Cloud Monitoring (prometheus-engine moved it into that fork
# in v0.17.0: commit 7178582a, "move secret and export packages to GMP Prometheus fork").
# kube-state-metrics v2.20.0 is built with client-go v1.36, the Kubernetes of vcluster 0.36.1's
# default distro (kubernetes/kube-state-metrics tag v2.20.0, README.md's compatibility matrix;
# loft-sh/vcluster tag v0.36.1 chart/values.yaml, kube-apiserver image tag v1.36.0).
GMP_PROMETHEUS_IMAGE = "gke.gcr.io/prometheus-engine/prometheus:v2.53.5-gmp.1-gke.2"
# The shell the same DaemonSet's init container runs (same manifest): ours writes the node's name
# into the collector's configuration.
GMP_INIT_IMAGE = "gke.gcr.io/gke-distroless/bash:gke_distroless_20251107.00_p0"
KUBE_STATE_METRICS_IMAGE = "registry.k8s.io/kube-state-metrics/kube-state-metrics:v2.20.0"

# Official GCP auto-nodes templates: only environment/infrastructure, only in the opt-in legacy
# mode (our templates/ replace the rest). Pinned by commit: a tag can be moved upstream, a commit
# cannot.
AUTO_NODES_GCP_REPOSITORY = "https://github.com/loft-sh/vcluster-auto-nodes-gcp.git"
AUTO_NODES_GCP_COMMIT = "3244616f0b4a59f75e28aec8fa3248ead06738eb"
AUTO_NODES_GCP_TAG = "v0.1.1"  # the tag of that commit

# vCluster minor → lowest platform version that manages it (vcluster pkg/platform/version.go).
VCLUSTER_MIN_PLATFORM: dict[str, str] = {
    "0.30": "4.5.0",
    "0.31": "4.6.0",
    "0.32": "4.7.0",
    "0.33": "4.8.0",
    "0.34": "4.9.0",
    "0.35": "4.10.0",
    "0.36": "4.11.0",
}

# The chart versions a stack may choose (platform.chartVersion, platform.vclusterVersion): those this
# release renders its values for and tests with (the vcluster values schema of tests/data, the
# platform's values and API as docs/sources.md cites them at these tags). Another version is refused
# when the stack is planned, not found out by `pulumi up` or by the chart; adding one means reading
# its chart at its tag as docs/sources.md does for the pinned ones, then listing it here.
SUPPORTED_PLATFORM_CHART_VERSIONS = (PLATFORM_CHART_VERSION,)
SUPPORTED_VCLUSTER_CHART_VERSIONS = (VCLUSTER_CHART_VERSION,)

# admin.passwordSecretRef first appeared in chart 4.9.1; we never put the password in values.
MIN_PLATFORM_FOR_PASSWORD_SECRET_REF = "4.9.1"


def parse_version(text: str) -> tuple[int, ...]:
    """'v4.11.2' or '4.11.2' → (4, 11, 2). Raises ValueError for anything else."""
    parts = text.lstrip("v").split(".")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        raise ValueError(f"{text!r} is not a release version like 4.11.2")
    return tuple(int(p) for p in parts)


def platform_supports_vcluster(platform_version: str, vcluster_version: str) -> bool:
    """True when the platform is at least the minimum the vCluster minor needs, and the vCluster
    minor is one we know (newer minors need a newer platform than we can vouch for)."""
    minor = ".".join(vcluster_version.lstrip("v").split(".")[:2])
    minimum = VCLUSTER_MIN_PLATFORM.get(minor)
    return minimum is not None and parse_version(platform_version) >= parse_version(minimum)

# The GPU watchdog inside each tenant (components/gpu_watchdog.py, run from a ConfigMap): the
# Docker official Python image, slim Debian bookworm variant, pinned to a patch release.
WATCHDOG_IMAGE = "docker.io/library/python:3.12.12-slim-bookworm"
# The smoke test's pod (components/tenant_documents.py): a CUDA base image whose userspace matches
# the 570 driver of the Deep Learning VM image family.
SMOKE_TEST_IMAGE = "nvcr.io/nvidia/cuda:12.8.1-base-ubuntu24.04"

# Every image the program puts into a tenant is pinned by its release tag, and by `@sha256:` digest
# where the image's upstream publishes that digest in a public source we read (cited next to the
# pin). None does yet; for each, why its digest is not pinned. A test holds every image the program
# renders (the tenants' objects, the kubernetes template's) to a digest or an entry here, and every
# entry to an image it renders. When bumping one, pin the digest its registry serves for the tag
# (`crane digest <image>` or `docker buildx imagetools inspect <image>`), with that source.
IMAGES_WITHOUT_DIGEST: dict[str, str] = {
    GMP_PROMETHEUS_IMAGE: "Google publishes it by tag only (prometheus-engine tag v0.17.2: manifests/operator.yaml, charts/values.global.yaml)",
    GMP_INIT_IMAGE: "Google publishes it by tag only (prometheus-engine tag v0.17.2: manifests/operator.yaml, charts/values.global.yaml)",
    KUBE_STATE_METRICS_IMAGE: (
        "registry.k8s.io records digests in kubernetes/k8s.io registry.k8s.io/images/k8s-staging-kube-state-metrics/images.yaml "
        "(v2.20.0: pull request 9839); the copy of that file read when this was pinned stops at v2.15.0"
    ),
    CCM_IMAGE: "kubernetes/k8s.io registry.k8s.io/images/k8s-staging-cloud-provider-gcp/images.yaml as read when this was pinned stops at v30.0.0",
    PD_CSI_DRIVER_IMAGE: "kubernetes/k8s.io registry.k8s.io/images/k8s-staging-cloud-provider-gcp/images.yaml as read when this was pinned stops at v1.15.0 without v1.13.9",
    CSI_PROVISIONER_IMAGE: "kubernetes/k8s.io registry.k8s.io/images/k8s-staging-sig-storage/images.yaml as read when this was pinned stops at v3.5.0",
    CSI_ATTACHER_IMAGE: "kubernetes/k8s.io registry.k8s.io/images/k8s-staging-sig-storage/images.yaml as read when this was pinned stops at v4.3.0",
    CSI_RESIZER_IMAGE: "kubernetes/k8s.io registry.k8s.io/images/k8s-staging-sig-storage/images.yaml as read when this was pinned stops at v1.8.0",
    CSI_SNAPSHOTTER_IMAGE: "kubernetes/k8s.io registry.k8s.io/images/k8s-staging-sig-storage/images.yaml as read when this was pinned stops at v6.2.2",
    CSI_NODE_REGISTRAR_IMAGE: "kubernetes/k8s.io registry.k8s.io/images/k8s-staging-sig-storage/images.yaml as read when this was pinned stops at v2.8.0",
    WATCHDOG_IMAGE: (
        "Docker publishes official images' digests on Docker Hub and in docker-library/repo-info (repos/python/remote/<tag>.md), "
        "which holds no 3.12.12-slim-bookworm page as read when this was pinned"
    ),
    SMOKE_TEST_IMAGE: "NVIDIA publishes its digests on NGC (nvcr.io) only, in no public repository",
}
