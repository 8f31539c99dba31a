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
