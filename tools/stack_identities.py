"""Per stack, the exact identities a stack's grants name and its tenants with their projects,
security settings and access, read from the program's mock run of that stack (tools/mock_engine.py):
the stack's record (tools/policy_records.py) that the policy pack judges its grants and tenants by.
"""

from __future__ import annotations

from typing import Any

from components.tenant_vcluster import host_namespace
from config.facts import project_namespace
from config.isolation import node_name_prefix
from tools.mock_engine import ProgramRun, Registration

INSTANCE = "kubernetes:management.loft.sh/v1:VirtualClusterInstance"
PLATFORM_PROJECT = "kubernetes:management.loft.sh/v1:Project"
GCP_PROJECT = "gcp:organizations/project:Project"
ACCOUNT = "gcp:serviceaccount/account:Account"
NETWORK = "gcp:compute/network:Network"
SUBNETWORK = "gcp:compute/subnetwork:Subnetwork"
ADDRESS = "gcp:compute/address:Address"
CUSTOM_ROLE = "gcp:projects/iAMCustomRole:IAMCustomRole"
SERVICE_ACCOUNT_GRANT = "gcp:serviceaccount/iAMMember:IAMMember"
PROJECT_GRANT = "gcp:projects/iAMMember:IAMMember"
# The grant types the program binds a tenant's node account with: type → (scope, the input naming
# where it is bound), as the pack reads them (policy/guardrails/common.py grant_scope).
NODE_GRANT_TYPES = {PROJECT_GRANT: ("project", "project"), SERVICE_ACCOUNT_GRANT: ("serviceAccount", "serviceAccountId")}
CLUSTER = "gcp:container/cluster:Cluster"
# A component of ours owns the resources under it: the component types of the accounts the grants name.
PLATFORM_IDENTITY = "gpu-platform:iam:AutoNodesIdentity"
HOST_CLUSTER = "gpu-platform:gke:Cluster"
TENANT = "gpu-platform:tenants:VirtualCluster"
TENANT_MONITORING = "gpu-platform:monitoring:Tenant"
# The fields of a tenant's platform objects that say who reaches it and what it may use (loft-sh/loft
# tag v4.11.2 api/openapi-spec/swagger.json: management.v1.ProjectSpec `members`, `allowedClusters`,
# `allowedNodeTypes`; management.v1.VirtualClusterInstanceSpec `access` (the object itself),
# `extraAccessRules` and `template.access` (inside the virtual cluster)). Recorded per tenant as the
# program writes them; the pack allows exactly those (platform-access-by-design).
PROJECT_ACCESS_FIELDS = ("members", "allowedClusters", "allowedNodeTypes")
INSTANCE_ACCESS_FIELDS = ("access", "extraAccessRules", "template.access")


def _email(r: Registration) -> str:
    inputs = r.plain_inputs
    return f"{inputs['accountId']}@{inputs['project']}.iam.gserviceaccount.com"


def _under(run: ProgramRun, ancestor_type: str) -> dict[str, list[Registration]]:
    """Component URN of `ancestor_type` → the resources inside it."""
    index = run.by_urn()
    found: dict[str, list[Registration]] = {}
    for r in run.registrations:
        parent = index.get(r.parent)
        while parent is not None and parent.type != ancestor_type:
            parent = index.get(parent.parent)
        if parent is not None:
            found.setdefault(parent.urn, []).append(r)
    return found


def _tenant(run: ProgramRun, resources: list[Registration], environment_project: str | None) -> tuple[str, dict[str, Any]]:
    from policy.vcluster_reader import PERSISTENT_DISKS, TenantInstance

    [instance] = [r for r in resources if r.type == INSTANCE]
    parsed = TenantInstance.parse(instance.input("spec") or {}, instance.input("metadata", "name"))
    entry: dict[str, Any] = {"project": parsed.project, **parsed.security_settings(environment_project)}
    # A project Pulumi creates (platform.tenantProjects) or one that exists before: the bootstrap
    # grants CI's identities roles in the existing ones (policy/stack_records.py).
    entry["projectCreated"] = any(r.type == GCP_PROJECT for r in resources)
    # The other options that add grants (config/iam_grants.yaml `when`), as the run shows them.
    entry["persistentDisks"] = parsed.properties.get(PERSISTENT_DISKS) == "true"
    entry["monitoring"] = any(r.type == TENANT_MONITORING for r in resources)
    accounts = [r for r in resources if r.type == ACCOUNT]
    subnets = [r for r in resources if r.type == SUBNETWORK]
    networks = [r for r in resources if r.type == NETWORK]
    entry["nodeServiceAccount"] = _email(accounts[0]) if accounts else None
    # What the instance's auto-nodes properties name (components/tenant_vcluster.py): the account
    # by its id, the network and subnet by name. None in legacy mode, whose network is not ours.
    entry["nodeServiceAccountId"] = accounts[0].input("accountId") if accounts else None
    entry["network"] = networks[0].input("name") if networks else None
    entry["subnetwork"] = subnets[0].input("name") if subnets else None
    entry["region"] = subnets[0].input("region") if subnets else None
    entry["nodeGrants"] = node_grants(run, entry["nodeServiceAccount"]) if accounts else []
    # The static NAT addresses its nodes leave from, by name: their addresses are Google's pick,
    # known once they exist (vcluster-control-plane-nat-addresses compares them then).
    entry["natAddresses"] = sorted(r.input("name") for r in resources if r.type == ADDRESS)
    [project] = [r for r in resources if r.type == PLATFORM_PROJECT]
    entry["platformAccess"] = {
        "project": {field: _at(project.input("spec"), field) for field in PROJECT_ACCESS_FIELDS},
        "instance": {field: _at(instance.input("spec"), field) for field in INSTANCE_ACCESS_FIELDS},
    }
    return str(parsed.name), entry


