"""The live checks, in the order a user would make them, against the deployed stack.

A check that later ones depend on raises CheckFailed when it fails (no GPU node: nothing to
inspect); every other check is recorded and the run goes on, so one report shows all it could see.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any, Callable

from components.vcluster_values import WARM_LABEL
from config.base import duration_seconds
from config.catalog import load_catalog

from . import drills, gce, kube, metadata, monitoring, phases, restore_drill, timings
from .kube import Finding
from .report import Report, Step
from .settings import RunNames, Settings
from .shell import CommandError, Gcloud, Kubectl, TenantAccess
from .waiting import CheckFailed, Clock, wait_for

POLL_SECONDS = 10
GCLOUD_POLL_SECONDS = 15
PLATFORM_TIMEOUT = 600
TENANT_TIMEOUT = 1800
READY_TIMEOUT = 600  # node registered → Ready, and Ready → initialized
GPU_TIMEOUT = 900  # Ready → nvidia.com/gpu allocatable (GPU Operator: toolkit, device plugin)
PROBE_TIMEOUT = 300  # the metadata probe pods: image pull and two requests
JOB_RUN_TIMEOUT = 600  # GPU offered → the Job's pod pulled its image and ran nvidia-smi


@dataclass
class Live:
    names: RunNames
    settings: Settings
    host: Kubectl
    gcloud: Gcloud  # in the project of the tenant's VMs (the team's in project mode)
    report: Report
    workdir: Path
    gpu_machines: dict[str, bool]  # machine type → GPUs are guest accelerators
    say: Callable[[str], None] = print
    clock: Clock = field(default_factory=Clock)
    tenant_access: Callable[[Kubectl, str, str, Path], Any] = TenantAccess  # kubectl for the tenant
    host_gcloud: Callable[..., Any] | None = None  # gcloud in the host's project (the restore drill)
    google_get: Callable[[str], tuple[int, dict[str, Any]]] | None = None  # GET on a Google API: (status, body)

    def settle(self, check: str, observe: Callable[[], Finding], *, timeout: float, interval: float = POLL_SECONDS) -> Finding:
        """Poll until `observe` reports ok; record the outcome. Raises CheckFailed when it never does."""
        last: list[Finding] = []

        def probe() -> Finding | None:
            last[:] = [observe()]
            return last[0] if last[0].ok else None

        try:
            seen = wait_for(check, probe, timeout=timeout, interval=interval, clock=self.clock)
        except CheckFailed as e:
            # What was last seen, if anything was; else why nothing could be (the command's error).
            detail = last[0].detail if last and str(e).startswith(f"{check}: not within") else str(e)
            self.report.add(Finding(check, False, f"{detail} (waited up to {timeout:.0f} s)"), self.say)
            raise CheckFailed(f"{check}: {detail}") from None
        return self.report.add(Finding(check, True, seen.detail), self.say)

    def settle_step(self, steps: list[Step], check: str, observe: Callable[[], Step], *, timeout: float, interval: float = POLL_SECONDS) -> Step:
        """`settle` for a step of the monitoring checks or the watchdog drill: its outcome is also
        one of `steps`, with when it happened by whose clock."""
        seen: list[Step] = []

        def probe() -> Finding:
            seen[:] = [observe()]
            return Finding("", seen[0].ok, seen[0].seen)

        try:
            self.settle(check, probe, timeout=timeout, interval=interval)
        except CheckFailed:
            steps.append(Step(check, False, self.report.findings[-1].detail, None, seen[0].recorded_by if seen else timings.POLLED))
            raise
        steps.append(replace(seen[0], name=check))
        return steps[-1]


def run_checks(live: Live, outputs: dict[str, Any]) -> None:
    names = live.names
    tenants = sorted((outputs.get("tenants") or {}).keys())
    live.report.add(Finding("the stack deployed exactly one tenant", tenants == [names.tenant], f"tenants {tenants}"), live.say)
    check_platform(live)
    namespace, release = check_tenant_instance(live)
    with live.tenant_access(live.host, namespace, release, live.workdir) as tenant:
        live.settle("tenant API reachable", lambda: Finding("", True, f"{len(kube.items(tenant.json('get', 'nodes')))} node(s)"), timeout=300)
        check_metadata_concealment(live, tenant)
        check_gpu_job(live, tenant)
        if live.settings.watchdog_drill:
            drills.check_watchdog_drill(live, tenant)
    if live.settings.restore_drill:
        check_restore(live, outputs["tenants"][names.tenant], namespace, release)


def check_restore(live: Live, tenant_outputs: dict[str, Any], namespace: str, release: str) -> None:
    """The optional restore drill (tests/acceptance/restore_drill.py), after the GPU checks."""
    names = restore_drill.DrillNames(
        project=live.names.project,
        region=live.names.region,
        backup_plan=tenant_outputs["backupPlan"],
        restore_plan=tenant_outputs["restorePlan"],
        run_id=live.names.run_id,
    )
    restore_drill.run_drill(live, names, live.host_gcloud, namespace, release)


def check_platform(live: Live) -> None:
    host = live.host
    live.settle(
        "platform API Available",
        lambda: kube.apiservice_available(host.json("get", "apiservice", kube.PLATFORM_API_SERVICE)),
        timeout=PLATFORM_TIMEOUT,
    )

    def provider() -> Finding:
        phase, message = kube.node_provider_phase(host.json("get", "nodeproviders.management.loft.sh", live.names.node_provider))
        if phase == kube.NODE_PROVIDER_FAILED:
            raise CheckFailed(f"phase Failed: {message}")
        return Finding("", phase == kube.NODE_PROVIDER_READY, f"phase {phase or '(none)'} {message}".strip())

    live.settle(f"NodeProvider {live.names.node_provider} ready", provider, timeout=PLATFORM_TIMEOUT)


def check_tenant_instance(live: Live) -> tuple[str, str]:
    found: dict[str, Any] = {}

    def instance() -> Finding:
        listed = live.host.json("get", "virtualclusterinstances.management.loft.sh", "--all-namespaces")
        item = kube.tenant_instance(listed, live.names.tenant)
        if item is None:
            return Finding("", False, f"no VirtualClusterInstance {live.names.tenant}")
        phase, message = kube.instance_phase(item)
        if phase == "Failed":
            raise CheckFailed(f"phase Failed: {message}")
        found["item"] = item
        return Finding("", phase == kube.INSTANCE_READY, f"{item['metadata']['namespace']}/{live.names.tenant} phase {phase or '(none)'} {message}".strip())

    live.settle(f"tenant {live.names.tenant} Ready", instance, timeout=TENANT_TIMEOUT)
    return kube.virtual_cluster_ref(found["item"])


def check_metadata_concealment(live: Live, tenant: TenantAccess) -> None:
    """On a node of the tenant (nodeMetadata: concealed, the default): an ordinary pod gets no
    answer from the metadata server, a hostNetwork pod does. Recorded; the run goes on either way."""
    node = metadata.probe_node(tenant.json("get", "nodes"))
    if node is None:
        live.report.add(Finding("metadata concealment checked on a node", False, "no Ready node in the tenant"), live.say)
        return
    live.say(f"probing the metadata server from node {node}")
    tenant.apply(metadata.documents(node, live.names.run_id))
    try:
        live.settle(f"metadata probes ran on node {node}", lambda: metadata.done(tenant.json("get", "pods", "-n", metadata.NAMESPACE)), timeout=PROBE_TIMEOUT)
    except CheckFailed:
        pass  # recorded; the findings below say what each probe did get to
    logs = {}
    for name in metadata.HOST_NETWORK:
        try:
            logs[name] = tenant.text("logs", name, "-n", metadata.NAMESPACE)
        except CommandError as e:
            logs[name] = f"(no logs: {e})"
    for finding in metadata.findings(tenant.json("get", "pods", "-n", metadata.NAMESPACE), logs):
        live.report.add(finding, live.say)
    try:
        tenant.text("delete", "namespace", metadata.NAMESPACE, "--wait=false")
    except CommandError as e:
        live.say(f"could not delete namespace {metadata.NAMESPACE} (the destroy removes it with the tenant): {e}")


@dataclass
class SmokeJob:
    """The program's smoke Job as the run applied it, and what the run learnt about it."""

    live: Live
    tenant: Any  # TenantAccess
    job: dict[str, Any]
    zone: str | None
    nodes_before: set[str]
    node: dict[str, Any] | None = None

    @property
    def name(self) -> str:
        return self.job["metadata"]["name"]

    @property
    def namespace(self) -> str:
        return self.job["metadata"]["namespace"]

    def pods(self) -> list[dict[str, Any]]:
        listed = kube.job_pods(self.tenant.json("get", "pods", "-n", self.namespace), self.name)
        if listed:
            self.live.report.mark("pod_created", kube.pod_times(listed[0])["pod_created"])
        return listed

    def refresh_node(self) -> dict[str, Any]:
        assert self.node is not None
        self.node = self.tenant.json("get", "node", self.node["metadata"]["name"])
        self.live.report.mark("node_registered", kube.node_times(self.node)["node_registered"])
        return self.node

    def state(self) -> dict[str, Any]:
        return self.tenant.json("get", "job", "-n", self.namespace, self.name)


