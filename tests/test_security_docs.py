"""docs/security.md against the code: each row of its threat table and each list of its sections
is what the program registers (the shipped stacks' runs), what the pack's data records, or what the
bootstrap grants; what the page marks **upstream** names its source. The rest of the page's claims
are the subjects of the tests named beside them here (the isolation, platform-access, tenant-security
and guardrail tests)."""

from __future__ import annotations

import re

import policies as P
import yaml

from components import fallback_documents as fallback
from components import watchdog_documents as watchdog
from components.monitoring_documents import MONITORING_NAMESPACE
from components.tenant_pod_security import FEATURE_NAMESPACES, PRIVILEGED_NAMESPACES
from config import yaml_io
from config.tenant_security import ControlPlaneMaximum
from docs_support import page, section
from policy.vcluster_reader import host_access
from tools.policy_data import BOOTSTRAP_ROLES

VCI = "kubernetes:management.loft.sh/v1:VirtualClusterInstance"
SA_MEMBER = "gcp:serviceaccount/iAMMember:IAMMember"


def words(text: str) -> str:
    return " ".join(text.split())


def row(actor: str) -> str:
    """The threat table's row whose actor cell starts with `actor`, on one line."""
    [found] = [line for line in section("Who can reach what").splitlines() if line.startswith(f"| {actor}")]
    return found


def tenant_documents(run, tenant: str) -> list[dict]:
    return [d for d in yaml.safe_load_all(run.one(VCI, tenant).input("spec", "template", "objects")) if d]


def by_kind(documents: list[dict], kind: str) -> list[dict]:
    return [d for d in documents if d["kind"] == kind]


# --- Every row of the threat table names what enforces it ------------------------------------------------

# A file the page names: a path under one of the repository's own directories, or a workflow.
_FILE = re.compile(r"`((?:components|config|policy|templates|tools|bootstrap|\.github)/[A-Za-z0-9_./-]+\.[a-z]+)`")


def threat_rows() -> list[str]:
    """The rows of "Who can reach what" (project mode), header and rule left out."""
    lines = [line for line in section("Who can reach what").splitlines() if line.startswith("| ")]
    assert lines[0].startswith("| actor |"), lines[0]
    return lines[1:]


def test_every_row_of_the_threat_table_names_the_files_that_enforce_it():
    """Each actor's row names at least one file of the repository that enforces what it says, and
    every file the table names exists (a renamed or deleted module makes the row stale)."""
    from config.stack_files import PROJECT_DIR

    rows = threat_rows()
    assert len(rows) >= 17 and rows[0].startswith("| a pod on a team's node"), rows
    for line in rows:
        actor = line.split(" | ", 1)[0].removeprefix("| ")
        named = _FILE.findall(line)
        assert named, f"the row of {actor!r} names no file that enforces it"
        missing = [name for name in named if not (PROJECT_DIR / name).is_file()]
        assert missing == [], f"the row of {actor!r} names files that do not exist: {missing}"


def test_the_drift_row_says_when_a_tenant_kubeconfig_is_within_reach():
    """The drift identity reads the admin password: a team's kubeconfig is out of its direct reach,
    not out of reach while its holder can reach the platform's login with password login on."""
    text = words(row("the CI drift identity"))
    assert "stays out of reach" not in text
    assert "is a platform admin, and through the platform every team's cluster-admin" in text
    assert "as long as password login is on, that is without `platform.sso`" in text
    assert "a team's `vc-<team>` kubeconfig is out of its reach except through the platform's login" in text


# --- Pod Security ---------------------------------------------------------------------------------------


def test_the_exempt_namespaces_are_the_programs():
    table = re.findall(r"^\| `([a-z-]+)` \| (.+?) \| (always|only where .+?) \|$", section("Pod Security"), flags=re.M)
    assert [name for name, _, _ in table] == list(PRIVILEGED_NAMESPACES)
    for name, _, when in table:
        assert (when == "always") == (name not in FEATURE_NAMESPACES), name
    assert FEATURE_NAMESPACES == {MONITORING_NAMESPACE: "monitoring"}
    assert "the GPU watchdog's namespace `gpu-platform-system` enforces `restricted`" in words(section("Pod Security"))


