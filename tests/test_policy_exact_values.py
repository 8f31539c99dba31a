"""The security review of issues 26 and 27's work, kind by kind: values the pack let pass (a zero
value where the provider's default is not zero, backup plans, namespaces and alert policies not held
by value, a GCP resource's own project or location, a provider whose kubeconfig is unknown at
preview) and refusals that did not say what differs (in-tenant RBAC). Each is sent to a copy of
policy/ alone served over the analyzer's gRPC protocol, as the CLI runs it (the session's
`configured` and `analyzer` fixtures, tests/conftest.py), and refused by a MANDATORY policy whose
message names the resource and the field."""

from __future__ import annotations

import copy

import yaml
from policy_support import of, served_refusals, served_stack_refusals

VCI = "kubernetes:management.loft.sh/v1:VirtualClusterInstance"


def _edit_objects(props: dict, edit) -> dict:
    props = copy.deepcopy(props)
    objects = list(yaml.safe_load_all(props["spec"]["template"]["objects"]))
    edit(objects)
    props["spec"]["template"]["objects"] = yaml.safe_dump_all(objects, sort_keys=False)
    return props


def _named(objects: list[dict], kind: str, name: str) -> dict:
    [found] = [o for o in objects if o and o.get("kind") == kind and o["metadata"]["name"] == name]
    return found


# --- In-tenant RBAC: which rule or subject, which field -------------------------------------------------


def test_in_tenant_rbac_refusals_name_the_rule_or_subject_and_the_field(analyzer, configured):
    run, _ = configured
    instance = run.one(VCI, "nlp")
    prefix = "tenant-nlp-instance (instance 'p-nlp/nlp'): spec.template.objects["

    def widened(objects):
        _named(objects, "ClusterRole", "gpu-platform:gpu-watchdog")["rules"].append({"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list"]})
        _named(objects, "ClusterRoleBinding", "gpu-platform:gpu-watchdog")["subjects"][0]["namespace"] = "kube-system"

    found = of(served_refusals(analyzer, run, instance, _edit_objects(instance.plain_inputs, widened)), "tenant-objects-by-design")
    assert len(found) == 2 and all(m.startswith(prefix) for m in found), found
    assert any(
        "(ClusterRole gpu-platform:gpu-watchdog): rules[2]: {'apiGroups': [''], 'resources': ['secrets'], 'verbs': ['get', 'list']} is not "
        "what gpu-platform grants; allowed: not there (policy/program_data.json inventory (make policy-data))" in m
        for m in found
    ), found
    assert any(
        "(ClusterRoleBinding gpu-platform:gpu-watchdog): subjects[0].namespace: 'kube-system' is not what gpu-platform grants; allowed: "
        "'gpu-platform-system'" in m
        for m in found
    ), found


# --- prod's hosted router with single sign-on that admits every account ----------------------------------


def test_prod_refuses_the_hosted_router_with_single_sign_on_without_groups(analyzer, prod_run):
    release = prod_run.one("kubernetes:helm.sh/v3:Release")
    props = copy.deepcopy(release.plain_inputs)
    del props["values"]["env"]  # the hosted router on
    props["values"]["config"]["auth"] = {
        "oidc": {"issuerUrl": "https://accounts.google.com", "clientId": "gpu-platform", "clientSecret": "$OIDC_CLIENT_SECRET"},
        "password": {"disabled": True},
    }
    [message] = of(served_refusals(analyzer, prod_run, release, props), "helm-release-by-design")
    assert message == (
        "platform-release (chart 'vcluster-platform'): values.config.auth.oidc.groups: not set in prod (stack prod is environment 'prod') "
        "with the hosted *.loft.host router on (values.env.DISABLE_LOFT_ROUTER not 'true'): single sign-on would admit every account of "
        "its identity provider to the platform's UI and API on the internet; allowed: the groups whose members may log in, or "
        "values.env.DISABLE_LOFT_ROUTER: 'true'"
    )
    props["values"]["config"]["auth"]["oidc"].update(groups=["ml-admins"], groupsClaim="groups")
    assert of(served_refusals(analyzer, prod_run, release, props), "helm-release-by-design") == []


