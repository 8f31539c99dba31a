"""The kubeconfigs the program hands over: to kubectl in its local commands' environment, and to the
Kubernetes provider. Both run on the deployer's machine with the deployer's credentials, and both
run whatever a kubeconfig's user `exec` names, so a kubeconfig is code. Each is compared with the
form components/kubeconfig.py writes (program_data.json `inventory.kubeconfigs`, read from the
program's runs): no field it does not write (no `auth-provider`, token, key or certificate file,
`proxy-url`, `insecure-skip-tls-verify`), every user's exec plugin exactly its own
(`gke-gcloud-auth-plugin`, no arguments, no environment), and every server the DNS endpoint of
the stack's host cluster.

GKE names that endpoint `<uid>.<location>.gke.goog` when it creates the cluster (the GKE API,
`ControlPlaneEndpointsConfig.DNSEndpointConfig.endpoint`: "A DNS format address … Ex:
uid.us-central1.gke.goog", https://cloud.google.com/kubernetes-engine/docs/reference/rest/v1/projects.locations.clusters#dnsendpointconfig),
so the uid is the cloud's and the pack holds the rest: the domain and the location of the stack's
host cluster. A kubeconfig still unknown during preview (a cluster not yet created) defers this
resource check to `pulumi up`, which runs it on the provider's inputs before the command runs or
the provider connects.

Another cluster of the same location has the same form, so a stack policy holds every Kubernetes
provider of a stack to its own host cluster exactly: the endpoint of the GKE cluster resource of
the stack's record in the same stack (an environment stack), or the kubeconfig its environment
exports through the StackReference the record names (a team stack). The engine hands stack
policies each resource's outputs, read resources such as a StackReference included (pulumi/pulumi
pkg/resource/deploy/step_generator.go AnalyzeResources, step_executor.go, commit
1b5949891b3cefcb9974752b24a5ecef0acc86c8), and runs them after the resources' steps: at preview on
the planned outputs, at `pulumi up` after the update. What it judges when:

- **The host cluster's endpoint known** (an existing cluster; always, for a team stack, whose
  StackReference is read at preview): every provider is judged at preview, before anything
  changes. The program writes every kubeconfig of the stack from that endpoint alone
  (components/kubeconfig.py `gke_kubeconfig`, components/gke_cluster.py), so its kubeconfig is
  known too; a provider whose kubeconfig is unknown then is derived from something else (a cluster
  the same update would create) and is refused at preview, fail closed, instead of being judged
  only after `pulumi up` has used it.
- **The endpoint unknown** (the preview that creates the cluster, an environment's first): the
  whole check waits for `pulumi up`, which judges it after the update, as
  vcluster-control-plane-nat-addresses does (docs/guardrails.md "Addresses known at `pulumi up`");
  until then kubernetes-providers-by-design holds each provider to the cluster's domain and location.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from kubernetes_reader import entries, read_kubeconfig
from pulumi_policy import EnforcementLevel, ReportViolation, ResourceValidationArgs, Severity, StackValidationArgs, StackValidationPolicy
from pulumi_policy.proxy import UnknownValueError

from .common import GKE_CLUSTER, INVENTORY, KUBERNETES_PROVIDER, ResourcePolicy, described, get, project_of, show, stack_data, stack_of, unknown_stack

GKE_DNS_DOMAIN = "gke.goog"
_SERVER = re.compile(r"^https://[a-z0-9]([a-z0-9-]*[a-z0-9])?\.(?P<location>[a-z0-9-]+)\." + re.escape(GKE_DNS_DOMAIN) + "$")
BUILDER = "components/kubeconfig.py"
# Why a user field the program never writes matters (client-go's AuthInfo).
_USER_FIELDS = {
    "auth-provider": "a plugin of kubectl's own, run with its config",
    "token": "a credential of someone else's",
    "tokenFile": "a file of the deployer's machine",
    "client-certificate": "a file of the deployer's machine",
    "client-key": "a file of the deployer's machine",
    "client-certificate-data": "a credential of someone else's",
    "client-key-data": "a credential of someone else's",
    "username": "a credential of someone else's",
    "password": "a credential of someone else's",
    "as": "impersonation",
    "as-groups": "impersonation",
    "as-uid": "impersonation",
    "as-user-extra": "impersonation",
}
_CLUSTER_FIELDS = {
    "proxy-url": "every request, the deployer's token included, through another host",
    "insecure-skip-tls-verify": "any server would do",
    "certificate-authority": "a file of the deployer's machine",
    "certificate-authority-data": "a certificate authority of its own, so a server of its choosing",
    "tls-server-name": "another name the server's certificate may carry",
}
# An exec plugin's fields, in the order a reader looks at them first.
_EXEC_ORDER = ("command", "args", "env", "apiVersion", "provideClusterInfo", "interactiveMode", "installHint")


def form_of(urn: str) -> Mapping[str, Any]:
    """The kubeconfig form the program writes, for the URN's project (none: nothing is allowed)."""
    return (INVENTORY.get(project_of(urn)) or {}).get("kubeconfigs") or {"keys": [], "clusterKeys": [], "userKeys": [], "contextKeys": [], "exec": []}


