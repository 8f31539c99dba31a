# "kubernetes" environment template of the gpu-platform NodeProvider: the GCP cloud controller
# manager (CCM) and the Compute Engine persistent disk (PD) CSI driver inside a tenant cluster.
#
# The vCluster Platform runs it with OpenTofu once per vCluster, after the infrastructure template
# (templates/environment/main.tf, or the official one in legacy mode) and before the first node
# (embedded inline by GcpNodeProvider: one file, no modules). It replaces the official
# environment/kubernetes template of loft-sh/vcluster-auto-nodes-gcp (tag v0.1.1) and keeps what
# that one provides: the CCM with its node controller, the PD CSI driver and a StorageClass, each
# behind the properties vcluster.com/ccm-enabled, vcluster.com/ccm-lb-enabled and
# vcluster.com/csi-enabled (same names, same defaults: its locals.tf).
#
# What is different, and why:
# - `multizone = true` in the CCM's cloud-config. cloud-provider-gcp manages only the zone of the
#   node the CCM runs on unless `multizone` or `regional` is set in [Global] (tag ccm/v33.1.1,
#   providers/gce/gce.go `generateCloudConfig`: ManagedZones = [local zone], or nil = "Use all zones
#   in region", then `getZonesForRegion` in `CreateGCECloud`); it looks a new node's VM up only in
#   the managed zones (gce_instances.go `getInstanceByName`), so a node in any other zone stays
#   tainted node.cloudprovider.kubernetes.io/uninitialized with no providerID. `regional` would
#   also mark the cluster regional, which only GKE's cluster listing reads (gce_clusters.go). The
#   cloud-config has no key for a list of zones: the CCM manages every zone of its region, and the
#   check below makes sure every zone the node types use (rendered in by GcpNodeProvider) is in it.
# - Pinned versions from config/versions.py (rendered in). Our own names (gpu-platform-<hash>-…)
#   for the CCM and the PD CSI workloads and their RBAC; the CSIDriver (pd.csi.storage.gke.io, the
#   driver's name) and the StorageClass <provider>-disk-default keep upstream's names, so both
#   collide with the official template's: a tenant made with that one cannot switch in place
#   (docs/gpu-nodes.md "Zones", says what to do).
# - The StorageClass <provider>-disk-default uses pd-balanced and is the default class (vCluster's
#   local-path class is a default too; Kubernetes uses the newest default, and this one is created
#   later); <provider>-hyperdisk-balanced, not a default, serves machine series that take only
#   Hyperdisk.
# - Strategy Recreate for both single-replica hostNetwork Deployments, and the CCM's ConfigMap
#   rights in kube-system only (see there).
# - The CCM and both PD CSI components run with hostNetwork, as upstream: they reach the metadata
#   server for their credentials, while pods on tenant nodes may be cut off from it.
#
# Its only input is `var.vcluster`, which the platform declares itself; do not declare it here
# (templates/vcluster_variable.tf holds a copy for local checks only). Values are unwrapped with
# nonsensitive(): they are names and switches, not secrets; the kubeconfig path stays sensitive.

terraform {
  required_version = ">= 1.6"

  required_providers {
    kubernetes = {
      source  = "hashicorp/kubernetes"
      version = "2.38.0"
    }
  }
}

# The tenant cluster: the platform writes its kubeconfig to this path (as the official template
# reads it, environment/kubernetes/versions.tf).
provider "kubernetes" {
  config_path = var.vcluster.kubeConfig
}