def check_gpu_job(live: Live, tenant: TenantAccess) -> None:
    settings = live.settings
    zone, why = (await_warm_node(live, tenant), "the warm node's zone") if settings.warm_nodes else (None, "")
    if settings.stockout_drill:  # where the decoy's node type is (tests/acceptance/capacity_drill.py)
        zone, why = settings.decoy_zone, "the stockout drill's decoy reservation's zone"
    elif settings.reservation_found is not None:  # a reserved node type is in its reservation's zone only
        zone, why = settings.reservation_found.zone, f"reservation {settings.reservation}'s zone"
    stockout = drills.StockoutDrill(live, tenant) if settings.stockout_drill else None
    smoke = apply_smoke_job(live, tenant, zone=zone, why=why)
    applied = live.clock.now()
    try:
        await_gpu_node(live, smoke, observe=stockout.observe if stockout else None)
        drills.check_claims_visible(live, tenant, smoke.node)
        vm = inspect_gpu_node(live, smoke)
        if settings.flex_start or settings.reservation:
            drills.check_capacity_vm(live, vm)
        node = smoke.node["metadata"]["name"]
        hold = NodeHold(live, tenant, node) if live.names.monitoring else None
        try:
            deadline = float(smoke.job["spec"].get("activeDeadlineSeconds", 1800)) - (live.clock.now() - applied).total_seconds() + 60
            job_ended = await_job(live, smoke, timeout=max(deadline, 60))
            record_node_phases(live, smoke)
            if hold is not None:
                check_monitoring(live, tenant, node)
            else:
                live.report.notes.append("the tenant's monitoring is off: the collector, the DCGM exporter and the metrics are not checked")
        finally:
            released = hold.release() if hold is not None else None
        live.report.mark("last_pod_gone", max(filter(None, (job_ended, released)), default=None))
    except CheckFailed:
        if stockout is not None:  # what the drill saw, also when the Job got no node
            stockout.finish(smoke.node)
        raise
    if stockout is not None:
        stockout.finish(smoke.node)
    if live.report.warm_node:
        live.report.notes.append("the Job ran on a warm node, which stays running by design: its idle deletion is not checked")
    elif vm is not None:
        drills.check_idle_deletion(live, tenant, smoke.node["metadata"]["name"], vm)
    if live.settings.flex_start:
        drills.check_flex_start_leftovers(live, tenant)


