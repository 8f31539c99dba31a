"""VClusterPlatform: the vCluster Platform Helm release, its admin password created inside the
cluster (never a Pulumi secret), its license in a Kubernetes Secret (never in Helm values), single
sign-on through the platform's OIDC connector, and a wait until its management API answers."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_command as command
import pulumi_kubernetes as k8s

from config import versions
from config.environment import INGRESS_TLS_SECRET, IngressTls
from config.facts import PROJECT_NAMESPACE_PREFIX
from config.platform_access import (
    ADMIN_PASSWORD_KEY,
    ADMIN_PASSWORD_SECRET,
    OIDC_CLIENT_SECRET_ENV,
    OIDC_SECRET,
    OIDC_SECRET_KEY,
    SOURCE_RANGE_ANNOTATION,
    Sso,
    oidc_config,
)

from .auto_nodes_identity import PLATFORM_KSA, PLATFORM_NAMESPACE
from .options import depends_on_of

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


# The admin password, made on the deployer's machine from the kernel's random source and stored
# straight into a Secret of the platform's namespace: it is never an argument (process lists), never
# printed, never in Pulumi's state or config, so no preview can decrypt it. Created once; an
# existing Secret (a password the admins set or rotated) is kept. The chart reads it through
# admin.passwordSecretRef (loft-sh/loft chart/templates/deployment.yaml at tag v4.11.2:
# LOFT_ADMIN_PASSWORD from that Secret's key), and the Deployment cannot start without it.
ENSURE_ADMIN_PASSWORD = f"""set -eu
umask 077
kubeconfig=$(mktemp)
password=$(mktemp)
trap 'rm -f "$kubeconfig" "$password"' EXIT
printf '%s' "$KUBECONFIG_DATA" > "$kubeconfig"
existing=$(kubectl --kubeconfig "$kubeconfig" -n {PLATFORM_NAMESPACE} get secret {ADMIN_PASSWORD_SECRET} --ignore-not-found -o name)
if [ -z "$existing" ]; then
  LC_ALL=C tr -dc 'A-Za-z0-9' < /dev/urandom | head -c 32 > "$password"
  kubectl --kubeconfig "$kubeconfig" -n {PLATFORM_NAMESPACE} create secret generic {ADMIN_PASSWORD_SECRET} --from-file={ADMIN_PASSWORD_KEY}="$password" > /dev/null
fi
"""

# With single sign-on, the OIDC client secret is a Secret the environment's admins create (never a
# Pulumi secret, for the same reason as the password). Without it the platform pod could not start
# (its environment names the Secret), so `pulumi up` stops here first, saying what to create.
REQUIRE_OIDC_SECRET = f"""set -eu
kubeconfig=$(mktemp)
trap 'rm -f "$kubeconfig"' EXIT
printf '%s' "$KUBECONFIG_DATA" > "$kubeconfig"
if ! kubectl --kubeconfig "$kubeconfig" -n {PLATFORM_NAMESPACE} get secret {OIDC_SECRET} -o jsonpath='{{.data.{OIDC_SECRET_KEY}}}' | grep -q .; then
  echo "platform.sso: Secret {OIDC_SECRET} with key {OIDC_SECRET_KEY} is missing in namespace {PLATFORM_NAMESPACE}; create it with" >&2
  echo "  kubectl -n {PLATFORM_NAMESPACE} create secret generic {OIDC_SECRET} --from-file={OIDC_SECRET_KEY}=<file holding the OIDC client secret>" >&2
  exit 1