def test_what_runs_in_the_gpu_operators_namespace_is_the_programs_chart():
    """The data the pack judges the GPU Operator chart by; the probes (a driver from another
    registry, a path the program never writes, another image value) are tests/test_guardrails_pinned.py's."""
    from guardrails import value_paths

    from config import versions
    from tools.program_inventory import IMAGE_KEYS

    assert "What runs privileged in `gpu-operator` is the program's chart" in words(section("Pod Security"))
    [chart] = P.INVENTORY[P.PROGRAM_PROJECT]["tenantCharts"]
    assert (chart["chart"], chart["repository"]) == (versions.GPU_OPERATOR_CHART, versions.GPU_OPERATOR_CHART_REPO)
    # The images are the chart version's own defaults: the program writes no value that chooses one.
    assert chart["imageValues"] == {}
    assert [p for p in chart["valuePaths"] if {name for _, name in value_paths.parse(p)} & IMAGE_KEYS] == []
    # No driver container: the one value the program writes for the switch is pinned.
    assert chart["fixedSwitches"]["driver.enabled"] is False


def test_the_watchdogs_namespace_needs_no_exemption(dev_run):
    [namespace] = [d for d in tenant_documents(dev_run, "nlp") if d["kind"] == "Namespace" and d["metadata"]["name"] == watchdog.NAMESPACE]
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    assert watchdog.NAMESPACE not in PRIVILEGED_NAMESPACES


# --- The threat table, row by row ---------------------------------------------------------------------


def test_the_collector_row_is_the_collectors_reach(dev_run):
    documents = tenant_documents(dev_run, "nlp")  # monitoring is on in dev
    [collector] = [d for d in by_kind(documents, "DaemonSet") if d["metadata"]["name"] == "gpu-metrics-collector"]
    access = host_access(collector)
    assert (access["hostNetwork"], access["hostPID"], access["hostIPC"], access["hostPaths"]) == (True, False, False, [])
    assert all(not c["securityContext"].get("privileged") and not c["securityContext"].get("capabilities", {}).get("add") for c in access["containers"])
    bindings = [b for b in by_kind(documents, "RoleBinding") if b["subjects"][0]["name"] == access["serviceAccountName"]]
    bound = {b["metadata"]["namespace"] for b in bindings}
    roles = {(b["metadata"]["namespace"], b["roleRef"]["name"]) for b in bindings}
    rules = {(r["metadata"]["namespace"], str(r["rules"])) for r in by_kind(documents, "Role") if (r["metadata"]["namespace"], r["metadata"]["name"]) in roles}
    assert bound == {"gpu-operator", MONITORING_NAMESPACE, fallback.NAMESPACE}
    assert {rule for _, rule in rules} == {str([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}])}
    text = row("the GPU metrics collector")
    assert "`get`, `list` and `watch` pods in `gpu-operator`, `gpu-platform-monitoring` and `gpu-platform-capacity`" in text and "`hostNetwork`" in text
    # Nothing wider: its one cluster-wide right is `get` on /metrics.
    cluster_bindings = [b for b in by_kind(documents, "ClusterRoleBinding") if b["subjects"][0]["name"] == access["serviceAccountName"]]
    cluster_roles = {r["metadata"]["name"]: r["rules"] for r in by_kind(documents, "ClusterRole")}
    assert [cluster_roles[b["roleRef"]["name"]] for b in cluster_bindings] == [[{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]]
    assert "and `get` on `/metrics` (kube-state-metrics', and the API server's own)" in text


def test_the_kube_state_metrics_row(dev_run):
    documents = tenant_documents(dev_run, "nlp")
    [role] = [r for r in by_kind(documents, "ClusterRole") if "kube-state-metrics" in r["metadata"]["name"]]
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["nodes", "pods"], "verbs": ["list", "watch"]},
        {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
        {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]},
    ]
    [deployment] = [d for d in by_kind(documents, "Deployment") if d["metadata"]["name"] == "kube-state-metrics"]
    assert host_access(deployment)["hostNetwork"] is False
    text = row("the team's kube-state-metrics")
    assert "`list` and `watch` nodes and pods of the team's virtual cluster" in text and "`create` TokenReviews and SubjectAccessReviews" in text