def await_warm_node(live: Live, tenant: TenantAccess) -> str | None:
    """With warm nodes (WARM_NODES): one is Ready and offers its GPUs before the Job exists, so the
    Job measures a pod's wait on a warm node. Returns its zone, where the Job is pinned (the warm
    nodes may hold all of the pool's GPUs: a Job pinned elsewhere would never run)."""
    found: dict[str, Any] = {}

    def ready() -> Finding:
        warm = [n for n in kube.items(tenant.json("get", "nodes")) if phases.is_warm(n, WARM_LABEL)]
        for node in warm:
            offered = kube.allocatable_gpus(node)
            if _ready(node).ok and offered >= live.names.gpus_per_node:
                found["zone"] = kube.node_zone(node)
                return Finding("", True, f"node {node['metadata']['name']} in {found['zone']}, allocatable nvidia.com/gpu {offered}")
        return Finding("", False, f"{len(warm)} warm node(s), none Ready with its GPUs yet")

    timeout = live.settings.node_timeout_seconds + READY_TIMEOUT + GPU_TIMEOUT
    live.settle("a warm GPU node is Ready and offers its GPUs", ready, timeout=timeout)
    return found.get("zone")


def record_node_phases(live: Live, smoke: SmokeJob) -> None:
    """The GPU Operator's part of the node's chain, from its pods and the kubelet's image events:
    recorded, never a failed check (a missing part reads "not reached")."""
    if smoke.node is None:
        return
    report, name = live.report, smoke.node["metadata"]["name"]
    report.warm_node = phases.is_warm(smoke.node, WARM_LABEL)
    try:
        pods = smoke.tenant.json("get", "pods", "-n", phases.GPU_OPERATOR_NAMESPACE)
        events = smoke.tenant.json("get", "events", "-n", phases.GPU_OPERATOR_NAMESPACE)
    except CommandError as e:
        report.notes.append(f"the GPU Operator's phases were not read: {e}")
        return
    report.mark("operands_scheduled", phases.operands_scheduled(pods, name))
    report.mark("device_plugin_started", phases.device_plugin_started(pods, name))
    report.images = phases.image_pulls(events, {p["metadata"]["name"] for p in phases.pods_on(pods, name)})
    report.mark("images_ready", phases.images_ready(report.images))
    pulled = [image.image for image in report.images if not image.already_present]
    report.notes.append(
        f"GPU Operator images on node {name}: {len(report.images)}, "
        + (f"pulled by the kubelet: {', '.join(pulled)}" if pulled else "every one already present when its pod needed it (pulled ahead)")
    )


