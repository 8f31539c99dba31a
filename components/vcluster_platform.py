"""VClusterPlatform: the vCluster Platform Helm release, its admin password and license kept in
Kubernetes Secrets (never in Helm values), and a wait until its management API answers."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_command as command
import pulumi_kubernetes as k8s

from config import versions
from config.environment import INGRESS_TLS_SECRET, IngressTls
from config.facts import PROJECT_NAMESPACE_PREFIX

from .auto_nodes_identity import PLATFORM_KSA, PLATFORM_NAMESPACE
from .options import depends_on_of

ADMIN_SECRET = "vcluster-platform-admin"
LICENSE_SECRET = "vcluster-platform-license"
API_SERVICE = "v1.management.loft.sh"

# The chart ships no CRDs: management.loft.sh exists only once the platform pod serves the
# aggregated API. kubectl needs the kubeconfig in a file; it lives only for this command.
WAIT_FOR_API = f"""set -eu
kubeconfig=$(mktemp)
trap 'rm -f "$kubeconfig"' EXIT
printf '%s' "$KUBECONFIG_DATA" > "$kubeconfig"
kubectl --kubeconfig "$kubeconfig" -n {PLATFORM_NAMESPACE} rollout status deployment/loft --timeout=600s
kubectl --kubeconfig "$kubeconfig" wait --for=condition=Available apiservice/{API_SERVICE} --timeout=600s
"""


@dataclass(frozen=True)
class VClusterPlatformArgs:
    chart_version: str
    admin_password: pulumi.Input[str]  # secret
    service_account_email: pulumi.Input[str]  # the AutoNodesIdentity's Google service account
    kubeconfig: pulumi.Input[str]  # secret; used only by the wait command
    public_host: str | None = None
    ingress_class: str | None = None
    ingress_tls: IngressTls | None = None
    license_token: pulumi.Input[str] | None = None  # secret


def ingress_values(host: str, ingress_class: str, tls: IngressTls | None) -> dict:
    """The chart's `ingress` values (loft-sh/loft chart/templates/ingress.yaml at tag v4.11.2: the
    Ingress names `ingress.tls.secret` when `ingress.tls.enabled`, and carries
    `ingress.annotations`). cert-manager's ingress-shim issues the certificate of an Ingress
    annotated cert-manager.io/cluster-issuer into the Secret its tls section names
    (https://cert-manager.io/docs/usage/ingress/)."""
    ingress: dict = {"enabled": True, "host": host, "ingressClass": ingress_class}
    if tls is None or not tls.enabled:
        ingress["tls"] = {"enabled": False}
        return ingress
    ingress["tls"] = {"enabled": True, "secret": tls.secret_name or INGRESS_TLS_SECRET}
    if tls.cluster_issuer:
        ingress["annotations"] = {"cert-manager.io/cluster-issuer": tls.cluster_issuer}
    return ingress


class VClusterPlatform(pulumi.ComponentResource):
    namespace: k8s.core.v1.Namespace
    release: k8s.helm.v3.Release
    api_ready: command.local.Command
    namespace_name: str = PLATFORM_NAMESPACE

    def __init__(self, name: str, args: VClusterPlatformArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-platform:platform:VClusterPlatform", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)

        self.namespace = k8s.core.v1.Namespace(
            f"{name}-namespace",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=PLATFORM_NAMESPACE, labels={"app.kubernetes.io/part-of": "gpu-platform"}),
            opts=child,
        )
        in_namespace = pulumi.ResourceOptions(parent=self, depends_on=[self.namespace])
        admin_secret = k8s.core.v1.Secret(
            f"{name}-admin-password",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=ADMIN_SECRET, namespace=PLATFORM_NAMESPACE),
            string_data={"password": pulumi.Output.secret(args.admin_password)},
            opts=in_namespace,
        )
        secrets: list[pulumi.Resource] = [admin_secret]

        values: dict = {
            "admin": {
                "create": True,
                "username": "admin",
                "passwordSecretRef": {"name": ADMIN_SECRET, "key": "password"},
            },
            "serviceAccount": {
                "name": PLATFORM_KSA,
                "create": True,
                "annotations": {"iam.gke.io/gcp-service-account": args.service_account_email},
            },
        }
        # The chart writes `config` into the platform's config (loft-sh/loft v4.11.2
        # chart/templates/secret.yaml); Helm merges it with the chart's own `config` defaults.
        values["config"] = {"projectNamespacePrefix": PROJECT_NAMESPACE_PREFIX}
        if args.public_host:
            values["config"]["loftHost"] = args.public_host
        if args.public_host and args.ingress_class:
            values["ingress"] = ingress_values(args.public_host, args.ingress_class, args.ingress_tls)
        if args.license_token is not None:
            secrets.append(
                k8s.core.v1.Secret(
                    f"{name}-license",
                    metadata=k8s.meta.v1.ObjectMetaArgs(name=LICENSE_SECRET, namespace=PLATFORM_NAMESPACE),
                    string_data={"token": pulumi.Output.secret(args.license_token)},
                    opts=in_namespace,
                )
            )
            values["envValueFrom"] = {"LICENSE_TOKEN": {"secretKeyRef": {"name": LICENSE_SECRET, "key": "token"}}}

        self.release = k8s.helm.v3.Release(
            f"{name}-release",
            name="vcluster-platform",
            chart=versions.PLATFORM_CHART,
            version=args.chart_version,
            repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=versions.PLATFORM_CHART_REPO),
            namespace=PLATFORM_NAMESPACE,
            create_namespace=False,
            values=values,
            timeout=900,
            max_history=10,
            # The caller's depends_on (system node pool, Workload Identity bindings): on destroy
            # the release is uninstalled before the nodes and the identity go.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*depends_on_of(opts), self.namespace, *secrets]),
        )

        self.api_ready = command.local.Command(
            f"{name}-api-ready",
            create=WAIT_FOR_API,
            environment={"KUBECONFIG_DATA": pulumi.Output.secret(args.kubeconfig)},
            # Wait again whenever the platform is upgraded.
            triggers=[self.release.version],
            logging=command.local.Logging.STDERR,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.release]),
        )
        self.register_outputs({"namespace": PLATFORM_NAMESPACE, "release": self.release.name, "chartVersion": self.release.version})
