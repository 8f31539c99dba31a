"""Issue 27 item 2, kind by kind: each of the ten changes the security review found passing the pack
is sent to the pack as the CLI runs it, a copy of policy/ alone served over the analyzer's gRPC
protocol (resources through Analyze, with their provider; the stack through AnalyzeStack), and is
refused by a MANDATORY policy whose message names the resource and the field.

The stack judged is dev, configured as a user would to have every kind the program makes: single
sign-on, an e-mail notification channel and the showback view over dev's own billing export. The
copy's records (policy/stacks/) record dev so configured (what `make policy-data` writes for it), so
the pack judges by value against that record (the session's `configured` and `analyzer` fixtures,
tests/conftest.py and tests/policy_support.py)."""

from __future__ import annotations

import copy

from policy_support import BILLING_EXPORT, OTHER_EXPORT, analyze_remote, of, refusals, served_refusals, served_stack_refusals

from tools import policy_data


def test_the_configured_stack_passes(analyzer, configured):
    run, _ = configured
    for reg in run.registrations:
        assert served_refusals(analyzer, run, reg, reg.plain_inputs) == [], reg.name
    assert served_stack_refusals(analyzer, run, {}) == []


# --- 1, 2: Kubernetes providers -----------------------------------------------------------------------


def _with_server(kubeconfig: str, server: str) -> str:
    import yaml

    document = yaml.safe_load(kubeconfig)
    document["clusters"][0]["cluster"]["server"] = server
    return yaml.safe_dump(document)


def test_a_kubernetes_provider_for_another_cluster_of_the_same_location(analyzer, configured, tenant_run):
    """Same domain, same location: the provider itself passes, the stack does not."""
    run, _ = configured
    provider = run.one("pulumi:providers:kubernetes")
    elsewhere = "https://gke-0123456789abcdef0123456789abcdef-999999999999.europe-west4-a.gke.goog"
    props = {**provider.final_state, "kubeconfig": _with_server(provider.final_state["kubeconfig"], elsewhere)}
    assert served_refusals(analyzer, run, provider, {**provider.plain_inputs, "kubeconfig": props["kubeconfig"]}) == []
    [message] = of(served_stack_refusals(analyzer, run, {provider.urn: props}), "kubernetes-providers-own-cluster")
    assert message.startswith(f"gke-k8s: kubeconfig: clusters[0].cluster.server: '{elsewhere}' is not the stack's own host cluster; allowed: exactly ")
    assert "https://gke-placeholder-dns-endpoint.europe-west4-a.gke.goog" in message  # the stack's own cluster resource's endpoint
    # A team stack: the endpoint of the kubeconfig its environment exports, through its StackReference.
    host = tenant_run.one("pulumi:providers:kubernetes")
    props = {**host.final_state, "kubeconfig": _with_server(host.final_state["kubeconfig"], elsewhere)}
    [message] = of(served_stack_refusals(analyzer, tenant_run, {host.urn: props}), "kubernetes-providers-own-cluster")
    assert message.startswith(f"host: kubeconfig: clusters[0].cluster.server: '{elsewhere}' is not the stack's own host cluster")
    assert "the kubeconfig environment stack acme/gpu-platform/dev exports" in message


def test_a_kubernetes_provider_input_beside_the_kubeconfig(analyzer, configured):
    run, _ = configured
    provider = run.one("pulumi:providers:kubernetes")
    found = served_refusals(analyzer, run, provider, {**provider.plain_inputs, "renderYamlToDirectory": "/tmp/manifests", "context": "other"})
    assert sorted(of(found, "stack-resources-by-record")) == [
        "gke-k8s: context: 'other' is not what stack dev's configuration sets; allowed: not set (policy/stacks/<stack>.json (make policy-data))",
        "gke-k8s: renderYamlToDirectory: '/tmp/manifests' is not what stack dev's configuration sets; allowed: not set (policy/stacks/<stack>.json (make policy-data))",
    ]


# --- 3: the platform's login -----------------------------------------------------------------------------


def test_the_platform_login_pointed_at_another_identity_provider(analyzer, configured):
    run, _ = configured
    release = run.one("kubernetes:helm.sh/v3:Release")
    props = copy.deepcopy(release.plain_inputs)
    props["values"]["config"]["auth"]["oidc"].update(issuerUrl="https://idp.mallory.example", clientId="mallory")
    assert sorted(of(served_refusals(analyzer, run, release, props), "stack-resources-by-record")) == [
        "platform-release (chart 'vcluster-platform'): values.config.auth.oidc.clientId: 'mallory' is not what stack dev's configuration "
        "sets; allowed: 'gpu-platform' (policy/stacks/<stack>.json (make policy-data))",
        "platform-release (chart 'vcluster-platform'): values.config.auth.oidc.issuerUrl: 'https://idp.mallory.example' is not what stack "
        "dev's configuration sets; allowed: 'https://accounts.example.com' (policy/stacks/<stack>.json (make policy-data))",
    ]