def smoke_job_deadline(node_timeout_seconds: int) -> int:
    """Every timed step between applying the Job and its end, added up: the Job outlives them."""
    return node_timeout_seconds + 2 * READY_TIMEOUT + GPU_TIMEOUT + JOB_RUN_TIMEOUT


def apply_smoke_job(live: Live, tenant: TenantAccess, *, zone: str | None = None, why: str = "") -> SmokeJob:
    """`zone`, `why`: where the Job must run and why; else the zone kube.pick_gpu_zone picks."""
    nodes = tenant.json("get", "nodes")
    if not zone:
        zone, why = kube.pick_gpu_zone(live.names.zones, nodes, tenant.json("get", "pods", "--all-namespaces"))
    live.report.notes.append(f"GPU Job pinned to zone {zone}: {why}" if zone else f"GPU Job not pinned to a zone: {why}")
    documents = kube.smoke_job_documents(zone, live.names.run_id, smoke_job_deadline(live.settings.node_timeout_seconds))
    smoke = SmokeJob(live, tenant, kube.smoke_job(documents), zone, kube.node_names(nodes))
    live.say(f"applying Job {smoke.namespace}/{smoke.name} in the tenant" + (f", pinned to {zone}" if zone else ""))
    tenant.apply(documents)
    return smoke


def await_gpu_node(live: Live, smoke: SmokeJob, observe: Callable[[], None] | None = None) -> None:
    """`observe`: called at every poll too (the stockout drill reads the claims while they last)."""

    def appeared() -> Finding:
        if observe is not None:
            observe()
        listed = smoke.pods()
        bound = (listed[-1].get("spec") or {}).get("nodeName") if listed else None
        smoke.node = kube.gpu_node(smoke.tenant.json("get", "nodes"), smoke.nodes_before, live.names.gpu, bound)
        if smoke.node is None:
            scheduled = kube.condition(listed[-1], "PodScheduled") if listed else None
            return Finding("", False, f"pod: {(scheduled or {}).get('message', 'not created yet')}")
        return Finding("", True, f"node {smoke.node['metadata']['name']}")

    live.settle("a GPU node appears for the Job", appeared, timeout=live.settings.node_timeout_seconds)


