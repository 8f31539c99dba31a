"""Entry point the Pulumi CLI runs (`pulumi preview --policy-pack policy`, or Pulumi Cloud for a
published pack). Constructing the PolicyPack starts the analyzer's gRPC server and blocks forever:
keep everything else in policies.py. The CLI runs this file with policy/ on sys.path, which is how
`policies`, `guardrails` and `vcluster_reader` are found."""

from pulumi_policy import EnforcementLevel, PolicyPack

from policies import POLICIES

PolicyPack(
    name="gpu-platform-guardrails",
    description="Guardrails of the GPU tenancy platform: hardened private GKE, IAM grants by design, pinned supply chain, isolated tenants, GPU ceilings.",
    enforcement_level=EnforcementLevel.MANDATORY,
    policies=POLICIES,
)