# --- 4: prod's way in ----------------------------------------------------------------------------------


def test_a_prod_ingress_without_ranges_or_with_ranges_its_controller_ignores(analyzer, prod_run):
    release = prod_run.one("kubernetes:helm.sh/v3:Release")
    props = copy.deepcopy(release.plain_inputs)
    props["values"]["ingress"] = {
        "enabled": True,
        "host": "gpu-platform.acme.example",
        "ingressClass": "gce",  # GCE ingress ignores ingress-nginx's source-range annotation
        "annotations": {"nginx.ingress.kubernetes.io/whitelist-source-range": "203.0.113.0/24"},
    }
    found = served_refusals(analyzer, prod_run, release, props)
    assert "platform-release (chart 'vcluster-platform'): values.ingress.enabled: true is not a value gpu-platform sets for chart vcluster-platform" in " ".join(
        of(found, "helm-release-by-design")
    )
    [by_record] = of(found, "stack-resources-by-record")
    assert by_record.startswith("platform-release (chart 'vcluster-platform'): values.ingress: ") and "allowed: not set" in by_record
    # An Ingress of its own, a Gateway API route: no such type.
    for typ in ("kubernetes:networking.k8s.io/v1:Ingress", "kubernetes:gateway.networking.k8s.io/v1:HTTPRoute"):
        urn = release.urn.rsplit("::", 2)[0] + f"::{typ}::front-door"
        [(policy, message)] = refusals(analyze_remote(analyzer, typ, {"spec": {}}, urn, "front-door"))
        assert policy == "resource-types-by-design" and message.startswith(f"front-door: type '{typ}' is not a resource type gpu-platform creates")
    # The platform's own LoadBalancer without its ranges is open to every address.
    service = prod_run.one("kubernetes:core/v1:Service")
    props = copy.deepcopy(service.plain_inputs)
    del props["spec"]["loadBalancerSourceRanges"]
    found = served_refusals(analyzer, prod_run, service, props)
    assert of(found, "load-balancer-services-by-design") == [
        "platform-public: spec.loadBalancerSourceRanges: not set; allowed: ['203.0.113.0/24'] (policy/stacks/<stack>.json (make policy-data))"
    ]
    [open_] = of(found, "public-ranges-prod")
    assert open_.startswith("platform-public: spec.loadBalancerSourceRanges: ")


def test_prod_without_the_router_switch_and_without_single_sign_on(analyzer, prod_run):
    release = prod_run.one("kubernetes:helm.sh/v3:Release")
    props = copy.deepcopy(release.plain_inputs)
    del props["values"]["env"]
    found = served_refusals(analyzer, prod_run, release, props)
    [message] = of(found, "helm-release-by-design")
    assert message.startswith("platform-release (chart 'vcluster-platform'): values.env.DISABLE_LOFT_ROUTER: not set in prod (stack prod is environment 'prod') without single sign-on")
    assert of(found, "stack-resources-by-record") == [
        "platform-release (chart 'vcluster-platform'): values.env: not set; allowed: {'DISABLE_LOFT_ROUTER': 'true'} (policy/stacks/<stack>.json "
        "(make policy-data))"
    ]


# --- 5, 6: where monitoring sends and reads -----------------------------------------------------------


def test_a_notification_channel_to_an_outside_webhook(analyzer, configured):
    run, _ = configured
    channel = run.one("gcp:monitoring/notificationChannel:NotificationChannel")
    props = {**copy.deepcopy(channel.plain_inputs), "type": "webhook_tokenauth", "labels": {"url": "https://hooks.mallory.example/x"}}
    found = of(served_refusals(analyzer, run, channel, props), "stack-resources-by-record")
    assert f"{channel.name}: type: 'webhook_tokenauth' is not what stack dev's configuration sets; allowed: 'email'" in " ".join(found)
    assert f"{channel.name}: labels.url: 'https://hooks.mallory.example/x' is not what stack dev's configuration sets; allowed: not set" in " ".join(found)


def test_a_cost_view_over_another_environments_billing_export(analyzer, configured):
    run, _ = configured
    view = run.one("gcp:bigquery/table:Table")
    props = copy.deepcopy(view.plain_inputs)
    assert BILLING_EXPORT in props["view"]["query"]
    props["view"]["query"] = props["view"]["query"].replace(BILLING_EXPORT, OTHER_EXPORT)
    [message] = of(served_refusals(analyzer, run, view, props), "stack-resources-by-record")
    assert message.startswith(f"{view.name} (table 'gpu_cost_by_team'): view.query: ") and OTHER_EXPORT in message
    assert "is not what stack dev's configuration sets; allowed: " in message


# --- 7: host node pools --------------------------------------------------------------------------------