locals {
  # Rendered by GcpNodeProvider (components/templates.py): the images of config/versions.py and
  # the zones of the NodeProvider's node types.
  images = {
    cloud_controller_manager = "__GPU_PLATFORM_CCM_IMAGE__"
    pd_csi_driver            = "__GPU_PLATFORM_PD_CSI_DRIVER_IMAGE__"
    csi_provisioner          = "__GPU_PLATFORM_CSI_PROVISIONER_IMAGE__"
    csi_attacher             = "__GPU_PLATFORM_CSI_ATTACHER_IMAGE__"
    csi_resizer              = "__GPU_PLATFORM_CSI_RESIZER_IMAGE__"
    csi_snapshotter          = "__GPU_PLATFORM_CSI_SNAPSHOTTER_IMAGE__"
    csi_node_registrar       = "__GPU_PLATFORM_CSI_NODE_REGISTRAR_IMAGE__"
  }
  node_type_zones = compact(split(",", "__GPU_PLATFORM_NODE_TYPE_ZONES__"))

  region             = trimspace(split(",", try(nonsensitive(var.vcluster.properties["region"]), ""))[0])
  vcluster_name      = try(nonsensitive(var.vcluster.instance.metadata.name), "")
  node_provider_name = try(nonsensitive(var.vcluster.nodeProvider.metadata.name), "")
  # Outputs of the infrastructure template (ours and the official one use these names).
  network_name = try(nonsensitive(var.vcluster.nodeEnvironment.outputs.infrastructure["network_name"]), "")
  subnet_name  = try(nonsensitive(var.vcluster.nodeEnvironment.outputs.infrastructure["subnet_name"]), "")

  ccm_enabled    = try(tobool(nonsensitive(var.vcluster.properties["vcluster.com/ccm-enabled"])), true)
  ccm_lb_enabled = try(tobool(nonsensitive(var.vcluster.properties["vcluster.com/ccm-lb-enabled"])), true)
  csi_enabled    = try(tobool(nonsensitive(var.vcluster.properties["vcluster.com/csi-enabled"])), true)

  # Several NodeProviders may serve one vCluster: their objects must not collide.
  suffix = substr(md5("${local.node_provider_name}/${local.vcluster_name}"), 0, 8)
  # The CCM's name ends like upstream's (`…cloud-controller-manager`): `make acceptance` finds its
  # pods by that (tests/acceptance/kube.py `pick_gpu_zone`).
  ccm = "gpu-platform-${local.suffix}-cloud-controller-manager"
  csi = "gpu-platform-${local.suffix}-pd-csi"

  zones_outside_region = [for zone in local.node_type_zones : zone if !startswith(zone, "${local.region}-")]
  wildcard             = "[*?\\[\\]{}]"
  region_concrete      = local.region != "" && !can(regex(local.wildcard, local.region))

  # node-tags: the VMs' network tag (templates/node/main.tf tags them with the vCluster's name),
  # which the CCM's firewall rules for LoadBalancer Services target.
  cloud_config = join("\n", [
    "[Global]",
    "node-tags = ${local.vcluster_name}",
    "network-name = ${local.network_name}",
    "subnetwork-name = ${local.subnet_name}",
    "multizone = true",
    "",
  ])

  annotations = { "vcluster.loft.sh/node-provider" = local.node_provider_name }
  labels      = { "app.kubernetes.io/part-of" = "gpu-platform" }

  # Taints of a tenant node before it is ready for workloads, as the official template tolerates
  # them: Karpenter's registration taint and vCluster's clean-up taint.
  node_lifecycle_tolerations = [
    { key = "node-role.kubernetes.io/master", operator = "Exists", effect = "NoSchedule" },
    { key = "node-role.kubernetes.io/control-plane", operator = "Exists", effect = "NoSchedule" },
    { key = "karpenter.sh/unregistered", operator = "Exists", effect = "NoExecute" },
    { key = "vcluster.com/cleanup", operator = "Exists", effect = "NoExecute" },
  ]
  provider_nodes = { "kubernetes.io/os" = "linux", "vcluster.loft.sh/node-provider" = local.node_provider_name }

  # --- cloud controller manager ---------------------------------------------------------------

  ccm_controllers = local.ccm_lb_enabled ? "*,-node-ipam-controller" : "*,-service,-node-ipam-controller"

  ccm_manifests = [
    {
      apiVersion = "v1"
      kind       = "ServiceAccount"
      metadata   = { name = local.ccm, namespace = "kube-system", annotations = local.annotations, labels = local.labels }
    },
    {
      apiVersion = "rbac.authorization.k8s.io/v1"
      kind       = "ClusterRole"
      metadata   = { name = local.ccm, annotations = local.annotations, labels = local.labels }
      rules = [
        { apiGroups = [""], resources = ["events"], verbs = ["create", "patch", "update"] },
        # The node controllers initialize, update and delete nodes.
        { apiGroups = [""], resources = ["nodes"], verbs = ["get", "list", "watch", "update", "patch", "delete"] },
        { apiGroups = [""], resources = ["nodes/status"], verbs = ["patch", "update"] },
        { apiGroups = [""], resources = ["services", "services/status"], verbs = ["get", "list", "watch", "patch", "update"] },
        { apiGroups = [""], resources = ["persistentvolumes"], verbs = ["get", "list", "watch", "update"] },
        # No serviceaccounts or serviceaccounts/token: the controllers run with the CCM's own
        # account (--use-service-account-credentials=false), and minting tokens for other accounts
        # would let the CCM act as any of them. No endpoints: leader election uses a Lease.
        # No ConfigMaps: the one the CCM writes is in kube-system (the Role below).
        { apiGroups = ["coordination.k8s.io"], resources = ["leases"], verbs = ["create", "get", "list", "watch", "update"] },
      ]
    },
    {
      # The GCE provider keeps the cluster's load-balancer UID in ConfigMap kube-system/ingress-uid
      # and touches no other ConfigMap: it watches that one name only (a metadata.name field
      # selector) and creates it when missing, never updates it (kubernetes/cloud-provider-gcp tag
      # ccm/v33.1.1, providers/gce/gce_clusterid.go `watchClusterID`, `getOrInitialize`). Reads
      # are limited to that name (RBAC honours resourceNames for list/watch with such a selector);
      # create cannot be limited by name (https://kubernetes.io/docs/reference/access-authn-authz/rbac/#referring-to-resources).
      apiVersion = "rbac.authorization.k8s.io/v1"
      kind       = "Role"
      metadata   = { name = local.ccm, namespace = "kube-system", annotations = local.annotations, labels = local.labels }
      rules = [
        { apiGroups = [""], resources = ["configmaps"], resourceNames = ["ingress-uid"], verbs = ["get", "list", "watch"] },
        { apiGroups = [""], resources = ["configmaps"], verbs = ["create"] },
      ]
    },
    {
      apiVersion = "rbac.authorization.k8s.io/v1"
      kind       = "RoleBinding"
      metadata   = { name = local.ccm, namespace = "kube-system", annotations = local.annotations, labels = local.labels }
      roleRef    = { apiGroup = "rbac.authorization.k8s.io", kind = "Role", name = local.ccm }
      subjects   = [{ kind = "ServiceAccount", name = local.ccm, namespace = "kube-system" }]
    },
    {
      apiVersion = "rbac.authorization.k8s.io/v1"
      kind       = "ClusterRoleBinding"
      metadata   = { name = local.ccm, annotations = local.annotations, labels = local.labels }
      roleRef    = { apiGroup = "rbac.authorization.k8s.io", kind = "ClusterRole", name = local.ccm }
      subjects   = [{ kind = "ServiceAccount", name = local.ccm, namespace = "kube-system" }]
    },
    {
      apiVersion = "rbac.authorization.k8s.io/v1"
      kind       = "RoleBinding"
      metadata   = { name = "${local.ccm}-auth-reader", namespace = "kube-system", annotations = local.annotations, labels = local.labels }
      roleRef    = { apiGroup = "rbac.authorization.k8s.io", kind = "Role", name = "extension-apiserver-authentication-reader" }
      subjects   = [{ kind = "ServiceAccount", name = local.ccm, namespace = "kube-system" }]
    },
    {
      apiVersion = "v1"
      kind       = "ConfigMap"
      metadata   = { name = "${local.ccm}-config", namespace = "kube-system", annotations = local.annotations, labels = local.labels }
      data       = { "cloud-config" = local.cloud_config }
    },
    {
      apiVersion = "apps/v1"
      kind       = "Deployment"
      metadata   = { name = local.ccm, namespace = "kube-system", annotations = local.annotations, labels = local.labels }
      spec = {
        replicas = 1
        # The old pod goes before the new one starts: with hostNetwork a second pod on the same
        # node cannot bind the CCM's port (10258), so a RollingUpdate's surge pod never gets Ready
        # and the rollout stalls (https://kubernetes.io/docs/concepts/workloads/controllers/deployment/#recreate-deployment).
        # Upstream sets no strategy (loft-sh/vcluster-auto-nodes-gcp v0.1.1 ccm.yaml.tftpl).
        strategy = { type = "Recreate" }
        selector = { matchLabels = { "app.kubernetes.io/name" = local.ccm } }
        template = {
          metadata = {
            labels = { "app.kubernetes.io/name" = local.ccm, "app.kubernetes.io/part-of" = "gpu-platform" }
            # A new cloud-config restarts the CCM.
            annotations = { "gpu-platform/cloud-config-sha256" = sha256(local.cloud_config) }
          }
          spec = {
            hostNetwork        = true
            dnsPolicy          = "Default"
            serviceAccountName = local.ccm
            priorityClassName  = "system-cluster-critical"
            nodeSelector       = local.provider_nodes
            # It must run on nodes it has not initialized yet, or no node is ever initialized.
            tolerations = concat(local.node_lifecycle_tolerations, [
              { key = "node.cloudprovider.kubernetes.io/uninitialized", operator = "Equal", value = "true", effect = "NoSchedule" },
              { key = "node.kubernetes.io/not-ready", operator = "Exists", effect = "NoSchedule" },
            ])
            containers = [
              {
                name    = "cloud-controller-manager"
                image   = local.images.cloud_controller_manager
                command = ["/cloud-controller-manager"]
                args = [
                  "--v=2",
                  "--cloud-provider=gce",
                  "--cloud-config=/etc/kubernetes/cloud-config",
                  "--cluster-name=${local.vcluster_name}",
                  "--controllers=${local.ccm_controllers}",
                  "--configure-cloud-routes=false",
                  "--use-service-account-credentials=false",
                  "--leader-elect-resource-lock=leases",
                  "--leader-elect-resource-name=${local.ccm}",
                ]
                livenessProbe = {
                  httpGet             = { scheme = "HTTPS", path = "/healthz", port = 10258 }
                  initialDelaySeconds = 15
                  periodSeconds       = 10
                  timeoutSeconds      = 15
                  failureThreshold    = 3
                }
                resources    = { requests = { cpu = "200m", memory = "128Mi" } }
                volumeMounts = [{ name = "cloud-config", mountPath = "/etc/kubernetes", readOnly = true }]
              },
            ]
            volumes = [
              { name = "cloud-config", configMap = { name = "${local.ccm}-config", items = [{ key = "cloud-config", path = "cloud-config" }] } },
            ]
          }
        }
      }
    },
  ]

  # --- PD CSI driver --------------------------------------------------------------------------

  # What each controller sidecar may do, cluster-wide (the kubernetes-csi sidecars' documented
  # RBAC); one ClusterRole and binding per sidecar.
  csi_controller_rules = {
    provisioner = [
      { apiGroups = [""], resources = ["persistentvolumes"], verbs = ["get", "list", "watch", "create", "delete"] },
      { apiGroups = [""], resources = ["persistentvolumeclaims"], verbs = ["get", "list", "watch", "update"] },
      { apiGroups = [""], resources = ["events"], verbs = ["list", "watch", "create", "update", "patch"] },
      { apiGroups = [""], resources = ["nodes"], verbs = ["get", "list", "watch"] },
      { apiGroups = ["storage.k8s.io"], resources = ["storageclasses", "csinodes", "volumeattachments"], verbs = ["get", "list", "watch"] },
      { apiGroups = ["snapshot.storage.k8s.io"], resources = ["volumesnapshots", "volumesnapshotcontents"], verbs = ["get", "list"] },
    ]
    attacher = [
      { apiGroups = [""], resources = ["persistentvolumes"], verbs = ["get", "list", "watch", "update", "patch"] },
      { apiGroups = [""], resources = ["nodes"], verbs = ["get", "list", "watch"] },
      { apiGroups = ["storage.k8s.io"], resources = ["csinodes"], verbs = ["get", "list", "watch"] },
      { apiGroups = ["storage.k8s.io"], resources = ["volumeattachments"], verbs = ["get", "list", "watch", "update", "patch"] },
      { apiGroups = ["storage.k8s.io"], resources = ["volumeattachments/status"], verbs = ["patch"] },
    ]
    resizer = [
      { apiGroups = [""], resources = ["persistentvolumes"], verbs = ["get", "list", "watch", "update", "patch"] },
      { apiGroups = [""], resources = ["persistentvolumeclaims"], verbs = ["get", "list", "watch"] },
      { apiGroups = [""], resources = ["persistentvolumeclaims/status"], verbs = ["update", "patch"] },
      { apiGroups = [""], resources = ["pods"], verbs = ["get", "list", "watch"] },
      { apiGroups = [""], resources = ["events"], verbs = ["list", "watch", "create", "update", "patch"] },
    ]
    snapshotter = [
      { apiGroups = [""], resources = ["events"], verbs = ["list", "watch", "create", "update", "patch"] },
      { apiGroups = ["snapshot.storage.k8s.io"], resources = ["volumesnapshotclasses"], verbs = ["get", "list", "watch"] },
      { apiGroups = ["snapshot.storage.k8s.io"], resources = ["volumesnapshotcontents"], verbs = ["create", "get", "list", "watch", "update", "delete", "patch"] },
      { apiGroups = ["snapshot.storage.k8s.io"], resources = ["volumesnapshotcontents/status"], verbs = ["update", "patch"] },
    ]
  }

  # Controller sidecars, each talking to the driver over the shared socket; the ones with an HTTP
  # endpoint are probed on it.
  csi_sidecars = {
    provisioner = {
      image = local.images.csi_provisioner
      port  = 22011
      probe = true
      # Topology: volumes are created in the zone of the node the pod was scheduled to
      # (WaitForFirstConsumer), and carry node affinity on topology.gke.io/zone.
      # --controller-publish-readonly: a ReadOnlyMany volume is attached read-only, as upstream
      # deploys the driver (kubernetes-sigs/gcp-compute-persistent-disk-csi-driver tag v1.13.9,
      # deploy/kubernetes/base/controller/controller.yaml; also the official template's csi.yaml.tftpl).
      args = ["--feature-gates=Topology=true", "--extra-create-metadata", "--default-fstype=ext4", "--timeout=250s", "--controller-publish-readonly=true"]
    }
    attacher    = { image = local.images.csi_attacher, port = 22012, probe = true, args = ["--timeout=250s", "--default-fstype=ext4"] }
    resizer     = { image = local.images.csi_resizer, port = 22013, probe = true, args = ["--handle-volume-inuse-error=false"] }
    snapshotter = { image = local.images.csi_snapshotter, port = 22014, probe = false, args = ["--timeout=300s"] }
  }

  csi_liveness_probe = {
    httpGet             = { path = "/healthz/leader-election", port = "http-endpoint" }
    initialDelaySeconds = 10
    periodSeconds       = 20
    timeoutSeconds      = 10
    failureThreshold    = 1
  }

  csi_rbac = flatten([
    for sidecar, rules in local.csi_controller_rules : [
      {
        apiVersion = "rbac.authorization.k8s.io/v1"
        kind       = "ClusterRole"
        metadata   = { name = "${local.csi}-${sidecar}", annotations = local.annotations, labels = local.labels }
        rules      = rules
      },
      {
        apiVersion = "rbac.authorization.k8s.io/v1"
        kind       = "ClusterRoleBinding"
        metadata   = { name = "${local.csi}-${sidecar}", annotations = local.annotations, labels = local.labels }
        roleRef    = { apiGroup = "rbac.authorization.k8s.io", kind = "ClusterRole", name = "${local.csi}-${sidecar}" }
        subjects   = [{ kind = "ServiceAccount", name = "${local.csi}-controller", namespace = "kube-system" }]
      },
    ]
  ])

  # StorageClasses, named <provider>-<key>. disk-default (upstream's name) is the default class.
  # hyperdisk-balanced serves machine series that take Hyperdisk only (A3 Ultra, a3-ultragpu-8g),
  # chosen by name, never the default: the pinned driver creates hyperdisk-balanced disks (tag
  # v1.13.9, pkg/gce-cloud-provider/compute/gce-compute.go `hyperdiskTypes`), with the disk type's
  # default IOPS and throughput.
  storage_classes = {
    disk-default       = { type = "pd-balanced", default = true }
    hyperdisk-balanced = { type = "hyperdisk-balanced", default = false }
  }

  csi_manifests = concat(
    [
      for component in ["controller", "node"] : {
        apiVersion = "v1"
        kind       = "ServiceAccount"
        metadata   = { name = "${local.csi}-${component}", namespace = "kube-system", annotations = local.annotations, labels = local.labels }
      }
    ],
    local.csi_rbac,
    [
      {
        apiVersion = "rbac.authorization.k8s.io/v1"
        kind       = "Role"
        metadata   = { name = "${local.csi}-leader-election", namespace = "kube-system", annotations = local.annotations, labels = local.labels }
        rules      = [{ apiGroups = ["coordination.k8s.io"], resources = ["leases"], verbs = ["get", "list", "watch", "create", "update", "delete"] }]
      },
      {
        apiVersion = "rbac.authorization.k8s.io/v1"
        kind       = "RoleBinding"
        metadata   = { name = "${local.csi}-leader-election", namespace = "kube-system", annotations = local.annotations, labels = local.labels }
        roleRef    = { apiGroup = "rbac.authorization.k8s.io", kind = "Role", name = "${local.csi}-leader-election" }
        subjects   = [{ kind = "ServiceAccount", name = "${local.csi}-controller", namespace = "kube-system" }]
      },
      {
        apiVersion = "rbac.authorization.k8s.io/v1"
        kind       = "ClusterRole"
        metadata   = { name = "${local.csi}-node", annotations = local.annotations, labels = local.labels }
        rules      = [{ apiGroups = [""], resources = ["nodes"], verbs = ["get", "list"] }]
      },
      {
        apiVersion = "rbac.authorization.k8s.io/v1"
        kind       = "ClusterRoleBinding"
        metadata   = { name = "${local.csi}-node", annotations = local.annotations, labels = local.labels }
        roleRef    = { apiGroup = "rbac.authorization.k8s.io", kind = "ClusterRole", name = "${local.csi}-node" }
        subjects   = [{ kind = "ServiceAccount", name = "${local.csi}-node", namespace = "kube-system" }]
      },
      {
        apiVersion = "apps/v1"
        kind       = "Deployment"
        metadata   = { name = "${local.csi}-controller", namespace = "kube-system", annotations = local.annotations, labels = local.labels }
        spec = {
          replicas = 1
          # As the CCM's: its hostNetwork sidecars claim host ports 22011-22014, so the scheduler
          # puts no second controller pod on that node and a surge pod stays Pending.
          strategy = { type = "Recreate" }
          selector = { matchLabels = { "app.kubernetes.io/name" = "${local.csi}-controller" } }
          template = {
            metadata = { labels = { "app.kubernetes.io/name" = "${local.csi}-controller", "app.kubernetes.io/part-of" = "gpu-platform" } }
            spec = {
              hostNetwork        = true
              serviceAccountName = "${local.csi}-controller"
              priorityClassName  = "system-cluster-critical"
              nodeSelector       = local.provider_nodes
              tolerations        = local.node_lifecycle_tolerations
              containers = concat(
                [
                  for name, sidecar in local.csi_sidecars : merge(
                    {
                      name  = "csi-${name}"
                      image = sidecar.image
                      args = concat(
                        ["--v=2", "--csi-address=/csi/csi.sock", "--http-endpoint=:${sidecar.port}", "--leader-election", "--leader-election-namespace=kube-system"],
                        sidecar.args,
                      )
                      ports        = [{ name = "http-endpoint", containerPort = sidecar.port, protocol = "TCP" }]
                      volumeMounts = [{ name = "socket-dir", mountPath = "/csi" }]
                    },
                    { for key, probe in { livenessProbe = local.csi_liveness_probe } : key => probe if sidecar.probe },
                  )
                ],
                [
                  {
                    name         = "gce-pd-driver"
                    image        = local.images.pd_csi_driver
                    command      = ["/gce-pd-csi-driver"]
                    args         = ["--v=2", "--endpoint=unix:/csi/csi.sock", "--run-node-service=false"]
                    volumeMounts = [{ name = "socket-dir", mountPath = "/csi" }]
                  },
                ],
              )
              volumes = [{ name = "socket-dir", emptyDir = {} }]
            }
          }
        }
      },
      {
        apiVersion = "apps/v1"
        kind       = "DaemonSet"
        metadata   = { name = "${local.csi}-node", namespace = "kube-system", annotations = local.annotations, labels = local.labels }
        spec = {
          selector = { matchLabels = { "app.kubernetes.io/name" = "${local.csi}-node" } }
          template = {
            metadata = { labels = { "app.kubernetes.io/name" = "${local.csi}-node", "app.kubernetes.io/part-of" = "gpu-platform" } }
            spec = {
              hostNetwork        = true
              serviceAccountName = "${local.csi}-node"
              priorityClassName  = "system-node-critical"
              nodeSelector       = local.provider_nodes
              # On every node of the provider, GPU nodes included, whatever their taints.
              tolerations = [{ operator = "Exists" }]
              containers = [
                {
                  name  = "csi-driver-registrar"
                  image = local.images.csi_node_registrar
                  args = [
                    "--v=2",
                    "--csi-address=/csi/csi.sock",
                    "--kubelet-registration-path=/var/lib/kubelet/plugins/pd.csi.storage.gke.io/csi.sock",
                  ]
                  env = [{ name = "KUBE_NODE_NAME", valueFrom = { fieldRef = { fieldPath = "spec.nodeName" } } }]
                  volumeMounts = [
                    { name = "plugin-dir", mountPath = "/csi" },
                    { name = "registration-dir", mountPath = "/registration" },
                  ]
                },
                {
                  name            = "gce-pd-driver"
                  image           = local.images.pd_csi_driver
                  command         = ["/gce-pd-csi-driver"]
                  args            = ["--v=2", "--endpoint=unix:/csi/csi.sock", "--run-controller-service=false"]
                  env             = [{ name = "KUBE_NODE_NAME", valueFrom = { fieldRef = { fieldPath = "spec.nodeName" } } }]
                  securityContext = { privileged = true }
                  volumeMounts = [
                    { name = "kubelet-dir", mountPath = "/var/lib/kubelet", mountPropagation = "Bidirectional" },
                    { name = "plugin-dir", mountPath = "/csi" },
                    { name = "device-dir", mountPath = "/dev" },
                    { name = "udev-rules-etc", mountPath = "/etc/udev" },
                    { name = "udev-rules-lib", mountPath = "/lib/udev" },
                    { name = "udev-socket", mountPath = "/run/udev" },
                    { name = "sys", mountPath = "/sys" },
                    { name = "lib-modules", mountPath = "/lib/modules", readOnly = true },
                  ]
                },
              ]
              volumes = [
                { name = "registration-dir", hostPath = { path = "/var/lib/kubelet/plugins_registry/", type = "Directory" } },
                { name = "kubelet-dir", hostPath = { path = "/var/lib/kubelet", type = "Directory" } },
                { name = "plugin-dir", hostPath = { path = "/var/lib/kubelet/plugins/pd.csi.storage.gke.io/", type = "DirectoryOrCreate" } },
                { name = "device-dir", hostPath = { path = "/dev", type = "Directory" } },
                { name = "udev-rules-etc", hostPath = { path = "/etc/udev", type = "Directory" } },
                { name = "udev-rules-lib", hostPath = { path = "/lib/udev", type = "Directory" } },
                { name = "udev-socket", hostPath = { path = "/run/udev", type = "Directory" } },
                { name = "sys", hostPath = { path = "/sys", type = "Directory" } },
                { name = "lib-modules", hostPath = { path = "/lib/modules", type = "Directory" } },
              ]
            }
          }
        }
      },
      {
        apiVersion = "storage.k8s.io/v1"
        kind       = "CSIDriver"
        metadata   = { name = "pd.csi.storage.gke.io", annotations = local.annotations, labels = local.labels }
        spec       = { attachRequired = true, podInfoOnMount = false, fsGroupPolicy = "File" }
      },
    ],
    [
      for name, class in local.storage_classes : {
        apiVersion = "storage.k8s.io/v1"
        kind       = "StorageClass"
        metadata = {
          name        = "${local.node_provider_name}-${name}"
          annotations = merge(local.annotations, class.default ? { "storageclass.kubernetes.io/is-default-class" = "true" } : {})
          labels      = local.labels
        }
        provisioner = "pd.csi.storage.gke.io"
        # A zonal disk is created where the pod's node is, and then binds the pod to that zone.
        volumeBindingMode    = "WaitForFirstConsumer"
        allowVolumeExpansion = true
        reclaimPolicy        = "Delete"
        parameters           = { type = class.type, "csi.storage.k8s.io/fstype" = "ext4" }
      }
    ],
  )

  # Every object, keyed kind/namespace/name; the switches decide which groups are applied.
  manifest_groups = { ccm = local.ccm_manifests, csi = local.csi_manifests }
  enabled_groups  = { ccm = local.ccm_enabled, csi = local.csi_enabled }
  manifests = merge([
    for group, documents in local.manifest_groups : {
      for document in documents : "${document.kind}/${try(document.metadata.namespace, "")}/${document.metadata.name}" => document
    } if local.enabled_groups[group]
  ]...)
}