def test_the_kube_state_metrics_section_is_what_the_tenant_gets(dev_run, tenant_run):
    """What holds (the auth filter, the one binding to `get` /metrics) and what does not (the
    NetworkPolicy, on the tenant's default network: the program never replaces vCluster's Flannel)."""
    text = words(section("The collector and kube-state-metrics"))
    for run, tenant in ((dev_run, "nlp"), (tenant_run, "vision")):
        documents = tenant_documents(run, tenant)
        [deployment] = [d for d in by_kind(documents, "Deployment") if d["metadata"]["name"] == "kube-state-metrics"]
        [container] = deployment["spec"]["template"]["spec"]["containers"]
        assert "--auth-filter" in container["args"] and {p["containerPort"] for p in container["ports"]} == {8080, 8081}
        metrics_readers = [
            b["metadata"]["name"]
            for b in by_kind(documents, "ClusterRoleBinding")
            if any(r["metadata"]["name"] == b["roleRef"]["name"] and r["rules"][0].get("nonResourceURLs") for r in by_kind(documents, "ClusterRole"))
        ]
        assert metrics_readers == ["gpu-platform-gpu-metrics-collector-metrics"]
        [policy] = by_kind(documents, "NetworkPolicy")
        assert (policy["metadata"]["name"], policy["metadata"]["namespace"]) == ("kube-state-metrics", MONITORING_NAMESPACE)
        assert [p["port"] for rule in policy["spec"]["ingress"] for p in rule["ports"]] == [8080]
        # The tenant's network plugin stays vCluster's default (no deploy.cni in its vcluster.yaml).
        values = yaml.safe_load(run.one(VCI, tenant).input("spec", "template", "helmRelease", "values"))
        assert "deploy" not in values
    for claim in (
        "It runs with `--auth-filter`",
        "the cluster role `gpu-platform-gpu-metrics-collector-metrics` grants that account `get` on `/metrics` and nothing else",
        "The NetworkPolicy `kube-state-metrics` (namespace `gpu-platform-monitoring`) admits only the collector's pods, on port 8080",
        "So on the default network the policy is not enforced",
        "No address range is admitted",
    ):
        assert claim in text, claim


