"""VClusterPlatform: the vCluster Platform Helm release, closed by default (the vendor's hosted
router off; publicHost behind a LoadBalancer that admits its source ranges only), its admin
password created inside the cluster (never a Pulumi secret), its license in a Kubernetes Secret
(never in Helm values), single sign-on through the platform's OIDC connector, the CI drift
identity's read access to the Secrets of its namespace only, and a wait until its management API
answers. Who reaches what, and the upstream sources: config/platform_access.py."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_command as command
import pulumi_kubernetes as k8s

from config import versions
from config.facts import PROJECT_NAMESPACE_PREFIX
from config.platform_access import (
    ADMIN_PASSWORD_KEY,
    ADMIN_PASSWORD_SECRET,
    OIDC_CLIENT_SECRET_ENV,
    OIDC_SECRET,
    OIDC_SECRET_KEY,
    PUBLIC_SERVICE,
    TLS_SECRET,
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


# With platform.tls the chart points the platform pod's PROXY_TLS_CERT/KEY at that Secret's
# tls.crt and tls.key (loft-sh/loft tag v4.11.2 chart/templates/deployment.yaml, values.yaml `tls`:
# "Make sure the secret exists prior to deploying loft, otherwise the loft pod will not be able to
# start"), so `pulumi up` stops first, saying what to create.
REQUIRE_TLS_SECRET = f"""set -eu
kubeconfig=$(mktemp)
trap 'rm -f "$kubeconfig"' EXIT
printf '%s' "$KUBECONFIG_DATA" > "$kubeconfig"
for key in tls.crt tls.key; do
  if ! kubectl --kubeconfig "$kubeconfig" -n {PLATFORM_NAMESPACE} get secret {TLS_SECRET} -o go-template="{{{{index .data \\"$key\\"}}}}" | grep -q .; then
    echo "platform.tls: Secret {TLS_SECRET} with key $key is missing in namespace {PLATFORM_NAMESPACE}; create it with" >&2
    echo "  kubectl -n {PLATFORM_NAMESPACE} create secret tls {TLS_SECRET} --cert=<publicHost's certificate chain> --key=<its key>" >&2
    exit 1
  fi
