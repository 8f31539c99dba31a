"""The environment stack through __main__.py with Pulumi.dev.yaml and Pulumi.prod.yaml: the inputs
each resource receives, secrets, providers and ordering."""

from __future__ import annotations

import re

import yaml

from components.environment_monitoring import ENVIRONMENT_APIS
from components.gke_cluster import REQUIRED_APIS
from config.facts import PROJECT_NAMESPACE_PREFIX
from shipped_stacks import run_shipped

CLUSTER = "gcp:container/cluster:Cluster"
NODE_POOL = "gcp:container/nodePool:NodePool"
RELEASE = "kubernetes:helm.sh/v3:Release"
NODE_PROVIDER = "kubernetes:management.loft.sh/v1:NodeProvider"
VCI = "kubernetes:management.loft.sh/v1:VirtualClusterInstance"
WAIT = "command:local:Command"


def test_apis_are_enabled_and_never_disabled_on_destroy(dev_run):
    services = dev_run.of_type("gcp:projects/service:Service")
    # Monitoring's (components/environment_monitoring.py) besides the cluster's.
    assert sorted(s.input("service") for s in services) == sorted([*REQUIRED_APIS, *ENVIRONMENT_APIS])
    assert all(s.input("disableOnDestroy") is False and s.input("project") == "acme-ml-dev" for s in services)


def test_cluster_is_a_hardened_vpc_native_standard_cluster(dev_run):
    cluster = dev_run.one(CLUSTER)
    assert cluster.input("workloadIdentityConfig", "workloadPool") == "acme-ml-dev.svc.id.goog"
    assert cluster.input("networkingMode") == "VPC_NATIVE"
    assert cluster.input("enableAutopilot") is None
    assert cluster.input("enableShieldedNodes") is True
    assert cluster.input("enableLegacyAbac") is False
    assert cluster.input("masterAuth", "clientCertificateConfig", "issueClientCertificate") is False
    assert cluster.input("removeDefaultNodePool") is True
    assert cluster.input("nodeConfig", "workloadMetadataConfig", "mode") == "GKE_METADATA"
    assert cluster.input("releaseChannel", "channel") == "REGULAR"
    assert cluster.input("privateClusterConfig", "enablePrivateNodes") is True
    # The IP endpoint is closed unless networks are listed; kubectl and Pulumi use the DNS endpoint.
    assert cluster.input("masterAuthorizedNetworksConfig", "cidrBlocks") in (None, [])
    assert cluster.input("controlPlaneEndpointsConfig", "dnsEndpointConfig", "allowExternalTraffic") is True
    assert cluster.input("resourceLabels")["gpu-platform-environment"] == "dev"


def test_dev_is_zonal_and_destroyable_prod_is_regional_and_protected(dev_run, prod_run):
    dev, prod = dev_run.one(CLUSTER), prod_run.one(CLUSTER)
    assert dev.input("location") == "europe-west4-a" and dev.input("deletionProtection") is False and not dev.protect
    assert prod.input("location") == "us-central1" and prod.input("deletionProtection") is True and prod.protect
    # The default pool's node_config is gone after creation; a refresh must not plan a replacement.
    assert dev.ignore_changes == prod.ignore_changes == ["nodeConfig"]
    assert prod.input("releaseChannel", "channel") == "STABLE"
    assert prod.input("masterAuthorizedNetworksConfig", "cidrBlocks") == [{"cidrBlock": "203.0.113.0/24", "displayName": "office"}]
    window = prod.input("maintenancePolicy", "recurringWindow")
    assert window == {"startTime": "2026-01-01T02:00:00Z", "endTime": "2026-01-01T08:00:00Z", "recurrence": "FREQ=WEEKLY;BYDAY=SA,SU"}