def test_the_watchdog_row_is_the_watchdogs_rbac(dev_run):
    assert watchdog.CLUSTER_RULES == (
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "delete"]},
        {"apiGroups": ["karpenter.sh"], "resources": ["nodeclaims"], "verbs": ["list", "delete"]},
    )
    assert watchdog.EVENT_RULES == ({"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},)
    [deployment] = [d for d in by_kind(tenant_documents(dev_run, "nlp"), "Deployment") if d["metadata"]["name"] == watchdog.NAME]
    assert host_access(deployment)["hostNetwork"] is False
    text = row("the team's GPU watchdog")
    assert "`list` and `delete` its Nodes and its Karpenter NodeClaims" in text and "`create` Events in `default`" in text


def test_the_capacity_fallback_row_is_its_rbac(dev_run):
    assert fallback.CLUSTER_RULES == ({"apiGroups": ["karpenter.sh"], "resources": ["nodeclaims"], "verbs": ["list"]},)
    assert fallback.POD_RULES == ({"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "create", "delete"]},)
    assert fallback.EVENT_RULES == ({"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},)
    [deployment] = [d for d in by_kind(tenant_documents(dev_run, "nlp"), "Deployment") if d["metadata"]["name"] == fallback.NAME]
    assert host_access(deployment)["hostNetwork"] is False
    text = row("the team's capacity fallback")
    assert f"namespace `{fallback.NAMESPACE}`" in text and "`list` its Karpenter NodeClaims" in text
    assert f"`list`, `create` and `delete` pods in `{fallback.NAMESPACE}`" in text and "`create` Events in `default`" in text
    assert f"and so does the capacity fallback's `{fallback.NAMESPACE}`" in words(section("Pod Security")) and fallback.NAMESPACE not in PRIVILEGED_NAMESPACES


def test_only_the_collector_has_host_access_among_the_programs_workloads():
    """What tenant-objects-by-design allows, per workload: the data the pack judges by."""
    workloads = {tuple(w["object"])[3]: w["hostAccess"] for w in P.INVENTORY[P.PROGRAM_PROJECT]["tenantWorkloads"]}
    networked = sorted(name for name, profiles in workloads.items() if any(p["hostNetwork"] for p in profiles))
    assert networked == ["gpu-metrics-collector"]
    assert all(not p["hostPaths"] and not p["hostPID"] for profiles in workloads.values() for p in profiles)


def test_the_backup_row_every_plan_names_its_own_cluster_and_namespace(runs):
    for stack, run in runs.items():
        record = P.STACKS[stack]
        namespaces = {t["hostNamespace"] for t in record["tenants"].values()}
        plans = [*run.of_type("gcp:gkebackup/backupPlan:BackupPlan"), *run.of_type("gcp:gkebackup/restorePlan:RestorePlan")]
        assert plans, stack
        for plan in plans:
            config = plan.input("backupConfig") or plan.input("restoreConfig")
            assert plan.input("cluster") == record["hostCluster"] and config["selectedNamespaces"]["namespaces"][0] in namespaces
            assert "vcluster-platform" not in config["selectedNamespaces"]["namespaces"]
        for restore in run.of_type("gcp:gkebackup/restorePlan:RestorePlan"):
            assert restore.input("restoreConfig")["clusterResourceRestoreScope"] == {"noGroupKinds": True}
    roles = yaml_io.load(BOOTSTRAP_ROLES.read_text())["identities"]
    holders = sorted(name for name, spec in roles.items() if any(e["role"] == "roles/gkebackup.admin" for e in spec.get("project") or []))
    assert holders == ["deploy"]
    assert "`roles/gkebackup.admin` (the environment's deployer)" in row("the Backup for GKE agent")


def test_the_platform_acts_as_every_teams_node_identity_and_no_other_account(runs):
    """actAs by design: serviceAccountUser for the platform on each tenant's node account, nowhere else."""
    for stack, run in runs.items():
        record = P.STACKS[stack]
        platform = f"serviceAccount:{record['platformServiceAccount']}"
        targets = sorted(
            r.input("serviceAccountId").rsplit("/", 1)[-1]
            for r in run.of_type(SA_MEMBER)
            if r.input("member") == platform and r.input("role") == "roles/iam.serviceAccountUser"
        )
        assert targets == sorted(t["nodeServiceAccount"] for t in record["tenants"].values()), stack
        project_grants = [r for r in run.of_type("gcp:projects/iAMMember:IAMMember") if r.input("member") == platform]
        assert all("serviceAccount" not in r.input("role") for r in project_grants)
    assert "act as **every** team's node identity" in row("the platform pod, compromised")
    assert "actAs on every team's node identity, by design." in section("The platform's identity")


# --- What a preview identity can read -------------------------------------------------------------------


def test_the_preview_identity_reads_what_the_page_says_and_no_secret():
    identities = yaml_io.load(BOOTSTRAP_ROLES.read_text())["identities"]
    preview = [e["role"] for e in identities["preview"]["project"]]
    text = words(section("What a preview identity can read"))
    for role in preview:
        assert f"`{role}`" in text or role.startswith("roles/iam."), role
    assert not any(r.startswith("custom:") for r in preview)
    assert not any(e["role"].startswith("custom:") for e in identities["drift"]["project"])
    assert "no Secret of the cluster: not even the drift check's identity reads Secrets through IAM" in text


def test_no_admin_password_is_anywhere_a_preview_reads(runs):
    """No config key, Pulumi secret, output or Pulumi-managed Secret holds it (more in tests/test_platform_access.py)."""
    for run in runs.values():
        assert not run.of_type("random:index/randomPassword:RandomPassword")
        assert [r.input("metadata", "name") for r in run.of_type("kubernetes:core/v1:Secret") if "admin" in str(r.input("metadata", "name"))] == []
        assert "platformAdminPassword" not in run.outputs
    assert "It cannot read the **platform's admin password**" in section("What a preview identity can read")


# --- Control planes, shared and project tenants ----------------------------------------------------------


def test_the_control_plane_maximum_is_the_default_the_page_gives():
    assert (ControlPlaneMaximum().cpu, ControlPlaneMaximum().memory) == ("4", "8Gi")
    assert "(default 4 CPUs, 8Gi)" in words(section("Joins and the host cluster"))


def test_dev_as_shipped_accepts_shared_beside_project_tenants_as_the_page_says():
    record = P.STACKS["dev"]
    kinds = {t["isolation"] for s in P.STACKS.values() if s["environmentStack"] == "dev" for t in s["tenants"].values()}
    assert record["allowSharedWithProjectTenants"] is True and kinds == {"shared", "project"}
    assert "dev as shipped does, for its two shared tenants beside `team-vision-dev`" in words(section("Shared and project tenants"))


# --- The page's own rules --------------------------------------------------------------------------------


def test_every_upstream_property_names_its_source():
    text = page("docs/security.md")
    marks = [m.start() for m in re.finditer(r"\*\*upstream\*\*", text)]
    assert len(marks) >= 8
    for start in marks:
        after = text[start : start + 400]
        assert re.search(r"https://|tag v\d|commit\s+[0-9a-f]{40}|_docs/version-\d", after), after


def test_every_policy_the_page_names_is_in_the_pack():
    named = set(re.findall(r"`([a-z0-9]+(?:-[a-z0-9]+)*-(?:by-design|resources|prod|per-project))`", page("docs/security.md")))
    assert named and sorted(named - {p.name for p in P.POLICIES}) == []


def test_the_licenses_is_the_only_secret_pulumi_makes_and_the_pack_holds_it_so():
    """The page's "Secrets": the pack records exactly the license's Secret (what it then rejects:
    tests/test_guardrails_deployer.py)."""
    from components.vcluster_platform import LICENSE_SECRET

    recorded = P.INVENTORY[P.PROGRAM_PROJECT]["kubernetesSecrets"]
    assert [(s["metadata"]["name"], s["keys"]) for s in recorded] == [(LICENSE_SECRET, ["token"])]
    assert "The license's is the only Kubernetes Secret Pulumi makes, and the pack rejects any other (`kubernetes-secrets-by-design`" in words(section("Secrets"))