def inspect_gpu_node(live: Live, smoke: SmokeJob) -> dict[str, Any] | None:
    """Ready, initialized, GPU offered; then what the node and its VM look like, whether or not it
    got that far: the findings name what is missing. Returns the VM."""
    names, report = live.names, live.report
    try:
        live.settle("GPU node Ready", lambda: _ready(smoke.refresh_node()), timeout=READY_TIMEOUT)
        report.mark("node_ready", kube.node_times(smoke.node)["node_ready"])
        live.settle("GPU node initialized by the cloud controller manager", lambda: _initialized(smoke.refresh_node()), timeout=READY_TIMEOUT)
        report.mark("node_initialized", live.clock.now())
        live.settle("GPU offered to pods", lambda: _allocatable(smoke.refresh_node(), names.gpus_per_node), timeout=GPU_TIMEOUT)
        report.mark("gpu_allocatable", live.clock.now())
    finally:
        findings = kube.node_findings(smoke.node, project=names.vm_project, zones=names.zones, gpus=names.gpus_per_node, zone_wanted=smoke.zone)
        for finding in findings:
            report.add(finding, live.say)
        vm = check_vm(live, smoke.node)
    return vm


def await_job(live: Live, smoke: SmokeJob, *, timeout: float) -> datetime | None:
    """Returns when the Job's last pod on the node ended."""
    report = live.report
    try:
        live.settle("Job complete", lambda: _job_done(smoke.state()), timeout=timeout)
    finally:
        # The logs say why a Job failed as much as they prove one that passed.
        try:
            logs = smoke.tenant.text("logs", f"job/{smoke.name}", "-n", smoke.namespace)
        except CommandError as e:
            logs = f"(no logs: {e})"
        report.add(kube.nvidia_smi_finding(logs, live.names.gpu), live.say)
        if report.gpu_machine_nvswitch:
            for finding in kube.fabric_manager_findings(logs, serial_console(live, smoke.node)):
                report.add(finding, live.say)
    report.mark("job_done", kube.parse_time((smoke.state().get("status") or {}).get("completionTime")))
    node_name = smoke.node["metadata"]["name"]
    times = [kube.pod_times(p) for p in smoke.pods() if (p.get("spec") or {}).get("nodeName") == node_name]
    report.mark("pod_started", min((t["pod_started"] for t in times if t["pod_started"]), default=None))
    return max((t["pod_finished"] for t in times if t["pod_finished"]), default=None)


def serial_console(live: Live, node: dict[str, Any]) -> str:
    """The node's VM's serial port 1, where its Fabric Manager gate says what it saw as root
    (templates/node/main.tf `fabric_manager_script`); "" when it cannot be read (a note says why)."""
    try:
        _, zone, name = str((node.get("spec") or {}).get("providerID", "")).removeprefix("gce://").split("/")
        output = live.gcloud.json("compute", "instances", "get-serial-port-output", name, f"--zone={zone}", "--port=1")
    except (ValueError, CommandError) as e:
        live.report.notes.append(f"the GPU VM's serial console was not read: {e}")
        return ""
    return str((output or {}).get("contents") or "")


def _ready(node: dict[str, Any]) -> Finding:
    ready = kube.condition(node, "Ready") or {}
    return Finding("", ready.get("status") == "True", f"Ready {ready.get('status', 'unknown')}: {ready.get('message', '')}")


def _initialized(node: dict[str, Any]) -> Finding:
    spec = node.get("spec") or {}
    taints = [t.get("key") for t in spec.get("taints") or []]
    return Finding("", kube.is_initialized(node), f"providerID {spec.get('providerID') or '(none)'}, taints {taints}")


def _allocatable(node: dict[str, Any], gpus: int) -> Finding:
    offered = kube.allocatable_gpus(node)
    return Finding("", offered >= gpus, f"allocatable nvidia.com/gpu {offered}")


def _job_done(job: dict[str, Any]) -> Finding:
    state, detail = kube.job_state(job)
    if state == "failed":
        raise CheckFailed(f"the Job failed: {detail}")
    return Finding("", state == "complete", f"{state}: {detail}")


def tenant_vms(live: Live) -> list[dict[str, Any]]:
    return live.gcloud.json("compute", "instances", "list", f"--filter=labels.vcluster={live.names.tenant}") or []