# --- Kubernetes providers whose kubeconfig is unknown at preview ----------------------------------------


def test_a_provider_unknown_at_preview_is_refused_while_its_host_cluster_is_known(analyzer, configured, tenant_run):
    """The program makes every kubeconfig from the host cluster's endpoint alone: known endpoint,
    unknown kubeconfig is a provider for something the update would create, refused at preview."""
    from pulumi_policy.proxy import UNKNOWN_STRING_VALUE

    run, _ = configured
    provider = run.one("pulumi:providers:kubernetes")
    unknown = {**provider.final_state, "kubeconfig": UNKNOWN_STRING_VALUE}
    [message] = of(served_stack_refusals(analyzer, run, {provider.urn: unknown}), "kubernetes-providers-own-cluster")
    assert message == (
        "gke-k8s: kubeconfig: known only after apply, while the stack's host cluster is known at preview: every kubeconfig gpu-platform "
        "writes is made from that cluster's endpoint alone, so this one names something the update would create, and would be used before "
        "it could be judged; allowed: exactly 'https://gke-placeholder-dns-endpoint.europe-west4-a.gke.goog', the DNS endpoint of the "
        "stack's host cluster projects/acme-ml-dev/locations/europe-west4-a/clusters/gpu-dev (its GKE cluster resource in this stack)"
    )
    # A team stack: its environment's kubeconfig is read at preview, so it is always known.
    host = tenant_run.one("pulumi:providers:kubernetes")
    [message] = of(served_stack_refusals(analyzer, tenant_run, {host.urn: {**host.final_state, "kubeconfig": UNKNOWN_STRING_VALUE}}), "kubernetes-providers-own-cluster")
    assert message.startswith("host: kubeconfig: known only after apply") and "the kubeconfig environment stack acme/gpu-platform/dev exports" in message


def test_an_environments_first_preview_waits_for_its_cluster(analyzer, configured):
    """The preview that creates the host cluster: its endpoint and every kubeconfig unknown; the
    check waits for `pulumi up` (an advisory note), nothing is refused."""
    from pulumi_policy.proxy import UNKNOWN_STRING_VALUE

    run, _ = configured
    cluster = run.one("gcp:container/cluster:Cluster")
    state = copy.deepcopy(cluster.final_state)
    state["controlPlaneEndpointsConfig"]["dnsEndpointConfig"]["endpoint"] = UNKNOWN_STRING_VALUE
    replaced = {cluster.urn: state}
    for provider in run.of_type("pulumi:providers:kubernetes"):
        replaced[provider.urn] = {**provider.final_state, "kubeconfig": UNKNOWN_STRING_VALUE}
    assert of(served_stack_refusals(analyzer, run, replaced), "kubernetes-providers-own-cluster") == []


# --- A zero value passes only where it is the provider's default -----------------------------------------

RECORD = "(policy/stacks/<stack>.json (make policy-data))"