def test_system_pool_runs_least_privilege_nodes(dev_run):
    pool = dev_run.one(NODE_POOL)
    assert pool.input("autoscaling") == {"minNodeCount": 1, "maxNodeCount": 3}
    assert pool.input("nodeConfig", "machineType") == "e2-standard-4"
    assert pool.input("nodeConfig", "workloadMetadataConfig", "mode") == "GKE_METADATA"
    assert pool.input("nodeConfig", "serviceAccount") == "gpu-dev-nodes@acme-ml-dev.iam.gserviceaccount.com"
    [binding] = [
        b for b in dev_run.of_type("gcp:projects/iAMMember:IAMMember") if b.input("member") == "serviceAccount:gpu-dev-nodes@acme-ml-dev.iam.gserviceaccount.com"
    ]
    assert binding.input("role") == "roles/container.defaultNodeServiceAccount"


def test_kubeconfig_uses_the_auth_plugin_and_is_secret(dev_run):
    assert "kubeconfig" in dev_run.secret_outputs
    kubeconfig = yaml.safe_load(dev_run.outputs["kubeconfig"])
    [user] = kubeconfig["users"]
    assert user["user"]["exec"]["command"] == "gke-gcloud-auth-plugin"
    assert "token" not in user["user"] and "client-key-data" not in user["user"]
    [cluster] = kubeconfig["clusters"]
    assert cluster["cluster"]["server"] == "https://gke-placeholder-dns-endpoint.europe-west4-a.gke.goog"
    provider = dev_run.one("pulumi:providers:kubernetes")
    assert provider.is_secret("kubeconfig")
    assert provider.input("clusterIdentifier") == "acme-ml-dev/europe-west4-a/gpu-dev"


def test_every_resource_uses_an_explicit_provider(dev_run):
    providers = {r.urn for r in dev_run.registrations if r.type.startswith("pulumi:providers:")}
    for r in dev_run.registrations:
        if r.custom and r.type.split(":")[0] in ("gcp", "kubernetes"):
            assert r.provider.rsplit("::", 1)[0] in providers, f"{r.type} {r.name} uses a default provider"
            assert "default" not in r.provider.rsplit("::", 2)[1]


def test_auto_nodes_identity(dev_run):
    [wi] = [m for m in dev_run.of_type("gcp:serviceaccount/iAMMember:IAMMember") if m.input("role") == "roles/iam.workloadIdentityUser"]
    assert wi.input("member") == "serviceAccount:acme-ml-dev.svc.id.goog[vcluster-platform/loft]"
    assert wi.input("serviceAccountId") == "projects/acme-ml-dev/serviceAccounts/vcluster-platform-dev@acme-ml-dev.iam.gserviceaccount.com"
    # Bound only once the cluster (and so the workload pool) exists.
    assert dev_run.one(CLUSTER).urn in dev_run.depends_on(wi.urn)
    # The environment itself binds nothing to the platform's identity on its project: each shared
    # tenant binds the VM role there, narrowed to its own VMs (tests/test_least_privilege.py).
    [identity] = dev_run.of_type("gpu-platform:iam:AutoNodesIdentity")
    assert [r.type for r in dev_run.children(identity.urn) if r.type.endswith("/iAMMember:IAMMember")] == ["gcp:serviceaccount/iAMMember:IAMMember"]
    bindings = [b for b in dev_run.of_type("gcp:projects/iAMMember:IAMMember") if b.input("role") == "projects/acme-ml-dev/roles/gpuPlatform_dev_autoNodes"]
    assert sorted(b.name for b in bindings) == ["tenant-nlp-project-platform-vm-role", "tenant-speech-project-platform-vm-role"]
    assert all(b.input("member") == "serviceAccount:vcluster-platform-dev@acme-ml-dev.iam.gserviceaccount.com" for b in bindings)
    assert not dev_run.of_type("gcp:serviceaccount/key:Key")