def check_vm(live: Live, node: dict[str, Any]) -> dict[str, Any] | None:
    try:
        vm = gce.vm_for_node(tenant_vms(live), node)
    except CommandError as e:
        live.report.add(Finding("the node's VM exists in Compute Engine", False, f"could not list the tenant's VMs: {e}"), live.say)
        return None
    for finding in gce.vm_findings(vm, node, tenant=live.names.tenant, gpu=live.names.gpu, gpu_machines=live.gpu_machines):
        live.report.add(finding, live.say)
    if vm is not None:
        machine = gce.last_segment(vm.get("machineType"))
        live.report.gpu_machine_type = machine
        live.report.gpu_machine_nvswitch = bool(machine and (found := load_catalog().machines.get(machine)) and found.nvswitch)
        live.report.mark("vm_created", kube.parse_time(vm.get("creationTimestamp")))
        live.report.mark("vm_running", kube.parse_time(gce.vm_running_time(vm)))
        try:
            operations = live.gcloud.json("compute", "operations", "list", f"--filter={gce.insert_operation_filter(vm['name'])}")
            live.report.mark("vm_insert", kube.parse_time(gce.vm_insert_time(operations, vm["name"])))
        except CommandError as e:
            live.report.notes.append(f"the VM's insert operation was not read: {e}")
    return vm


# --- Monitoring -----------------------------------------------------------------------------------


class NodeHold:
    """A pod on the GPU node (tests/acceptance/monitoring.py hold_documents) from the moment it
    offers its GPU until the monitoring checks end, so that it is not idle, and deleted, first."""

    def __init__(self, live: Live, tenant: TenantAccess, node: str):
        self.live, self.tenant = live, tenant
        try:
            tenant.apply(monitoring.hold_documents(node, live.names.run_id))
            self.applied = True
        except CommandError as e:  # the checks still run, racing the node's idle deletion
            live.report.notes.append(f"the GPU node could not be held for the monitoring checks: {e}")
            self.applied = False

    def release(self) -> datetime | None:
        """Deletes the pod; returns when it went by the API server (its deletionTimestamp), or when
        the run saw it gone. None: there was none, or it could not be deleted (the destroy removes
        it with the tenant)."""
        if not self.applied:
            return None
        where = ("-n", monitoring.HOLD_NAMESPACE)
        try:
            self.tenant.text("delete", "pod", monitoring.HOLD_POD, *where, "--wait=false")
        except CommandError as e:
            self.live.report.notes.append(f"the GPU node's hold pod could not be deleted: {e}")
            return None
        try:
            released = monitoring.hold_released(self.tenant.json("get", "pod", monitoring.HOLD_POD, *where))
        except CommandError:  # gone already
            released = None
        try:
            self.tenant.text("delete", "namespace", monitoring.HOLD_NAMESPACE, "--wait=false")
        except CommandError as e:
            self.live.say(f"could not delete namespace {monitoring.HOLD_NAMESPACE} (the destroy removes it with the tenant): {e}")
        return released or self.live.clock.now()


def check_monitoring(live: Live, tenant: TenantAccess, node: str) -> None:
    """On the Job's GPU node: the DCGM exporter and the collector Ready, then Cloud Monitoring
    answering the tenant's GPU utilization with a series from that node, in the tenant's project and
    (project mode) through the environment's metrics scope. Each a step of the report; a failed one
    ends them (the next depends on it), and the run goes on."""
    names, steps = live.names, live.report.monitoring
    try:
        for workload in (monitoring.DCGM_EXPORTER, monitoring.METRICS_COLLECTOR):
            live.settle_step(
                steps,
                f"{workload.what} Ready on the GPU node",
                lambda w=workload: monitoring.ready(tenant.json("get", "pods", "-n", w.namespace), node, w),
                timeout=monitoring.READY_TIMEOUT,
            )
        query = monitoring.gpu_utilization_query(names.tenant)
        assert live.google_get is not None, "the monitoring checks query Cloud Monitoring"
        for project, why in monitoring.query_projects(names):
            live.settle_step(
                steps,
                f"{query} answered by Cloud Monitoring ({why}, {project})",
                lambda p=project: monitoring.series(*live.google_get(monitoring.query_url(p, query)), tenant=names.tenant, node=node, project=p),
                timeout=monitoring.query_timeout(duration_seconds(names.scrape_interval)),
                interval=monitoring.QUERY_POLL_SECONDS,
            )
    except CheckFailed:
        pass  # recorded: the report says which step and what it saw