def test_a_host_node_pool_of_another_size_and_shape(analyzer, configured):
    """80 H100 nodes, the kubelet's read-only port, an SSH key: each field refused."""
    run, _ = configured
    pool = run.one("gcp:container/nodePool:NodePool")
    props = copy.deepcopy(pool.plain_inputs)
    props["autoscaling"]["maxNodeCount"] = 80
    props["nodeConfig"].update(
        machineType="a3-highgpu-8g",
        guestAccelerators=[{"type": "nvidia-h100-80gb", "count": 8}],
        kubeletConfig={"insecureKubeletReadonlyPortEnabled": "TRUE"},
    )
    props["nodeConfig"]["metadata"]["ssh-keys"] = "mallory:ssh-ed25519 AAAA"
    found = " ".join(of(served_refusals(analyzer, run, pool, props), "stack-resources-by-record"))
    prefix = "gke-system (node pool 'system' of cluster 'gpu-dev'): "
    for expected in (
        "autoscaling.maxNodeCount: 80 is not what stack dev's configuration sets; allowed: 3",
        "nodeConfig.machineType: 'a3-highgpu-8g' is not what stack dev's configuration sets; allowed: 'e2-standard-4'",
        "nodeConfig.guestAccelerators: ",
        "nodeConfig.kubeletConfig: {'insecureKubeletReadonlyPortEnabled': 'TRUE'} is not what stack dev's configuration sets; allowed: not set",
        "nodeConfig.metadata.ssh-keys: 'mallory:ssh-ed25519 AAAA' is not what stack dev's configuration sets; allowed: not set",
    ):
        assert prefix + expected in found, expected


# --- 8, 9: restore plans -------------------------------------------------------------------------------


def test_a_restore_plan_with_rules_or_another_teams_backup(analyzer, configured):
    run, _ = configured
    plan = run.one("gcp:gkebackup/restorePlan:RestorePlan", "nlp")
    props = copy.deepcopy(plan.plain_inputs)
    props["restoreConfig"]["transformationRules"] = [
        {"fieldActions": [{"op": "REPLACE", "path": "/spec/template/spec/containers/0/image", "value": "ghcr.io/mallory/x"}], "resourceFilter": {}}
    ]
    [rules] = of(served_refusals(analyzer, run, plan, props), "stack-resources-by-record")
    assert rules.startswith("tenant-nlp-backup-restore-plan (restore plan 'dev-nlp-restore'): restoreConfig.transformationRules: ")
    assert rules.endswith("is not what stack dev's configuration sets; allowed: not set (policy/stacks/<stack>.json (make policy-data))")
    props = {**copy.deepcopy(plan.plain_inputs), "backupPlan": plan.plain_inputs["backupPlan"].replace("/dev-nlp", "/dev-speech")}
    assert of(served_refusals(analyzer, run, plan, props), "stack-resources-by-record") == [
        "tenant-nlp-backup-restore-plan (restore plan 'dev-nlp-restore'): backupPlan: 'projects/acme-ml-dev/locations/europe-west4/backupPlans/"
        "dev-speech' is not what stack dev's configuration sets; allowed: 'projects/acme-ml-dev/locations/europe-west4/backupPlans/dev-nlp' "
        "(policy/stacks/<stack>.json (make policy-data))"
    ]


# --- 10: a second GCP provider -------------------------------------------------------------------------


def test_a_second_gcp_provider_for_another_project_with_impersonation(analyzer, configured):
    run, _ = configured
    provider = run.one("pulumi:providers:gcp")
    props = {**provider.plain_inputs, "project": "mallory-prod", "impersonateServiceAccount": "owner@mallory-prod.iam.gserviceaccount.com"}
    urn = provider.urn.replace("::gcp", "::gcp-elsewhere")
    found = of(refusals(analyze_remote(analyzer, provider.type, props, urn, "gcp-elsewhere")), "stack-resources-by-record")
    assert sorted(found) == [
        "gcp-elsewhere: impersonateServiceAccount: 'owner@mallory-prod.iam.gserviceaccount.com' is not what stack dev's configuration sets; "
        "allowed: not set (policy/stacks/<stack>.json (make policy-data))",
        "gcp-elsewhere: project: 'mallory-prod' is not what stack dev's configuration sets; allowed: 'acme-ml-dev' (policy/stacks/<stack>.json "
        "(make policy-data))",
    ]
    # The engine adds the provider's version: only the pinned one.
    found = of(refusals(analyze_remote(analyzer, provider.type, {**provider.plain_inputs, "version": "6.0.0"}, provider.urn, provider.name)), "stack-resources-by-record")
    assert found == [f"gcp: version: '6.0.0' is not the provider version gpu-platform pins; allowed: {policy_data.provider_versions()['pulumi:providers:gcp']!r} (requirements.txt)"]