# Every check on the inputs hangs off this resource, so a bad input fails before anything is
# applied to the tenant.
resource "terraform_data" "inputs" {
  lifecycle {
    precondition {
      condition     = local.vcluster_name != "" && local.node_provider_name != ""
      error_message = "The platform passed no vCluster or NodeProvider name (instance.metadata.name, nodeProvider.metadata.name); the objects and the CCM's node tag are named after them."
    }
    precondition {
      condition     = local.region_concrete
      error_message = "Property region must be a concrete GCP region, not empty or a wildcard (got \"${local.region}\"). Pulumi sets it on each tenant's auto-nodes entry (TenantVCluster)."
    }
    precondition {
      condition     = length(local.node_type_zones) > 0
      error_message = "This template was rendered without the node types' zones; GcpNodeProvider writes them in."
    }
    precondition {
      condition     = !local.region_concrete || length(local.zones_outside_region) == 0
      error_message = "Node types use zones ${join(", ", local.zones_outside_region)} outside region ${local.region}: the cloud controller manager manages the zones of its own region only, so nodes there would never be initialized."
    }
    precondition {
      condition     = !local.ccm_enabled || (local.network_name != "" && local.subnet_name != "")
      error_message = "The infrastructure template passed no network_name or subnet_name output; the cloud controller manager needs both."
    }
  }
}

resource "kubernetes_manifest" "tenant" {
  for_each = local.manifests
  manifest = each.value

  field_manager {
    name            = "gpu-platform"
    force_conflicts = true
  }

  depends_on = [terraform_data.inputs]
}