def test_a_zero_value_the_program_does_not_set_passes_only_as_the_providers_default(analyzer, configured):
    run, _ = configured
    channel = run.one("gcp:monitoring/notificationChannel:NotificationChannel")
    assert of(served_refusals(analyzer, run, channel, {**channel.plain_inputs, "enabled": False}), "stack-resources-by-record") == [
        f"{channel.name}: enabled: false is not what stack dev's configuration sets; allowed: not set, or true (the provider's default) {RECORD}"
    ]
    assert of(served_refusals(analyzer, run, channel, {**channel.plain_inputs, "enabled": True, "forceDelete": False}), "stack-resources-by-record") == []
    # The view's deletionProtection: false is the program's own (a view holds no data), so the record's value.
    view = run.one("gcp:bigquery/table:Table")
    assert view.plain_inputs["deletionProtection"] is False
    assert of(served_refusals(analyzer, run, view, view.plain_inputs), "stack-resources-by-record") == []
    dataset = run.one("gcp:bigquery/dataset:Dataset")
    assert of(served_refusals(analyzer, run, dataset, {**dataset.plain_inputs, "defaultTableExpirationMs": 0}), "stack-resources-by-record") == [
        f"{dataset.name} (dataset 'gpu_platform_dev_billing'): defaultTableExpirationMs: 0 is not what stack dev's configuration sets; "
        f"allowed: not set {RECORD}"
    ]
    pool = run.one("gcp:container/nodePool:NodePool")
    props = copy.deepcopy(pool.plain_inputs)
    props["management"]["autoUpgrade"] = False
    props["nodeConfig"].update(spot=False, preemptible=False)  # the provider's defaults: as if unset
    props["nodeConfig"]["kubeletConfig"] = {"cpuCfsQuota": False}
    found = of(served_refusals(analyzer, run, pool, props), "stack-resources-by-record")
    prefix = "gke-system (node pool 'system' of cluster 'gpu-dev'): "
    assert sorted(found) == [
        prefix + f"management.autoUpgrade: false is not what stack dev's configuration sets; allowed: true {RECORD}",
        prefix + f"nodeConfig.kubeletConfig: {{'cpuCfsQuota': False}} is not what stack dev's configuration sets; allowed: not set {RECORD}",
    ]


# --- Backup plans, namespaces and alert policies by value -------------------------------------------------


def test_a_backup_plan_is_held_exactly_as_the_program_makes_it(analyzer, configured):
    run, _ = configured
    plan = run.one("gcp:gkebackup/backupPlan:BackupPlan", "nlp")
    prefix = "tenant-nlp-backup-plan (backup plan 'dev-nlp'): "
    paused = copy.deepcopy(plan.plain_inputs)
    paused["backupSchedule"]["paused"] = True
    assert of(served_refusals(analyzer, run, plan, paused), "stack-resources-by-record") == [
        prefix + f"backupSchedule.paused: true is not what stack dev's configuration sets; allowed: false {RECORD}"
    ]
    assert of(served_refusals(analyzer, run, plan, {**plan.plain_inputs, "deactivated": True}), "stack-resources-by-record") == [
        prefix + f"deactivated: true is not what stack dev's configuration sets; allowed: not set {RECORD}"
    ]
    keyed = copy.deepcopy(plan.plain_inputs)
    keyed["backupConfig"]["encryptionKey"] = {"gcpKmsEncryptionKey": "projects/mallory/locations/europe-west4/keyRings/k/cryptoKeys/k"}
    [message] = of(served_refusals(analyzer, run, plan, keyed), "stack-resources-by-record")
    assert message.startswith(prefix + "backupConfig.encryptionKey: {'gcpKmsEncryptionKey': 'projects/mallory/") and "allowed: not set" in message


def test_only_the_programs_namespaces_with_its_labels(analyzer, configured):
    run, _ = configured
    namespace = run.one("kubernetes:core/v1:Namespace")
    assert namespace.plain_inputs["metadata"]["name"] == "vcluster-platform"
    privileged = {"pod-security.kubernetes.io/enforce": "privileged"}
    props = copy.deepcopy(namespace.plain_inputs)
    props["metadata"].update(name="kube-system", labels=privileged)
    assert of(served_refusals(analyzer, run, namespace, props), "stack-resources-by-record") == [
        "platform-namespace: metadata.name: 'kube-system' is not a namespace stack dev's configuration makes; allowed: 'vcluster-platform' "
        "(policy/stacks/<stack>.json (make policy-data): a namespace the program makes for this stack flows in when the data is regenerated)"
    ]
    props = copy.deepcopy(namespace.plain_inputs)
    props["metadata"]["labels"].update(privileged)
    assert of(served_refusals(analyzer, run, namespace, props), "stack-resources-by-record") == [
        "platform-namespace: metadata.labels[\"pod-security.kubernetes.io/enforce\"]: 'privileged' is not what stack dev's configuration "
        f"sets; allowed: not set {RECORD}"
    ]


