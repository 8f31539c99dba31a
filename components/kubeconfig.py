"""A kubeconfig for a GKE cluster that holds no credentials: kubectl and the Kubernetes provider
run `gke-gcloud-auth-plugin` to get a short-lived token from whoever runs Pulumi."""

from __future__ import annotations

from config import yaml_io


def gke_kubeconfig(name: str, endpoint: str, ca_certificate: str | None = None) -> str:
    """`endpoint` is a host name or IP. Without a CA certificate the server must present a publicly
    trusted certificate, as GKE's DNS-based control-plane endpoint does."""
    cluster: dict = {"server": f"https://{endpoint}"}
    if ca_certificate:
        cluster["certificate-authority-data"] = ca_certificate
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": cluster}],
        "users": [
            {
                "name": name,
                "user": {
                    "exec": {
                        "apiVersion": "client.authentication.k8s.io/v1beta1",
                        "command": "gke-gcloud-auth-plugin",
                        "installHint": "Install gke-gcloud-auth-plugin: gcloud components install gke-gcloud-auth-plugin",
                        "provideClusterInfo": True,
                        "interactiveMode": "IfAvailable",
                    }
                },
            }
        ],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
        "current-context": name,
    }
    return yaml_io.dump(document)