def _allowed_exec(form: Mapping[str, Any]) -> str:
    described = []
    for e in form["exec"]:
        extra = ", ".join(f"{k} {show(e[k])}" for k in ("args", "env") if e.get(k))
        described.append(f"command {show(e.get('command'))} with {extra or 'no args or env'}")
    return f"{' or '.join(described) or 'none'}, exactly as {BUILDER} writes it"


def _exec_difference(found: Any, form: Mapping[str, Any]) -> str:
    """The fields of `found` that differ from the program's exec plugin."""
    if not isinstance(found, Mapping):
        return show(found)
    reference = form["exec"][0] if form["exec"] else {}
    keys = sorted(set(found) | set(reference), key=lambda k: (_EXEC_ORDER.index(k) if k in _EXEC_ORDER else len(_EXEC_ORDER), str(k)))
    return ", ".join(f"{k} {show(found.get(k))}" for k in keys if found.get(k) != reference.get(k)) or "its fields"


def _server_problem(server: Any, urn: str) -> str | None:
    stack = stack_data(urn)
    if stack is None:
        return unknown_stack(urn)
    cluster = stack.get("hostCluster") or ""
    location = cluster.split("/locations/", 1)[-1].split("/", 1)[0] if "/locations/" in cluster else None
    matched = _SERVER.match(server) if isinstance(server, str) else None
    if matched and location and matched.group("location") == location:
        return None
    return (
        f"{show(server)} is not the DNS endpoint of the stack's host cluster; allowed: https://<uid>.{location or '<location>'}.{GKE_DNS_DOMAIN}, "
        f"the endpoint GKE gives {cluster or 'the host cluster'} (it assigns the uid when it creates the cluster, so the pack holds the domain "
        "and the location; a kubeconfig still unknown during preview is checked during `pulumi up`, before it is used)"
    )


def _extra_fields(where: str, body: Mapping[str, Any], allowed: list[str], why: Mapping[str, str] | None = None) -> list[str]:
    """One message per field of `body` the program never writes there."""
    notes = why or {}
    return [
        f"{where}{key}: is not a field gpu-platform writes{f' ({notes[key]})' if key in notes else ''}; allowed: {', '.join(allowed) or 'none'}"
        for key in body
        if key not in allowed
    ]


def problems(value: Any, urn: str) -> list[str]:
    """`<path>: <what is wrong>; allowed: …` for each way `value` differs from the kubeconfig the
    program writes for the stack of `urn`."""
    form = form_of(urn)
    document, problem = read_kubeconfig(value)
    if document is None:
        return [f"{problem}; allowed: the kubeconfig {BUILDER} writes for the stack's host cluster"]
    found = _extra_fields("", document, form["keys"])
    for i, name, cluster in entries(document, "clusters"):
        where = f"clusters[{i}] ({show(name)}).cluster."
        found += _extra_fields(where, cluster, form["clusterKeys"], _CLUSTER_FIELDS)
        server = _server_problem(cluster.get("server"), urn)
        if server:
            found.append(f"{where}server: {server}")
    for i, name, user in entries(document, "users"):
        where = f"users[{i}] ({show(name)}).user."
        found += _extra_fields(where, user, form["userKeys"], _USER_FIELDS)
        if user.get("exec") not in form["exec"]:
            found.append(
                f"{where}exec: {_exec_difference(user.get('exec'), form)} is not the exec plugin gpu-platform writes (kubectl and the "
                f"Kubernetes provider run it on the deployer's machine, with the deployer's credentials); allowed: {_allowed_exec(form)}"
            )
    for i, name, context in entries(document, "contexts"):
        found += _extra_fields(f"contexts[{i}] ({show(name)}).context.", context, form["contextKeys"])
    return found