def node_grants(run: ProgramRun, email: str) -> list[dict[str, str]]:
    """Every grant the run makes to a tenant's node account: its scope, its exact role and where it
    is bound (the project, or the account's e-mail): the pack allows these and no other."""
    found = set()
    member = f"serviceAccount:{email}"
    for r in run.registrations:
        if not (r.type.startswith("gcp:") and r.type.rsplit(":", 1)[-1].lower().endswith(("iammember", "iambinding", "iampolicy"))):
            continue
        inputs = r.plain_inputs
        if member != inputs.get("member") and member not in (inputs.get("members") or []) and member not in str(inputs.get("policyData") or ""):
            continue
        if r.type not in NODE_GRANT_TYPES:
            raise ValueError(f"{r.name}: the program binds node account {email} with a {r.type}, which NODE_GRANT_TYPES does not read")
        scope, where = NODE_GRANT_TYPES[r.type]
        on = str(inputs.get(where))
        found.add((scope, str(inputs.get("role")), on.rsplit("/", 1)[-1] if scope == "serviceAccount" else on))
    return [{"scope": scope, "role": role, "on": on} for scope, role, on in sorted(found)]


def _at(value: Any, dotted: str) -> Any:
    for key in dotted.split("."):
        value = value.get(key) if isinstance(value, dict) else None
    return value


def stack_identities(run: ProgramRun, environment: str, environment_stack: str, environment_entry: dict[str, Any] | None) -> dict[str, Any]:
    """The exact identities a stack's grants may name, and its tenants with their projects and
    security settings. A team stack (`environment_entry`: its environment's entry) takes the
    platform's account and the environment's project from its environment."""
    platform = [_email(r) for rs in _under(run, PLATFORM_IDENTITY).values() for r in rs if r.type == ACCOUNT]
    host_nodes = [_email(r) for rs in _under(run, HOST_CLUSTER).values() for r in rs if r.type == ACCOUNT]
    members = [
        r.input("member")
        for rs in _under(run, PLATFORM_IDENTITY).values()
        for r in rs
        if r.type == SERVICE_ACCOUNT_GRANT and r.input("role") == "roles/iam.workloadIdentityUser"
    ]
    clusters = run.of_type(CLUSTER)
    if environment_entry is None:
        project = clusters[0].input("project") if clusters else None
        entry: dict[str, Any] = {
            "environment": environment,
            "environmentStack": environment_stack,
            "project": project,
            "platformServiceAccount": platform[0] if platform else None,
            "workloadIdentityMember": members[0] if members else None,
            "hostNodesServiceAccount": host_nodes[0] if host_nodes else None,
        }
    else:
        entry = {
            "environment": environment,
            "environmentStack": environment_stack,
            **{k: environment_entry[k] for k in ("project", "platformServiceAccount")},
            "workloadIdentityMember": None,
            "hostNodesServiceAccount": None,
        }
    prefixes = {str(r.input("roleId")).rsplit("_", 1)[0] for r in run.of_type(CUSTOM_ROLE)}
    entry["roleIdPrefixes"] = sorted(prefixes | set((environment_entry or {}).get("roleIdPrefixes", [])))
    tenants = {}
    for resources in _under(run, TENANT).values():
        name, tenant = _tenant(run, resources, entry["project"])
        tenant["vmNamePrefix"] = node_name_prefix(environment, name)
        tenant["hostNamespace"] = host_namespace(name)
        tenant["projectNamespace"] = project_namespace(name)
        tenants[name] = tenant
    entry["tenants"] = dict(sorted(tenants.items()))
    return entry