fi
"""


@dataclass(frozen=True)
class VClusterPlatformArgs:
    chart_version: str
    service_account_email: pulumi.Input[str]  # the AutoNodesIdentity's Google service account
    kubeconfig: pulumi.Input[str]  # secret; used only by the wait command
    public_host: str | None = None
    ingress_class: str | None = None
    ingress_tls: IngressTls | None = None
    license_token: pulumi.Input[str] | None = None  # secret
    sso: Sso | None = None
    ingress_source_ranges: tuple[str, ...] | None = None


def kubectl_command(name: str, script: str, kubeconfig: pulumi.Input[str], triggers: list, opts: pulumi.ResourceOptions) -> command.local.Command:
    """A command run with the host kubeconfig in $KUBECONFIG_DATA (a secret), never logging stdout."""
    return command.local.Command(
        name,
        create=script,
        environment={"KUBECONFIG_DATA": pulumi.Output.secret(kubeconfig)},
        triggers=triggers,
        logging=command.local.Logging.STDERR,
        opts=opts,
    )


def ingress_values(host: str, ingress_class: str, tls: IngressTls | None, source_ranges: tuple[str, ...] | None = None) -> dict:
    """The chart's `ingress` values (loft-sh/loft chart/templates/ingress.yaml at tag v4.11.2: the
    Ingress names `ingress.tls.secret` when `ingress.tls.enabled`, and carries
    `ingress.annotations`). cert-manager's ingress-shim issues the certificate of an Ingress
    annotated cert-manager.io/cluster-issuer into the Secret its tls section names
    (https://cert-manager.io/docs/usage/ingress/)."""
    ingress: dict = {"enabled": True, "host": host, "ingressClass": ingress_class}
    annotations: dict = {}
    if source_ranges:
        annotations[SOURCE_RANGE_ANNOTATION] = ",".join(source_ranges)
    if tls is None or not tls.enabled:
        ingress["tls"] = {"enabled": False}
    else:
        ingress["tls"] = {"enabled": True, "secret": tls.secret_name or INGRESS_TLS_SECRET}
        if tls.cluster_issuer:
            annotations["cert-manager.io/cluster-issuer"] = tls.cluster_issuer
    if annotations:
        ingress["annotations"] = annotations
    return ingress


class VClusterPlatform(pulumi.ComponentResource):
    namespace: k8s.core.v1.Namespace
    release: k8s.helm.v3.Release
    api_ready: command.local.Command
    admin_password: command.local.Command
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
        self.admin_password = kubectl_command(f"{name}-admin-password", ENSURE_ADMIN_PASSWORD, args.kubeconfig, [], in_namespace)
        secrets: list[pulumi.Resource] = [self.admin_password]

        values: dict = {
            "admin": {
                "create": True,
                "username": "admin",
                "passwordSecretRef": {"name": ADMIN_PASSWORD_SECRET, "key": ADMIN_PASSWORD_KEY},
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
        env_from: dict = {}
        if args.public_host and args.ingress_class:
            values["ingress"] = ingress_values(args.public_host, args.ingress_class, args.ingress_tls, args.ingress_source_ranges)
        if args.ingress_source_ranges:
            # The hosted loft.host domain would reach the UI around the Ingress and its ranges
            # (loft-sh/vcluster-docs platform_versioned_docs/version-4.11.0/install/helm.mdx, "Loft
            # Router": DISABLE_LOFT_ROUTER=true turns it off).
            values["env"] = {"DISABLE_LOFT_ROUTER": "true"}
        if args.sso is not None and args.public_host:
            values["config"]["auth"] = oidc_config(args.sso, args.public_host)
            env_from[OIDC_CLIENT_SECRET_ENV] = {"secretKeyRef": {"name": OIDC_SECRET, "key": OIDC_SECRET_KEY}}
            secrets.append(kubectl_command(f"{name}-oidc-secret", REQUIRE_OIDC_SECRET, args.kubeconfig, [], in_namespace))
        if args.license_token is not None:
            secrets.append(
                k8s.core.v1.Secret(
                    f"{name}-license",
                    metadata=k8s.meta.v1.ObjectMetaArgs(name=LICENSE_SECRET, namespace=PLATFORM_NAMESPACE),
                    string_data={"token": pulumi.Output.secret(args.license_token)},
                    opts=in_namespace,
                )
            )
            env_from["LICENSE_TOKEN"] = {"secretKeyRef": {"name": LICENSE_SECRET, "key": "token"}}
        if env_from:
            values["envValueFrom"] = env_from

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

        # Wait again whenever the platform is upgraded.
        self.api_ready = kubectl_command(
            f"{name}-api-ready", WAIT_FOR_API, args.kubeconfig, [self.release.version], pulumi.ResourceOptions(parent=self, depends_on=[self.release])
        )
        self.register_outputs({"namespace": PLATFORM_NAMESPACE, "release": self.release.name, "chartVersion": self.release.version})