def validate_kubernetes_providers(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    if args.resource_type != KUBERNETES_PROVIDER:
        return
    if "kubeconfig" not in args.props:
        report_violation(
            "kubeconfig: not set (the provider would use the deployer's own kubeconfig: whatever cluster, credentials and exec plugins it "
            f"names); allowed: the kubeconfig {BUILDER} writes for the stack's host cluster",
            None,
        )
        return
    for problem in problems(args.props["kubeconfig"], args.urn):
        report_violation(f"kubeconfig: {problem}", None)


kubernetes_providers_by_design = ResourcePolicy(
    name="kubernetes-providers-by-design",
    description=(
        "A Kubernetes provider's kubeconfig is the one the program writes: the stack's host cluster's DNS endpoint, every user's exec "
        "plugin gke-gcloud-auth-plugin exactly as written (no other command, auth-provider, token or key file, proxy)."
    ),
    validate=validate_kubernetes_providers,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.CRITICAL,
)

STACK_REFERENCE = "pulumi:pulumi:StackReference"


def servers(kubeconfig: Any) -> list[Any]:
    """The server of each cluster entry of a kubeconfig ([] for one that cannot be read)."""
    document, _ = read_kubeconfig(kubeconfig)
    return [cluster.get("server") for _, _, cluster in entries(document, "clusters")] if document is not None else []


def _host_endpoint(args: StackValidationArgs, stack: Mapping[str, Any]) -> tuple[str | None, str]:
    """The server the stack's Kubernetes providers must name, and where it comes from."""
    reference = stack.get("environmentStackReference")
    if reference:
        where = f"the kubeconfig environment stack {reference} exports (its StackReference in this stack)"
        for r in args.resources:
            if r.resource_type == STACK_REFERENCE and get(r.props, "name") == reference:
                found = servers(get(r.props, "outputs", "kubeconfig"))
                return (found[0] if len(found) == 1 else None), where
        return None, where
    cluster = re.fullmatch(r"projects/([^/]+)/locations/([^/]+)/clusters/([^/]+)", stack.get("hostCluster") or "")
    project, location, name = cluster.groups() if cluster else (None, None, None)
    where = f"the DNS endpoint of the stack's host cluster {stack.get('hostCluster')} (its GKE cluster resource in this stack)"
    for r in args.resources:
        if r.resource_type == GKE_CLUSTER and (get(r.props, "project"), get(r.props, "location"), get(r.props, "name")) == (project, location, name):
            endpoint = get(r.props, "controlPlaneEndpointsConfig", "dnsEndpointConfig", "endpoint")
            return (f"https://{endpoint}" if endpoint else None), where
    return None, where


def validate_own_cluster(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    """Every Kubernetes provider of a stack names its own host cluster's endpoint, exactly."""
    providers = [r for r in args.resources if r.resource_type == KUBERNETES_PROVIDER]
    if not providers:
        return
    stack = stack_data(providers[0].urn)
    if stack is None:
        return  # kubernetes-providers-by-design reports it for each provider
    # The endpoint unknown (the preview that creates the cluster) raises UnknownValueError: the whole
    # check runs at `pulumi up`. Known, every provider is judged now (the module's docstring).
    wanted, where = _host_endpoint(args, stack)
    allowed = show(wanted) if wanted else f"the endpoint of {where}, which is not in stack {stack_of(providers[0].urn)}"
    for provider in providers:
        try:
            found = servers(get(provider.props, "kubeconfig"))
        except UnknownValueError:
            report_violation(
                f"{described(provider)}: kubeconfig: known only after apply, while the stack's host cluster is known at preview: every "
                "kubeconfig gpu-platform writes is made from that cluster's endpoint alone, so this one names something the update "
                f"would create, and would be used before it could be judged; allowed: exactly {allowed}, {where}",
                provider.urn,
            )
            continue
        for i, server in enumerate(found):
            if wanted is None or server != wanted:
                report_violation(
                    f"{described(provider)}: kubeconfig: clusters[{i}].cluster.server: {show(server)} is not the stack's own host cluster; "
                    f"allowed: exactly {allowed}, {where}",
                    provider.urn,
                )


kubernetes_providers_own_cluster = StackValidationPolicy(
    name="kubernetes-providers-own-cluster",
    description=(
        "Every Kubernetes provider of a stack names exactly its own host cluster: the endpoint of the stack's GKE cluster, or the "
        "kubeconfig its environment stack exports (a team stack), never another cluster of the same location."
    ),
    validate=validate_own_cluster,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.CRITICAL,
)

POLICIES = [kubernetes_providers_by_design, kubernetes_providers_own_cluster]
