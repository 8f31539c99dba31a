"""Entry point the Pulumi CLI runs (`pulumi preview --policy-pack policy`). Constructing the PolicyPack
starts the analyzer's gRPC server and blocks forever: keep everything else in policies.py."""

from pulumi_policy import EnforcementLevel, PolicyPack

from policies import POLICIES

PolicyPack(
    name="gpu-platform-guardrails",
    description="Guardrails of the GPU tenancy platform: hardened GKE, least-privilege IAM, pinned supply chain, isolated tenants, GPU ceilings.",
    enforcement_level=EnforcementLevel.MANDATORY,
    policies=POLICIES,
)
