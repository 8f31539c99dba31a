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
host cluster. A kubeconfig still unknown during preview (a cluster not yet created) defers the
check to `pulumi up`, which runs it before the command runs or the provider connects.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from kubernetes_reader import entries, read_kubeconfig
from pulumi_policy import EnforcementLevel, ReportViolation, ResourceValidationArgs, Severity

from .common import INVENTORY, ResourcePolicy, project_of, show, stack_data, unknown_stack

KUBERNETES_PROVIDER = "pulumi:providers:kubernetes"
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

POLICIES = [kubernetes_providers_by_design]