done
"""

# The platform pod's HTTPS port and labels (loft-sh/loft tag v4.11.2 chart/templates/service.yaml:
# port 443 to targetPort 10443; deployment.yaml: pods labelled app: loft, release: <release>).
PLATFORM_HTTPS_PORT = 10443
RELEASE_NAME = "vcluster-platform"
PLATFORM_POD_LABELS = {"app": "loft", "release": RELEASE_NAME}
# The CI drift identity reads the Secrets of the platform's namespace (a refresh reads the license
# Secret and Helm's release records, Secrets of the release's namespace), nothing else: GKE
# authorizes a request if either IAM or Kubernetes RBAC allows it, and maps a Google service
# account to the RBAC user named by its e-mail (https://cloud.google.com/kubernetes-engine/docs/how-to/role-based-access-control,
# "Define and assign permissions": a subject of kind User named by the IAM service account's e-mail).
SECRETS_READER = "gpu-platform-ci-secrets-reader"
SECRETS_READER_VERBS = ("get", "list")


@dataclass(frozen=True)
class VClusterPlatformArgs:
    chart_version: str
    service_account_email: pulumi.Input[str]  # the AutoNodesIdentity's Google service account
    kubeconfig: pulumi.Input[str]  # secret; used only by the kubectl commands
    public_host: str | None = None
    public_source_ranges: tuple[str, ...] | None = None
    tls: bool = False
    hosted_router: bool = False
    license_token: pulumi.Input[str] | None = None  # secret
    sso: Sso | None = None
    ci_secret_readers: tuple[str, ...] = ()  # Google service accounts (e-mails) that may read the namespace's Secrets


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


def public_service(name: str, ranges: tuple[str, ...], opts: pulumi.ResourceOptions) -> k8s.core.v1.Service:
    """publicHost's way in: GKE's external passthrough load balancer on port 443, to the platform
    pod's own HTTPS port (TLS ends in the pod), admitting `ranges` only: GKE makes the VPC firewall
    rules of a LoadBalancer Service from its loadBalancerSourceRanges ("LoadBalancer Service
    parameters", https://cloud.google.com/kubernetes-engine/docs/concepts/service-load-balancer-parameters),
    and a passthrough load balancer keeps the client's address for them to judge."""
    return k8s.core.v1.Service(
        name,
        metadata=k8s.meta.v1.ObjectMetaArgs(name=PUBLIC_SERVICE, namespace=PLATFORM_NAMESPACE, labels={"app.kubernetes.io/part-of": "gpu-platform"}),
        spec=k8s.core.v1.ServiceSpecArgs(
            type="LoadBalancer",
            selector=PLATFORM_POD_LABELS,
            ports=[k8s.core.v1.ServicePortArgs(name="https", port=443, target_port=PLATFORM_HTTPS_PORT, protocol="TCP")],
            load_balancer_source_ranges=list(ranges),
        ),
        opts=opts,
    )


def ci_secrets_reader(name: str, readers: tuple[str, ...], opts: pulumi.ResourceOptions) -> list[pulumi.Resource]:
    """A Role that reads the Secrets of the platform's namespace, bound to `readers` (Google service
    accounts, as GKE names them to RBAC): a Role and RoleBinding, never a cluster-wide grant."""
    role = k8s.rbac.v1.Role(
        f"{name}-ci-secrets-reader",
        metadata=k8s.meta.v1.ObjectMetaArgs(name=SECRETS_READER, namespace=PLATFORM_NAMESPACE),
        rules=[k8s.rbac.v1.PolicyRuleArgs(api_groups=[""], resources=["secrets"], verbs=list(SECRETS_READER_VERBS))],
        opts=opts,
    )
    binding = k8s.rbac.v1.RoleBinding(
        f"{name}-ci-secrets-reader-binding",
        metadata=k8s.meta.v1.ObjectMetaArgs(name=SECRETS_READER, namespace=PLATFORM_NAMESPACE),
        role_ref=k8s.rbac.v1.RoleRefArgs(api_group="rbac.authorization.k8s.io", kind="Role", name=SECRETS_READER),
        subjects=[k8s.rbac.v1.SubjectArgs(api_group="rbac.authorization.k8s.io", kind="User", name=reader) for reader in readers],
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[role])),
    )
    return [role, binding]


class VClusterPlatform(pulumi.ComponentResource):
    namespace: k8s.core.v1.Namespace
    release: k8s.helm.v3.Release
    api_ready: command.local.Command
    admin_password: command.local.Command
    public_service: k8s.core.v1.Service | None
    ci_secrets_reader: list[pulumi.Resource]
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
        self.ci_secrets_reader = []

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
        if not args.hosted_router:
            # Off unless a stack turns it on by name (config/platform_access.py).
            values["env"] = {"DISABLE_LOFT_ROUTER": "true"}
        env_from: dict = {}
        if args.tls:
            values["tls"] = {"enabled": True, "secret": TLS_SECRET}
            secrets.append(kubectl_command(f"{name}-tls-secret", REQUIRE_TLS_SECRET, args.kubeconfig, [], in_namespace))
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

        if args.ci_secret_readers:
            self.ci_secrets_reader = ci_secrets_reader(name, args.ci_secret_readers, in_namespace)

        self.release = k8s.helm.v3.Release(
            f"{name}-release",
            name=RELEASE_NAME,
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

        self.public_service = (
            public_service(f"{name}-public", args.public_source_ranges, pulumi.ResourceOptions(parent=self, depends_on=[self.release]))
            if args.public_source_ranges
            else None
        )

        # Wait again whenever the platform is upgraded.
        self.api_ready = kubectl_command(
            f"{name}-api-ready", WAIT_FOR_API, args.kubeconfig, [self.release.version], pulumi.ResourceOptions(parent=self, depends_on=[self.release])
        )
        self.register_outputs({"namespace": PLATFORM_NAMESPACE, "release": self.release.name, "chartVersion": self.release.version})
