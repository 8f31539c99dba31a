# Node template of the gpu-platform NodeProvider: one Compute Engine VM per node claim.
#
# The vCluster Platform runs this file with OpenTofu once per NodeClaim (embedded inline by
# GcpNodeProvider, so it must stay a single file without modules). Its only input is
# `var.vcluster`, which the platform declares itself; do not declare it here
# (templates/vcluster_variable.tf holds a copy for local checks only).
#
# Inputs read:
#   var.vcluster.properties                  project, region, zone (fallback), gpu-platform/tenant,
#                                            gpu-platform/node-metadata
#   var.vcluster.nodeType.spec.properties    NODE_TYPE_KEYS of config/node_properties.py
#   var.vcluster.nodeEnvironment.outputs     subnet_name, service_account_email, node_name_prefix
#                                            (environment template)
#   var.vcluster.userData                    cloud-init that joins the node to its vCluster
#   var.vcluster.instance / nodeClaim        names for the VM, its labels and network tag; the
#                                            instance's gpu-platform/gpu-operator-images annotation
#
# The platform's identity may only create/get/delete instances and disks, use subnetworks and
# poll zone operations (config/permissions.yaml `autoNodes`), so this template reads no data
# sources: the image is addressed by family path and needs no lookup.
#
# `var.vcluster` is sensitive. Every value used in logic or resource arguments is unwrapped with
# nonsensitive(); only the user data (it carries a join token) stays sensitive.

terraform {
  required_version = ">= 1.6"

  required_providers {
    google = {
      source = "hashicorp/google"
      # 7.41.0 documents provisioning_model FLEX_START and RESERVATION_BOUND on
      # google_compute_instance (CHANGELOG, PR 28365); 7.45.0 is the newest release read
      # (hashicorp/terraform-provider-google tag v7.45.0). The 7.0.0 upgrade guide
      # (website/docs/guides/version_7_upgrade.html.markdown) lists no change to
      # google_compute_instance, the only resource of this template.
      version = "7.45.0"
    }
  }
}

provider "google" {
  project = local.project
  region  = local.region
}