def test_an_alert_policy_notifies_only_the_programs_channels(analyzer, configured):
    run, _ = configured
    [policy, *_] = run.of_type("gcp:monitoring/alertPolicy:AlertPolicy")
    assert policy.plain_inputs["notificationChannels"] == [None]  # the channel dev creates: the cloud names it
    ours = {**policy.plain_inputs, "notificationChannels": ["projects/acme-ml-dev/notificationChannels/1234567890"]}
    assert of(served_refusals(analyzer, run, policy, ours), "stack-resources-by-record") == []
    outside = {**policy.plain_inputs, "notificationChannels": ["projects/mallory-proj/notificationChannels/123"]}
    assert of(served_refusals(analyzer, run, policy, outside), "stack-resources-by-record") == [
        f"{policy.name}: notificationChannels[0]: 'projects/mallory-proj/notificationChannels/123' is not what stack dev's configuration "
        f"sets; allowed: projects/acme-ml-dev/notificationChannels/<id> (what the program creates there, named by the cloud) {RECORD}"
    ]
    more = {**policy.plain_inputs, "notificationChannels": ["projects/acme-ml-dev/notificationChannels/1", "projects/acme-ml-dev/notificationChannels/2"]}
    [message] = of(served_refusals(analyzer, run, policy, more), "stack-resources-by-record")
    assert message.startswith(f"{policy.name}: notificationChannels: ['projects/acme-ml-dev/notificationChannels/1', ")
    disabled = {**ours, "enabled": False}
    [message] = of(served_refusals(analyzer, run, policy, disabled), "stack-resources-by-record")
    assert message.startswith(f"{policy.name}: enabled: false is not what") and "allowed: not set, or true (the provider's default)" in message


# --- A GCP resource's own project and location ----------------------------------------------------------


def test_every_gcp_resource_stays_in_the_projects_and_locations_of_its_stack(analyzer, configured):
    run, _ = configured
    kinds = (
        "gcp:compute/firewall:Firewall",
        "gcp:serviceaccount/account:Account",
        "gcp:compute/network:Network",
        "gcp:projects/service:Service",
        "gcp:compute/address:Address",
        "gcp:monitoring/alertPolicy:AlertPolicy",
        "gcp:monitoring/dashboard:Dashboard",
    )
    for kind in kinds:
        [reg, *_] = run.of_type(kind)
        assert reg.plain_inputs.get("project") == "acme-ml-dev", kind
        found = of(served_refusals(analyzer, run, reg, {**reg.plain_inputs, "project": "mallory-proj"}), "gcp-placement-by-record")
        assert len(found) == 1 and found[0].endswith(
            "project: 'mallory-proj' is not a project stack dev's configuration places its resources in; allowed: 'acme-ml-dev' "
            "(policy/stacks/<stack>.json gcpPlacement (make policy-data))"
        ), (kind, found)
    address = run.of_type("gcp:compute/address:Address")[0]
    [message] = of(served_refusals(analyzer, run, address, {**address.plain_inputs, "region": "us-east1"}), "gcp-placement-by-record")
    assert message.endswith("region: 'us-east1' is not a region stack dev's configuration places its resources in; allowed: 'europe-west4' "
                            "(policy/stacks/<stack>.json gcpPlacement (make policy-data))")
    cluster = run.one("gcp:container/cluster:Cluster")
    [message] = of(served_refusals(analyzer, run, cluster, {**cluster.plain_inputs, "location": "us-east1"}), "gcp-placement-by-record")
    assert "location: 'us-east1' is not a location stack dev's configuration places its resources in; allowed: 'US', 'europe-west4', 'europe-west4-a'" in message