def test_license_token_travels_in_a_secret(stack_values):
    from config.stack_files import SecureValue

    values = stack_values("dev")
    values["gpu-platform:platform"]["licenseTokenKey"] = "vclusterLicenseToken"
    values["gpu-platform:vclusterLicenseToken"] = SecureValue("v1:encrypted")
    run = run_shipped(values, stack="dev")
    secret = run.one("kubernetes:core/v1:Secret", "license")
    assert secret.is_secret("stringData")
    env = run.one(RELEASE).input("values", "envValueFrom")
    assert env == {"LICENSE_TOKEN": {"secretKeyRef": {"name": "vcluster-platform-license", "key": "token"}}}
    assert "placeholder-decrypted-secret" not in yaml.safe_dump(run.one(RELEASE).input("values"))


def test_the_platforms_project_namespace_prefix_is_the_one_the_environment_template_checks(dev_run, prod_run):
    """The platform is told its project namespace prefix rather than left at its default ("Omitted
    defaults to p-"), and the environment template refuses an instance outside `<prefix><team>`
    with that same prefix: the two cannot drift apart."""
    for run in (dev_run, prod_run):
        assert run.one(RELEASE).input("values", "config", "projectNamespacePrefix") == PROJECT_NAMESPACE_PREFIX == "p-"
        infrastructure = run.one(NODE_PROVIDER).input("spec", "terraform", "nodeEnvironmentTemplate", "infrastructure", "inline")
        assert re.search(r'^  team_namespace = "p-\$\{local\.vcluster_name\}"$', infrastructure, flags=re.M)
        assert "__GPU_PLATFORM_" not in infrastructure
        for instance in run.of_type(VCI):
            assert instance.input("metadata", "namespace") == f"{PROJECT_NAMESPACE_PREFIX}{instance.input('metadata', 'name')}"


def test_ordering_cluster_platform_api_node_provider(dev_run):
    release, wait, node_provider = dev_run.one(RELEASE), dev_run.one(WAIT, "api-ready"), dev_run.one(NODE_PROVIDER)
    release_waits_for = dev_run.depends_on(release.urn)
    assert dev_run.one(NODE_POOL).urn in release_waits_for
    wi_binding = next(m for m in dev_run.of_type("gcp:serviceaccount/iAMMember:IAMMember") if m.input("role") == "roles/iam.workloadIdentityUser")
    assert wi_binding.urn in release_waits_for
    assert release.urn in dev_run.depends_on(wait.urn)
    assert wait.urn in dev_run.depends_on(node_provider.urn)
    assert "apiservice/v1.management.loft.sh" in wait.input("create")
    assert wait.is_secret("environment")


def test_tenants_are_deleted_before_the_node_provider_and_platform(dev_run):
    node_provider, release = dev_run.one(NODE_PROVIDER), dev_run.one(RELEASE)
    for vci in dev_run.of_type(VCI):
        waits_for = dev_run.depends_on(vci.urn)
        assert node_provider.urn in waits_for and release.urn in waits_for


def test_exports_for_tenant_stacks(dev_run):
    out = dev_run.outputs
    assert out["platformNamespace"] == "vcluster-platform" and "projectNamespace" not in out
    assert out["nodeProviderName"] == "gcp-gpu"
    assert out["region"] == "europe-west4" and out["zones"] == ["europe-west4-a", "europe-west4-b"]
    assert out["gcpProject"] == "acme-ml-dev"
    assert {nt["name"] for nt in out["nodeTypes"]} >= {"g2-standard-4-europe-west4-a", "n1-standard-4-t4x1-europe-west4-b-spot", "e2-standard-2-europe-west4-a"}
    assert out["environmentFacts"]["nodeProviderName"] == "gcp-gpu"
    assert set(out["tenants"]) == {"nlp", "speech"}
    nlp = out["tenants"]["nlp"]
    assert nlp["connectCommand"] == "vcluster platform connect vcluster nlp --project nlp"
    assert (nlp["projectNamespace"], nlp["gcpProject"], nlp["isolation"]) == ("p-nlp", "acme-ml-dev", "shared")
    # One static NAT address, a documentation address under the mock engine (tools/mock_engine.py).
    [address] = nlp["natAddresses"]
    assert address.startswith("198.51.100.")