locals {
  # Values of vCluster properties may be comma lists or wildcards; the first element is used and
  # the preconditions below refuse wildcards.
  project       = trimspace(split(",", try(nonsensitive(var.vcluster.properties["project"]), ""))[0])
  region        = trimspace(split(",", try(nonsensitive(var.vcluster.properties["region"]), ""))[0])
  fallback_zone = trimspace(split(",", try(nonsensitive(var.vcluster.properties["zone"]), ""))[0])
  tenant        = try(nonsensitive(var.vcluster.properties["gpu-platform/tenant"]), "")

  # Node-type properties, keyed exactly as GcpNodeProvider writes them. A missing key reads as ""
  # so that a precondition can name it instead of OpenTofu failing with "Invalid index".
  node_type = {
    "gpu-platform/instance-type"     = try(nonsensitive(var.vcluster.nodeType.spec.properties["gpu-platform/instance-type"]), "")
    "gpu-platform/accelerator"       = try(nonsensitive(var.vcluster.nodeType.spec.properties["gpu-platform/accelerator"]), "")
    "gpu-platform/accelerator-count" = try(nonsensitive(var.vcluster.nodeType.spec.properties["gpu-platform/accelerator-count"]), "")
    "gpu-platform/capacity-type"     = try(nonsensitive(var.vcluster.nodeType.spec.properties["gpu-platform/capacity-type"]), "")
    "gpu-platform/capacity-rank"     = try(nonsensitive(var.vcluster.nodeType.spec.properties["gpu-platform/capacity-rank"]), "")
    "gpu-platform/capacity-option"   = try(nonsensitive(var.vcluster.nodeType.spec.properties["gpu-platform/capacity-option"]), "")
    "gpu-platform/zone"              = try(nonsensitive(var.vcluster.nodeType.spec.properties["gpu-platform/zone"]), "")
    "gpu-platform/disk-size-gb"      = try(nonsensitive(var.vcluster.nodeType.spec.properties["gpu-platform/disk-size-gb"]), "")
    "gpu-platform/disk-type"         = try(nonsensitive(var.vcluster.nodeType.spec.properties["gpu-platform/disk-type"]), "")
    "gpu-platform/image-family"      = try(nonsensitive(var.vcluster.nodeType.spec.properties["gpu-platform/image-family"]), "")
    "gpu-platform/image-project"     = try(nonsensitive(var.vcluster.nodeType.spec.properties["gpu-platform/image-project"]), "")
    "topology.kubernetes.io/zone"    = try(nonsensitive(var.vcluster.nodeType.spec.properties["topology.kubernetes.io/zone"]), "")
    "topology.kubernetes.io/region"  = try(nonsensitive(var.vcluster.nodeType.spec.properties["topology.kubernetes.io/region"]), "")
    "topology.gke.io/zone"           = try(nonsensitive(var.vcluster.nodeType.spec.properties["topology.gke.io/zone"]), "")
  }
  # Written on some node types only: Flex-start types carry their run duration, reserved types
  # their reservation, its owner project, the tenant whose slice they are and how it is consumed.
  optional_properties = {
    for key in ["gpu-platform/max-run-duration", "gpu-platform/reservation", "gpu-platform/reservation-project", "gpu-platform/reservation-tenant", "gpu-platform/reservation-bound"] :
    key => try(nonsensitive(var.vcluster.nodeType.spec.properties[key]), "")
  }
  node_type_name = try(nonsensitive(var.vcluster.nodeType.metadata.name), "(unnamed)")
  # The zone may be absent (it then comes from the vCluster's `zone` property), and so may the
  # standard zone labels; where they are present they must name the VM's zone and region.
  optional_node_type_properties = ["gpu-platform/zone", "topology.kubernetes.io/zone", "topology.kubernetes.io/region", "topology.gke.io/zone"]
  missing_node_type_properties  = sort([for key, value in local.node_type : key if trimspace(value) == "" && !contains(local.optional_node_type_properties, key)])

  instance_type     = local.node_type["gpu-platform/instance-type"]
  machine_series    = split("-", local.instance_type)[0]
  accelerator       = local.node_type["gpu-platform/accelerator"]
  accelerator_count = try(tonumber(local.node_type["gpu-platform/accelerator-count"]), -1)
  capacity_type     = local.node_type["gpu-platform/capacity-type"]
  capacity_rank     = try(tonumber(local.node_type["gpu-platform/capacity-rank"]), -1)
  zone              = local.node_type["gpu-platform/zone"] != "" ? local.node_type["gpu-platform/zone"] : local.fallback_zone
  disk_size_gb      = try(tonumber(local.node_type["gpu-platform/disk-size-gb"]), 0)
  disk_type         = local.node_type["gpu-platform/disk-type"]
  # A family path is resolved by Compute Engine at create time: no images.get permission needed.
  image = "projects/${local.node_type["gpu-platform/image-project"]}/global/images/family/${local.node_type["gpu-platform/image-family"]}"

  # GPU type -> machine series that carry it. Same data as config/catalog.yaml
  # (tests/test_node_template.py fails when they differ).
  gpu_series = {
    nvidia-tesla-t4   = ["n1"]
    nvidia-tesla-v100 = ["n1"]
    nvidia-tesla-p4   = ["n1"]
    nvidia-tesla-p100 = ["n1"]
    nvidia-l4         = ["g2"]
    nvidia-tesla-a100 = ["a2"]
    nvidia-a100-80gb  = ["a2"]
    nvidia-h100-80gb  = ["a3"]
    nvidia-h200-141gb = ["a3"]
    nvidia-b200       = ["a4"]
  }
  # Series whose GPUs are attached as guest accelerators (N1). Accelerator-optimized series come
  # with their GPUs in the machine type and reject a guest_accelerator block.
  guest_series   = ["n1"]
  builtin_series = ["a2", "a3", "a4", "g2", "g4"]

  gpu        = local.accelerator != "none"
  spot       = local.capacity_type == "spot"
  flex_start = local.capacity_type == "flex-start"
  reserved   = local.capacity_type == "reservation"

  # How the VM is bought (google provider 7.45.0 `scheduling.provisioning_model`: STANDARD, SPOT,
  # FLEX_START, RESERVATION_BOUND). Flex-start, as the provider's own acceptance test creates it
  # (resource_compute_instance_test.go `testAccComputeInstance_flexStart`): no automatic restart,
  # TERMINATE on host maintenance, termination action DELETE and a max_run_duration (Flex-start
  # VMs "can run for up to seven days": https://cloud.google.com/compute/docs/instances/about-flex-start-vms).
  # A reserved type consumes its reservation as STANDARD, or with the reservation-bound model where
  # the reservation came from a future reservation (calendar mode, AI Hypercomputer), which deletes
  # the VM at the end of the reservation period
  # (https://cloud.google.com/compute/docs/instances/about-reservation-bound-instances).
  reservation_bound  = local.reserved && local.optional_properties["gpu-platform/reservation-bound"] == "true"
  provisioning_model = local.spot ? "SPOT" : local.flex_start ? "FLEX_START" : local.reservation_bound ? "RESERVATION_BOUND" : "STANDARD"
  max_run_seconds    = try(tonumber(local.optional_properties["gpu-platform/max-run-duration"]), -1)
  # Every VM says which reservations it may consume. Without a block Compute Engine's default is
  # ANY_RESERVATION (API ReservationAffinity.consumeReservationType: "ANY_RESERVATION (default)"),
  # so an on-demand node would silently take a matching open reservation of its project, another
  # team's plan included. A reserved type names its reservation: by name in its own project, or
  # `projects/<owner>/reservations/<name>` for a reservation shared from another project (API
  # ReservationAffinity.values: "projects/different-project/reservations/some-reservation-name to
  # target a shared reservation in the same zone but in a different project"), under the key the
  # provider documents for targeting by name (google_compute_instance `specific_reservation.key`:
  # compute.googleapis.com/reservation-name).
  reservation_name    = local.optional_properties["gpu-platform/reservation"]
  reservation_project = local.optional_properties["gpu-platform/reservation-project"]
  reservation_tenant  = local.optional_properties["gpu-platform/reservation-tenant"]
  reservation_target  = local.reservation_project == "" || local.reservation_project == local.project ? local.reservation_name : "projects/${local.reservation_project}/reservations/${local.reservation_name}"
  guest_attach        = local.gpu && contains(local.guest_series, local.machine_series)
  gpu_known           = !local.gpu || contains(keys(local.gpu_series), local.accelerator)
  gpu_fits            = !local.gpu || contains(lookup(local.gpu_series, local.accelerator, []), local.machine_series)

  # Written by the environment template (templates/environment/main.tf) from the tenant's
  # properties; the subnet is in the tenant's network, which has Cloud NAT.
  subnet_name           = nonsensitive(var.vcluster.nodeEnvironment.outputs.infrastructure["subnet_name"])
  service_account_email = nonsensitive(var.vcluster.nodeEnvironment.outputs.infrastructure["service_account_email"])
  # "<environment>-<tenant>-" from our environment template; absent with the official one (legacy
  # mode), whose VMs keep names derived from the claim alone.
  name_prefix = try(nonsensitive(var.vcluster.nodeEnvironment.outputs.infrastructure["node_name_prefix"]), "")

  # Names. The VM name starts with the tenant's prefix (the platform may create, change and delete
  # only VMs and disks so named: components/tenant_project.py), continues with the claim (unique
  # per claim), is a valid instance name ([a-z]([-a-z0-9]*[a-z0-9])?, at most 63 characters) and
  # ends with a hash of namespace and claim, because claims in different platform projects may
  # share a name. The boot disk is named after the VM. No custom `hostname`: Compute Engine
  # requires an FQDN there, and the default hostname (= VM name) is what the cloud controller
  # manager maps node names to.
  vcluster_name      = try(nonsensitive(var.vcluster.instance.metadata.name), "")
  vcluster_namespace = try(nonsensitive(var.vcluster.instance.metadata.namespace), "")
  claim_name         = try(nonsensitive(var.vcluster.nodeClaim.metadata.name), "")
  claim_slug         = replace(lower(local.claim_name), "/[^a-z0-9-]/", "-")
  instance_name = format(
    "%s%s-%s",
    local.name_prefix,
    substr(local.name_prefix != "" || can(regex("^[a-z]", local.claim_slug)) ? local.claim_slug : "n-${local.claim_slug}", 0, 56 - length(local.name_prefix)),
    substr(md5("${local.vcluster_namespace}/${local.claim_name}"), 0, 6),
  )

  # GCP label values: lowercase letters, digits, "_" and "-", at most 63 characters.
  labels = {
    for key, value in {
      vcluster      = local.vcluster_name
      namespace     = local.vcluster_namespace
      cluster-name  = local.vcluster_name # the GCP cloud controller manager runs with --cluster-name=<vCluster>
      gpu           = local.gpu ? "true" : "false"
      accelerator   = local.accelerator
      capacity-type = local.capacity_type
      tenant        = local.tenant
    } : key => substr(replace(lower(value), "/[^a-z0-9_-]/", "-"), 0, 63) if value != ""
  }

  has_user_data      = try(nonsensitive(length(var.vcluster.userData) > 0), false)
  platform_user_data = local.has_user_data ? var.vcluster.userData : ""

  # Metadata concealment (tenant nodeMetadata, property gpu-platform/node-metadata; anything but
  # "exposed" conceals). Pods must not reach the metadata server (169.254.169.254), which hands
  # the node service account's token to whoever asks. Pod traffic is forwarded by the node: it
  # enters the host's network stack from a pod interface and passes PREROUTING and FORWARD, which
  # the host's own traffic never does (it leaves through OUTPUT). So the kubelet, the GCP cloud
  # controller manager and the PD CSI controller and node plugin, which all run with hostNetwork
  # (templates/kubernetes/main.tf, as upstream's loft-sh/vcluster-auto-nodes-gcp v0.1.1
  # environment/kubernetes/manifests/*.tftpl), keep their access. Port 53 stays open: the metadata
  # server is also the VPC's DNS resolver, which the tenant's CoreDNS forwards to.
  #
  # Two rules, because a destination can be rewritten on the way:
  # - raw PREROUTING sees the packet before any NAT, so a pod's own request to 169.254.169.254 is
  #   dropped whatever kube-proxy or the CNI later does with it;
  # - mangle FORWARD sees it after DNAT: a Service whose endpoints someone pointed at the metadata
  #   server (a selector-less Service with a hand-made EndpointSlice, a NodePort, a hostPort) sends
  #   pods to its own address, which kube-proxy rewrites to 169.254.169.254 in nat PREROUTING,
  #   after raw. mangle rather than filter: kube-proxy and CNIs insert ACCEPT rules at the top of
  #   filter FORWARD, and mangle FORWARD runs before filter, so none of them can jump past it.
  #
  # It repairs itself and fails closed, because cloud-init runs a failing boothook, logs it and goes
  # on to the platform's join (canonical/cloud-init tag 24.4, cloudinit/handlers/boot_hook.py
  # `handle_part`), and because the rules can be lost while the node runs: the join resets node
  # components unless told not to (vcluster-docs vcluster/deploy/worker-nodes/private-nodes/join.mdx,
  # --skip-reset; what the reset removes is not public), and vCluster's in-place upgrade of the
  # system pool restarts containerd and the kubelet (same docs, private-nodes/manage.mdx):
  # - the boothook keeps a copy of itself as the installer (/etc/gpu-platform/conceal-metadata)
  #   and writes a systemd drop-in for the kubelet (the join installs
  #   /etc/systemd/system/kubelet.service: join.mdx) before any rule. Its ExecStartPre runs that
  #   same idempotent installer ("gate"): before every start of the kubelet, at this boot or any
  #   later one, after a reset or an upgrade, missing rules are put back, and the kubelet does not
  #   start only if they cannot be (no iptables, an error, the installer gone). It also orders the
  #   kubelet after cloud-init's network stage, where boothooks run (that stage is ordered before
  #   sysinit.target on Debian and Ubuntu anyway: cloud-init 24.4 systemd/cloud-init-network.service.tmpl,
  #   cloud-init.service before 24.3);
  # - and, when a rule cannot be installed at boot, the VM powers off at once: if a reset removed
  #   the drop-in, the kubelet would start unchecked. A powered-off VM never joins; the platform's
  #   claim fails and costs no GPU time.
  node_metadata    = trimspace(try(nonsensitive(var.vcluster.properties["gpu-platform/node-metadata"]), ""))
  conceal_metadata = local.node_metadata != "exposed"
  # Every rule, checked once more after installing (the installer also reads this).
  metadata_rules_present = join(" && ", [
    "iptables -w -t raw -C PREROUTING -d 169.254.169.254/32 -j GPU-PLATFORM-METADATA",
    "iptables -w -t raw -C GPU-PLATFORM-METADATA -j DROP",
    "iptables -w -t mangle -C FORWARD -d 169.254.169.254/32 -j GPU-PLATFORM-METADATA",
    "iptables -w -t mangle -C GPU-PLATFORM-METADATA -j DROP",
  ])
  # Content-Type text/cloud-boothook names the part's kind, so the script needs no
  # "#cloud-boothook" line of its own. cloud-init runs it as a file, so "$0" is the script itself.
  # A chain whose three rules are all there is left as it is: the gate runs while pods do, and
  # rebuilding an intact chain would leave it empty for a moment.
  conceal_script = <<-EOT
    #!/bin/sh
    # gpu-platform: pods cannot reach the metadata server (templates/node/main.tf). Runs at every
    # boot ("boot": installs itself as the kubelet's gate, then the rules) and before every start
    # of the kubelet ("gate": the rules only). Idempotent. Fails closed: at boot a node whose rules
    # cannot be installed powers off before it joins; at the gate the kubelet does not start.
    mode=boot
    [ "$1" = gate ] && mode=gate
    dropin_dir=/etc/systemd/system/kubelet.service.d
    installer_dir=/etc/gpu-platform
    fail() {
      if [ "$mode" = gate ]; then
        echo "gpu-platform: metadata concealment failed ($1); the kubelet does not start until it is installed" >&2
        exit 1
      fi
      echo "gpu-platform: metadata concealment failed ($1); powering off so that this node never joins" >&2
      systemctl --no-block poweroff || poweroff -f
      exit 1
    }
    if [ "$mode" = boot ]; then
      mkdir -p "$dropin_dir" "$installer_dir" || fail "kubelet drop-in directory"
      cp "$0" "$installer_dir/conceal-metadata" || fail "installer"
      printf '%s\n' '[Unit]' 'After=cloud-init.service cloud-init-network.service' '[Service]' \
        "ExecStartPre=/bin/sh $installer_dir/conceal-metadata gate" \
        >"$dropin_dir/50-gpu-platform-metadata.conf" || fail "kubelet drop-in"
    fi
    for table in raw mangle; do
      iptables -w -t "$table" -C GPU-PLATFORM-METADATA -p udp --dport 53 -j RETURN 2>/dev/null &&
        iptables -w -t "$table" -C GPU-PLATFORM-METADATA -p tcp --dport 53 -j RETURN 2>/dev/null &&
        iptables -w -t "$table" -C GPU-PLATFORM-METADATA -j DROP 2>/dev/null && continue
      iptables -w -t "$table" -N GPU-PLATFORM-METADATA 2>/dev/null || iptables -w -t "$table" -F GPU-PLATFORM-METADATA || fail "chain in $table"
      iptables -w -t "$table" -A GPU-PLATFORM-METADATA -p udp --dport 53 -j RETURN || fail "DNS rule in $table"
      iptables -w -t "$table" -A GPU-PLATFORM-METADATA -p tcp --dport 53 -j RETURN || fail "DNS rule in $table"
      iptables -w -t "$table" -A GPU-PLATFORM-METADATA -j DROP || fail "drop rule in $table"
    done
    iptables -w -t raw -C PREROUTING -d 169.254.169.254/32 -j GPU-PLATFORM-METADATA 2>/dev/null ||
      iptables -w -t raw -I PREROUTING 1 -d 169.254.169.254/32 -j GPU-PLATFORM-METADATA || fail "raw PREROUTING"
    iptables -w -t mangle -C FORWARD -d 169.254.169.254/32 -j GPU-PLATFORM-METADATA 2>/dev/null ||
      iptables -w -t mangle -I FORWARD 1 -d 169.254.169.254/32 -j GPU-PLATFORM-METADATA || fail "mangle FORWARD"
    ${local.metadata_rules_present} || fail "a rule is missing after installing"
  EOT

  # NVIDIA Fabric Manager where the VM sees NVSwitches, and only there. The machine types that
  # carry a full HGX board (8 or 16 A100, H100, H200 or B200 GPUs joined by NVSwitches; marked
  # `nvswitch` in config/catalog.yaml, the same list as below: tests/test_node_template.py) need
  # Fabric Manager *somewhere*, but whether the guest must run it depends on how the hypervisor
  # passes the board through: with the whole board (switches included) the guest runs it; in
  # NVIDIA's shared-NVSwitch model the host manages the fabric, the guest sees no switch, and Fabric
  # Manager started in it fails with NV_WARN_NOTHING_TO_DO (NVIDIA/gpu-operator issue 610). Google
  # documents neither for its series, and its own driver installers install no Fabric Manager on any
  # machine type (GoogleCloudPlatform/compute-gpu-installation tag cuda-installer-v1.9.1;
  # GoogleCloudPlatform/container-engine-accelerators at 992db81, the GKE installer, while GKE runs
  # these shapes): docs/gpu-nodes.md, "Fabric Manager". So the node decides by what it sees, as
  # NVIDIA's own driver container does (NVIDIA/gpu-driver-container ubuntu24.04/nvidia-driver at
  # 06a208c, since tag 22.06.17: Fabric Manager only when /proc/driver/nvidia-nvswitch/devices is
  # not empty, or an InfiniBand device's VPD names an NVLink5 switch port, SW_MNG). The boothook
  # installs a gate that runs before every start of the kubelet, once the driver is loaded
  # (nvidia-smi loads it): without a visible switch it does nothing; with NVSwitches it starts Fabric
  # Manager and lets the kubelet start only once it is active; with NVLink5 ports (A4) it follows
  # NVIDIA's sequence for them (the InfiniBand modules, then Fabric Manager with NVLSM through its
  # start script); a node that sees switches but whose image has no Fabric Manager powers off (CUDA
  # cannot work there: no guess), so its claim fails and the VM stops billing. Every wait is bounded.
  # It writes what it saw to the serial console, since the VPD files are root's alone and no pod can
  # read them; `make acceptance` records that line (docs/acceptance.md).
  nvswitch_machine_types = ["a2-highgpu-8g", "a2-megagpu-16g", "a2-ultragpu-8g", "a3-highgpu-8g", "a3-ultragpu-8g", "a4-highgpu-8g"]
  fabric_manager         = local.gpu && contains(local.nvswitch_machine_types, local.instance_type)
  fabric_manager_script  = <<-EOT
    #!/bin/sh
    # gpu-platform: NVIDIA Fabric Manager before the kubelet where this VM sees NVSwitches
    # (templates/node/main.tf). Runs at every boot ("boot": installs itself as the kubelet's gate)
    # and before every start of the kubelet ("gate": decides by the switches the guest sees). Every
    # wait is bounded; the drop-in gives the kubelet's start the time they take together.
    mode=boot
    [ "$1" = gate ] && mode=gate
    dropin_dir=/etc/systemd/system/kubelet.service.d
    installer_dir=/etc/gpu-platform
    nvswitch_dir=/proc/driver/nvidia-nvswitch/devices
    infiniband_dir=/sys/class/infiniband
    modules_file=/proc/modules
    console=/dev/console
    fm_start_script=/usr/bin/nvidia-fabricmanager-start.sh
    module_wait_seconds=120
    start_seconds=120
    say() {
      echo "gpu-platform fabric-manager: $*"
      echo "gpu-platform fabric-manager: $*" >>"$console" 2>/dev/null || :
    }
    if [ "$mode" = boot ]; then
      mkdir -p "$dropin_dir" "$installer_dir" && cp "$0" "$installer_dir/fabric-manager" &&
        printf '%s\n' '[Service]' "TimeoutStartSec=$((module_wait_seconds + 2 * start_seconds + 60))" \
          "ExecStartPre=/bin/sh $installer_dir/fabric-manager gate" >"$dropin_dir/40-gpu-platform-fabric-manager.conf" ||
        echo "gpu-platform fabric-manager: could not install the gate; the kubelet starts without it" >&2
      exit 0
    fi
    nvidia-smi -L >/dev/null 2>&1 # loads the driver, which lists the switches it finds
    nvswitches=$(ls -A "$nvswitch_dir" 2>/dev/null | wc -l)
    nvlink5=0
    for vpd in "$infiniband_dir"/*/device/vpd; do
      [ -f "$vpd" ] && grep -q SW_MNG "$vpd" && nvlink5=$((nvlink5 + 1))
    done
    # What the guest saw, on the serial console too (the kernel's console): the VPD files are root's
    # alone, so no pod can see the NVLink5 ports; the acceptance run reads this line.
    say "seen nvswitch-devices=$nvswitches nvlink5-switch-ports=$nvlink5"
    if [ "$nvswitches" -eq 0 ] && [ "$nvlink5" -eq 0 ]; then
      say "no NVSwitch visible to this VM (the host manages the fabric); not needed"
      exit 0
    fi
    loaded() { grep -q "^$1 " "$modules_file"; }
    power_off() {
      say "$1; powering off so that this node never joins" >&2
      systemctl --no-block poweroff || poweroff -f
      exit 1
    }
    if [ "$nvlink5" -gt 0 ]; then
      # NVLink5 (A4, B200): NVIDIA's sequence (NVIDIA/gpu-driver-container ubuntu24.04/nvidia-driver
      # at 06a208c, `_ensure_nvlink5_prerequisites` and `_start_daemons`): wait for the mlx5_core and
      # ib_umad modules, then start Fabric Manager with NVLSM through its start script. NVIDIA waits
      # without end; this waits module_wait_seconds, then keeps the kubelet from starting.
      say "NVLink5 switch ports visible; Fabric Manager with NVLSM must run"
      [ -x "$fm_start_script" ] || power_off "the image has no $fm_start_script (Fabric Manager with NVLSM)"
      waited=0
      until loaded mlx5_core && loaded ib_umad; do
        if [ "$waited" -ge "$module_wait_seconds" ]; then
          say "mlx5_core and ib_umad not loaded after $module_wait_seconds s; the kubelet does not start" >&2
          exit 1
        fi
        sleep 5
        waited=$((waited + 5))
      done
      if ! timeout "$start_seconds" "$fm_start_script" --mode start \
        --fm-config-file /usr/share/nvidia/nvswitch/fabricmanager.cfg --fm-pid-file /var/run/nvidia-fabricmanager/nv-fabricmanager.pid \
        --nvlsm-config-file /usr/share/nvidia/nvlsm/nvlsm.conf --nvlsm-pid-file /var/run/nvidia-fabricmanager/nvlsm.pid; then
        say "Fabric Manager with NVLSM did not start within $start_seconds s; the kubelet does not start" >&2
        exit 1
      fi
      say "active"
      exit 0
    fi
    say "$nvswitches NVSwitch device(s) visible; Fabric Manager must run"
    timeout "$start_seconds" systemctl cat nvidia-fabricmanager.service >/dev/null 2>&1 ||
      power_off "the image has no nvidia-fabricmanager.service"
    if ! timeout "$start_seconds" systemctl start nvidia-fabricmanager.service || ! timeout "$start_seconds" systemctl is-active --quiet nvidia-fabricmanager.service; then
      say "nvidia-fabricmanager.service is not active; the kubelet does not start" >&2
      exit 1
    fi
    say "active"
  EOT

  # Our boothooks, in order, ahead of the platform's user data.
  boothooks = concat(
    local.conceal_metadata ? [{ name = "gpu-platform-conceal-metadata", script = local.conceal_script }] : [],
    local.fabric_manager ? [{ name = "gpu-platform-fabric-manager", script = local.fabric_manager_script }] : [],
    local.prefetch ? [{ name = "gpu-platform-image-prefetch", script = local.prefetch_script }] : [],
  )
  # The platform's user data (cloud-init that joins the node) goes on unchanged, as the last part
  # of a MIME multipart document after our boothooks. cloud-init runs boothooks at every boot
  # in its init stage, before network-online.target and so before the kubelet the join installs,
  # and types a text/plain part by its first line (#cloud-config, #!, …: canonical/cloud-init
  # tag 24.4, cloudinit/user_data.py, TYPE_NEEDED). Platform data that is MIME already keeps its
  # own headers (they become the part's headers). cloud-init takes data for MIME when
  # "mime-version:" (any case) occurs in its first 4096 bytes (same file, `convert_string`); we
  # take it for MIME when it starts with a MIME header, MIME-Version or Content-Type, any case.
  # Data that mentions the header only further down does not start with headers: cloud-init, left
  # to parse it alone, would find no headers, read it all as a text/plain body and type it by its
  # first line, exactly what wrapping it as text/plain does. The boundary is derived from the
  # data, so it cannot occur in it (and has at most 70 characters, RFC 2046).
  mime_boundary    = "gpu-platform-${substr(sha256(local.platform_user_data), 0, 40)}"
  platform_is_mime = can(regex("^(?i)(mime-version|content-type):", local.platform_user_data))
  platform_part = local.platform_is_mime ? local.platform_user_data : join("\n", [
    "Content-Type: text/plain; charset=\"utf-8\"",
    "Content-Disposition: attachment; filename=\"vcluster-platform\"",
    "",
    local.platform_user_data,
  ])
  # Our boothooks (local.boothooks, each only where it applies), then the platform's part. The
  # MIME document is written whenever there is a boothook.
  boothook_user_data = join("\n", concat(
    [
      "Content-Type: multipart/mixed; boundary=\"${local.mime_boundary}\"",
      "MIME-Version: 1.0",
      "",
    ],
    flatten([for hook in local.boothooks : [
      "--${local.mime_boundary}",
      "Content-Type: text/cloud-boothook; charset=\"us-ascii\"",
      "Content-Disposition: attachment; filename=\"${hook.name}\"",
      "",
      trimsuffix(hook.script, "\n"),
    ]]),
    local.has_user_data ? ["--${local.mime_boundary}", local.platform_part] : [],
    ["--${local.mime_boundary}--", ""],
  ))

  # Image prefetch (annotation gpu-platform/gpu-operator-images of the tenant's instance: JSON, GPU
  # type → images, which Pulumi derives from the tenant's GPU Operator settings in
  # config/gpu_operator.py; components/tenant_vcluster.py says why an annotation). On a GPU node
  # whose type has images there, a second boothook installs a path unit that starts, as soon as
  # containerd's socket exists (the join installs and starts containerd before `kubeadm join`:
  # vcluster-docs vcluster/deploy/worker-nodes/private-nodes/join.mdx), a service pulling every
  # image at once, so each operand finds its image when the operator schedules it instead of the
  # kubelet pulling them one after another (serially by default, and only once each init
  # container before them is done). Not the vcluster's `privateNodes.joinNode.postJoinCommands`:
  # loft-sh/vcluster at tag v0.36.1 defines it (config/config.go `JoinConfiguration`, "executed
  # after kubeadm join") but the join script that runs it is served by the platform and is not
  # public, so neither when it runs nor whether a failing command fails the join can be read.
  # What waits for it: cloud-init runs each boothook to its end before it goes on to the
  # platform's part (canonical/cloud-init tag 24.4, cloudinit/handlers/boot_hook.py `handle_part`),
  # so the join waits for this one, which only writes three files and makes two systemctl calls,
  # each stopped after `systemctl_seconds`. The start is `--no-block`, and must be: a path unit is
  # ordered after sysinit.target (systemd.path(5), "Default Dependencies"), which waits for the
  # cloud-init stage running the boothook. Nothing waits for the units: they have no [Install]
  # section and no Before=, and nothing else the template writes names them. The pulls run beside
  # the join, each bounded by `timeout` and the service by TimeoutStartSec, sharing the VM's network
  # and disk with it while they last. The script exits 0 whatever happens. Each image must be a
  # fully qualified reference (registry host, path, tag or digest: what `ctr` needs), so nothing
  # else reaches the script.
  prefetch_images = [
    for image in try(jsondecode(nonsensitive(var.vcluster.instance.metadata.annotations["gpu-platform/gpu-operator-images"]))[local.accelerator], []) :
    image if can(regex("^[a-z0-9][a-z0-9.-]*\\.[a-z0-9.-]+(:[0-9]+)?/[a-z0-9._/-]+(:[A-Za-z0-9._-]+)?(@sha256:[a-f0-9]{64})?$", image))
  ]
  prefetch        = local.gpu && length(local.prefetch_images) > 0
  prefetch_script = <<-EOT
    #!/bin/sh
    # gpu-platform: pull the GPU Operator's images as soon as containerd runs (templates/node/main.tf).
    # Runs at every boot: installs the units, starts the path unit without waiting for it, each
    # systemctl call bounded, and exits 0 whatever happens.
    unit_dir=/etc/systemd/system
    lib_dir=/usr/local/lib/gpu-platform
    systemctl_seconds=30
    pull_script="$lib_dir/prefetch-images"
    skip() {
      echo "gpu-platform: image prefetch not installed ($1); the kubelet pulls the images itself" >&2
      exit 0
    }
    mkdir -p "$unit_dir" "$lib_dir" || skip "directories"
    cat >"$pull_script" <<'PULL' || skip "pull script"
    #!/bin/sh
    # Every image at once, each bounded; logs each; exits 0 whatever happens. A failed pull is
    # tried again, up to `attempts` times within the image's `limit`: a containerd restart by the
    # join (whose script is not public) would fail the pulls in flight, and this service runs once
    # per boot.
    images='${join(" ", local.prefetch_images)}'
    socket=/run/containerd/containerd.sock
    limit=600
    attempts=3
    retry_seconds=10
    if command -v crictl >/dev/null 2>&1; then
      pull="crictl --runtime-endpoint unix://$socket pull"
    elif command -v ctr >/dev/null 2>&1; then
      pull="ctr --address $socket --namespace k8s.io images pull"
    else
      echo "gpu-platform prefetch: neither crictl nor ctr found; the kubelet pulls the images itself"
      exit 0
    fi
    echo "gpu-platform prefetch: pulling $images"
    for image in $images; do
      (
        start=$(date +%s)
        left=$limit
        tried=0
        while :; do
          tried=$((tried + 1))
          timeout "$left" $pull "$image" >/dev/null 2>&1
          status=$?
          if [ "$status" -eq 0 ] || [ "$tried" -ge "$attempts" ]; then
            break
          fi
          # Another attempt only with time left after the wait (`timeout 0` would not stop it at all).
          left=$((limit - ($(date +%s) - start) - retry_seconds))
          if [ "$left" -le 0 ]; then
            break
          fi
          echo "gpu-platform prefetch: $image attempt $tried failed (status $status), again in $retry_seconds s"
          sleep "$retry_seconds"
        done
        if [ "$status" -eq 0 ]; then
          echo "gpu-platform prefetch: pulled $image in $(($(date +%s) - start)) s (attempt $tried)"
        else
          echo "gpu-platform prefetch: $image not pulled (status $status after $(($(date +%s) - start)) s, $tried of $attempts attempts, limit $limit s)"
        fi
      ) &
    done
    wait
    echo "gpu-platform prefetch: done"
    exit 0
    PULL
    chmod 0755 "$pull_script" || skip "pull script mode"
    printf '%s\n' '[Unit]' 'Description=gpu-platform: pull the GPU Operator images once containerd runs' \
      '[Path]' 'PathExists=/run/containerd/containerd.sock' 'Unit=gpu-platform-image-prefetch.service' \
      >"$unit_dir/gpu-platform-image-prefetch.path" || skip "path unit"
    printf '%s\n' '[Unit]' 'Description=gpu-platform: pull the GPU Operator images in parallel' 'After=containerd.service' \
      '[Service]' 'Type=oneshot' 'RemainAfterExit=yes' "ExecStart=$pull_script" 'TimeoutStartSec=660' \
      'StandardOutput=journal+console' >"$unit_dir/gpu-platform-image-prefetch.service" || skip "service unit"
    timeout "$systemctl_seconds" systemctl daemon-reload || skip "systemctl daemon-reload"
    timeout "$systemctl_seconds" systemctl --no-block start gpu-platform-image-prefetch.path || skip "systemctl start"
  EOT

  metadata = merge(
    {
      block-project-ssh-keys = "TRUE" # no project-wide SSH keys on tenant nodes
      enable-oslogin         = "TRUE" # SSH (through IAP, if the tenant allows it) only with IAM
    },
    # The Deep Learning VM image already has the NVIDIA driver; don't let it offer an install.
    local.gpu ? { install-nvidia-driver = "False" } : {},
    # Without boothooks (exposed, no NVSwitch, nothing to prefetch): the platform's user data as it is, and no
    # user-data key at all when the platform passes none (as upstream does since v0.1.1).
    length(local.boothooks) > 0 ? { user-data = local.boothook_user_data } : {},
    length(local.boothooks) == 0 && local.has_user_data ? { user-data = var.vcluster.userData } : {},
  )

  # Concrete values only: not empty, no glob characters (the platform allows "*" in properties).
  wildcard         = "[*?\\[\\]{}]"
  project_concrete = local.project != "" && !can(regex(local.wildcard, local.project))
  region_concrete  = local.region != "" && !can(regex(local.wildcard, local.region))
  zone_concrete    = local.zone != "" && !can(regex(local.wildcard, local.zone))

  # Labels of the node type that would lie about where the VM runs: the auto-nodes scheduler
  # matches volumes' node affinity and zone spreading against them, and the cloud controller
  # manager writes the real zone and region over the standard ones once the node runs.
  zone_labels_elsewhere = [
    for key in ["topology.kubernetes.io/zone", "topology.gke.io/zone"] : "${key}=${local.node_type[key]}"
    if local.node_type[key] != "" && local.node_type[key] != local.zone
  ]
  region_label_elsewhere = !contains(["", local.region], local.node_type["topology.kubernetes.io/region"])
}

resource "google_compute_instance" "node" {
  project      = local.project
  zone         = local.zone
  name         = local.instance_name
  machine_type = local.instance_type
  description  = "Node ${local.claim_name} of vCluster ${local.vcluster_namespace}/${local.vcluster_name} (node type ${local.node_type_name})"

  # The tenant's cloud controller manager runs with node-tags = <vCluster name> (firewall rules
  # for LoadBalancer services target it).
  tags   = [local.vcluster_name]
  labels = local.labels

  boot_disk {
    auto_delete = true
    initialize_params {
      image  = local.image
      size   = local.disk_size_gb
      type   = local.disk_type
      labels = local.labels
    }
  }

  # Only N1 takes guest accelerators; on A2/A3/G2/G4 the GPUs come with the machine type.
  dynamic "guest_accelerator" {
    for_each = local.guest_attach ? [local.accelerator] : []
    content {
      type  = guest_accelerator.value
      count = local.accelerator_count
    }
  }

  scheduling {
    # GPU VMs cannot live-migrate, and Spot VMs must terminate: both stop on host maintenance.
    on_host_maintenance = local.gpu || local.spot ? "TERMINATE" : "MIGRATE"
    automatic_restart   = local.provisioning_model == "STANDARD"
    provisioning_model  = local.provisioning_model
    preemptible         = local.spot
    # A preempted Spot VM, a Flex-start VM at the end of its run and a reservation-bound VM at the
    # end of its reservation are deleted rather than left stopped (and billed for their disks); the
    # platform replaces the node.
    instance_termination_action = local.provisioning_model == "STANDARD" ? null : "DELETE"

    dynamic "max_run_duration" {
      for_each = local.flex_start ? [local.max_run_seconds] : []
      content {
        seconds = max_run_duration.value
      }
    }
  }

  reservation_affinity {
    type = local.reserved ? "SPECIFIC_RESERVATION" : "NO_RESERVATION"
    dynamic "specific_reservation" {
      for_each = local.reserved ? [local.reservation_target] : []
      content {
        key    = "compute.googleapis.com/reservation-name"
        values = [specific_reservation.value]
      }
    }
  }

  network_interface {
    subnetwork         = local.subnet_name
    subnetwork_project = local.project
    # A3 and A4 machine types only support gVNIC.
    nic_type = contains(["a3", "a4"], local.machine_series) ? "GVNIC" : null
    # No access_config: no external IP. The tenant network has Cloud NAT for egress.
  }

  service_account {
    email  = local.service_account_email
    scopes = ["cloud-platform"]
  }

  shielded_instance_config {
    # Secure Boot only on CPU nodes (Ubuntu): the NVIDIA kernel modules in the Deep Learning VM
    # image are not signed for Secure Boot and would not load.
    enable_secure_boot          = !local.gpu
    enable_vtpm                 = true
    enable_integrity_monitoring = true
  }

  metadata = local.metadata

  # How long the provider waits for the insert operation. Its default, 20 minutes
  # (terraform-provider-google v7.45.0, google/services/compute/resource_compute_instance.go
  # `Timeouts`), is shorter than Compute Engine may keep a Flex-start request waiting for capacity:
  # a request is held for at most 2 hours (requestValidForDuration, which this provider version does
  # not expose, so Compute Engine's own default applies; "capacity requests … persist in a queue for
  # up to two hours", Google Cloud blog "Introducing Flex-start VMs", 2025-09-25). When the wait runs
  # out first, the provider clears the resource's ID while the operation goes on, and a VM that
  # arrives later is in no state: nothing deletes it, and it runs (billed) up to its max run duration.
  # 130 minutes outlasts the queue and the create itself, so the provider sees how the operation ends.
  # One value for every capacity type (a timeouts block takes no expressions): the others fail or
  # succeed within minutes. Whether the platform lets a node claim's apply run that long is not public:
  # docs/gpu-nodes.md "Flex-start" says what remains, and the FLEX_START acceptance run looks for it.
  timeouts {
    create = "130m"
  }

  lifecycle {
    precondition {
      condition     = local.project_concrete
      error_message = "Property project must be a concrete GCP project id, not empty or a wildcard (got \"${local.project}\"). Pulumi sets it on each tenant's auto-nodes entry (TenantVCluster)."
    }
    precondition {
      condition     = local.region_concrete
      error_message = "Property region must be a concrete GCP region, not empty or a wildcard (got \"${local.region}\"). Pulumi sets it on each tenant's auto-nodes entry (TenantVCluster)."
    }
    precondition {
      condition     = local.zone_concrete
      error_message = "No concrete zone for node type ${local.node_type_name}: property gpu-platform/zone is empty and the vCluster property zone is empty or a wildcard (got \"${local.zone}\")."
    }
    precondition {
      condition     = !(local.zone_concrete && local.region_concrete) || startswith(local.zone, "${local.region}-")
      error_message = "Zone ${local.zone} of node type ${local.node_type_name} is not in region ${local.region}."
    }
    precondition {
      condition     = !local.zone_concrete || length(local.zone_labels_elsewhere) == 0
      error_message = "Node type ${local.node_type_name} is labelled ${join(", ", local.zone_labels_elsewhere)} but creates its VMs in zone ${local.zone}; the zone labels must name the VM's zone."
    }
    precondition {
      condition     = !local.region_concrete || !local.region_label_elsewhere
      error_message = "Node type ${local.node_type_name} is labelled topology.kubernetes.io/region=${local.node_type["topology.kubernetes.io/region"]} but creates its VMs in region ${local.region}."
    }
    precondition {
      condition     = length(local.missing_node_type_properties) == 0
      error_message = "Node type ${local.node_type_name} lacks the properties ${join(", ", local.missing_node_type_properties)}; GcpNodeProvider writes them on every node type."
    }
    precondition {
      condition     = contains(["on-demand", "spot", "flex-start", "reservation"], local.capacity_type)
      error_message = "Property gpu-platform/capacity-type of node type ${local.node_type_name} must be on-demand, spot, flex-start or reservation (got \"${local.capacity_type}\")."
    }
    precondition {
      condition     = local.capacity_rank >= 0 && floor(local.capacity_rank) == local.capacity_rank
      error_message = "Property gpu-platform/capacity-rank of node type ${local.node_type_name} must be a whole number (got \"${local.node_type["gpu-platform/capacity-rank"]}\")."
    }
    precondition {
      condition     = !local.flex_start || (local.max_run_seconds >= 600 && local.max_run_seconds <= 604800 && floor(local.max_run_seconds) == local.max_run_seconds)
      error_message = "Node type ${local.node_type_name} is flex-start, so property gpu-platform/max-run-duration must be whole seconds from 600 to 604800 (7 days) (got \"${local.optional_properties["gpu-platform/max-run-duration"]}\")."
    }
    precondition {
      condition     = !(local.flex_start && contains(local.guest_series, local.machine_series))
      error_message = "Node type ${local.node_type_name} is flex-start on ${local.instance_type}; Compute Engine sells Flex-start for accelerator-optimized machine types only, not N1 (property gpu-platform/capacity-type: on-demand, spot or reservation)."
    }
    precondition {
      condition     = !local.reserved || (local.reservation_name != "" && local.reservation_tenant != "" && contains(["true", "false"], local.optional_properties["gpu-platform/reservation-bound"]))
      error_message = "Node type ${local.node_type_name} is a reservation but lacks gpu-platform/reservation, gpu-platform/reservation-tenant or gpu-platform/reservation-bound (true or false); GcpNodeProvider writes them on every reserved type."
    }
    precondition {
      condition     = !local.reserved || local.reservation_tenant == local.tenant
      error_message = "Node type ${local.node_type_name} is tenant ${local.reservation_tenant}'s slice of reservation ${local.reservation_name}; tenant ${local.tenant} may not consume it (property gpu-platform/reservation-tenant)."
    }
    precondition {
      condition     = local.accelerator_count >= 0 && floor(local.accelerator_count) == local.accelerator_count
      error_message = "Property gpu-platform/accelerator-count of node type ${local.node_type_name} must be a whole number (got \"${local.node_type["gpu-platform/accelerator-count"]}\")."
    }
    precondition {
      condition     = !(local.gpu && local.accelerator_count == 0)
      error_message = "Node type ${local.node_type_name} has accelerator ${local.accelerator} but accelerator-count \"${local.node_type["gpu-platform/accelerator-count"]}\": a GPU type needs a count of at least 1."
    }
    precondition {
      condition     = !(local.accelerator == "none" && local.accelerator_count > 0)
      error_message = "Node type ${local.node_type_name} has accelerator-count ${local.node_type["gpu-platform/accelerator-count"]} but accelerator none: set the GPU type or a count of 0."
    }
    precondition {
      condition     = local.gpu_known
      error_message = "GPU type ${local.accelerator} is not in this template's GPU table (gpu_series); add it there and to config/catalog.yaml."
    }
    precondition {
      condition     = !local.gpu_known || local.gpu_fits
      error_message = "GPU type ${local.accelerator} does not fit machine series ${local.machine_series} (${local.instance_type}); it needs series ${join(" or ", lookup(local.gpu_series, local.accelerator, []))}."
    }
    precondition {
      condition     = local.gpu || !contains(local.builtin_series, local.machine_series)
      error_message = "Machine type ${local.instance_type} (series ${local.machine_series}) comes with built-in GPUs, but node type ${local.node_type_name} has accelerator none; set gpu-platform/accelerator to its GPU type."
    }
    precondition {
      condition     = local.disk_size_gb > 0 && floor(local.disk_size_gb) == local.disk_size_gb
      error_message = "Property gpu-platform/disk-size-gb of node type ${local.node_type_name} must be a positive whole number (got \"${local.node_type["gpu-platform/disk-size-gb"]}\")."
    }
    precondition {
      condition     = can(regex("^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$", local.vcluster_name))
      error_message = "vCluster name \"${local.vcluster_name}\" is not a valid GCP network tag ([a-z]([-a-z0-9]*[a-z0-9])?, at most 63 characters); the cloud controller manager uses it as the node tag."
    }
    precondition {
      condition     = local.claim_name != ""
      error_message = "The platform passed no node claim name (nodeClaim.metadata.name); the VM name is derived from it."
    }
    precondition {
      condition     = contains(["", "concealed", "exposed"], local.node_metadata)
      error_message = "Property gpu-platform/node-metadata must be concealed or exposed (got \"${local.node_metadata}\"); Pulumi writes it from the tenant's nodeMetadata."
    }
  }
}

# For debugging a claim: `tofu output` in its workspace, or the platform's NodeClaim status.
output "instance_name" {
  value = google_compute_instance.node.name
}

output "instance_self_link" {
  value = google_compute_instance.node.self_link
}

output "zone" {
  value = google_compute_instance.node.zone
}

output "internal_ip" {
  value = google_compute_instance.node.network_interface[0].network_ip
}
