"""The CrossGuard pack (policy/) as a whole: it passes every committed stack; it holds every policy
object, each at its level, with the program's runtime pins; and it really starts and answers the
engine's gRPC calls, deferring to `pulumi up` what is unknown during preview. Each policy on the
resources the real program registers and on violations: tests/test_policies_gke_iam.py and
tests/test_policies_tenancy.py.

Validators get their props through the SDK's own unknown-checking proxy, as under the CLI: a
read-only Mapping (not a dict) that raises UnknownValueError on values unknown during preview.
"""

from __future__ import annotations

import policies as P
from stack_records import load_records
import pytest
import yaml
from policy_support import (
    pack_copy_judging_the_shipped_stacks,
    analyze,
    analyze_remote,
    args_of,
    one,
    pack_stacks,
    requirement_pins,
    served_pack,
    violations,
)
from pulumi_policy import EnforcementLevel, ResourceValidationPolicy, StackValidationPolicy
from pulumi_policy.proxy import UNKNOWN_STRING_VALUE, UnknownValueError

from config.stack_files import PROJECT_DIR, list_stacks
from shipped_stacks import SHIPPED_DIR, SHIPPED_STACKS, checkout_is_as_shipped, committed_stacks

POLICY_DIR = PROJECT_DIR / "policy"


# --- The whole pack ------------------------------------------------------------------------------


# This checkout's stacks, and the shipped ones too where they differ (else those are the same runs).
EVERY_STACK = [*committed_stacks(), *([] if checkout_is_as_shipped() else [f"shipped/{s}" for s in SHIPPED_STACKS])]


@pytest.mark.parametrize("stack", EVERY_STACK)
def test_pack_passes_every_committed_stack(request, stack):
    """Every stack file of this checkout, the ones a user added as docs/teams.md says included."""
    shipped = stack.startswith("shipped/")
    run = request.getfixturevalue("runs" if shipped else "committed_runs")[stack.removeprefix("shipped/")]
    if shipped:
        found = analyze(run)
    else:
        # This checkout's stacks, by the records `make policy-data` wrote for them (policy/stacks/).
        with pack_stacks(load_records(POLICY_DIR / "stacks")):
            found = analyze(run)
    assert found == [], "\n".join(f"{level.value} {policy} on {resource}: {message}" for level, policy, resource, message in found)


def test_a_failing_pack_test_shows_the_whole_message(request):
    """pytest.ini's verbosity_assertions = 2: a failed assertion shows its values whole, never
    "...Full output truncated" or a repr cut off mid-word (pytest shortens both below 2)."""
    message = "gke-cluster (cluster 'gpu-prod'): " + "masterAuthorizedNetworksConfig.cidrBlocks[0].cidrBlock opens the control plane; " * 8
    assert request.config.get_verbosity(pytest.Config.VERBOSITY_ASSERTIONS) >= 2
    [explanation] = request.config.hook.pytest_assertrepr_compare(config=request.config, op="==", left=[("mandatory", message)], right=[])
    assert any(message in line for line in explanation), explanation


def test_every_shipped_stack_file_is_checked(runs):
    """The tests below that name stacks run on the shipped ones; each of those is evaluated."""
    assert sorted(runs) == list_stacks(SHIPPED_DIR)


def test_committed_stacks_contain_what_the_pack_checks(runs):
    """Guards the test above against passing because a resource type disappeared or was renamed."""
    types = {r.type for run in runs.values() for r in run.registrations}
    expected = {
        P.GKE_CLUSTER,
        P.GKE_NODE_POOL,
        "gcp:projects/iAMMember:IAMMember",
        "gcp:serviceaccount/iAMMember:IAMMember",
        P.CUSTOM_ROLES[0],
        P.HELM_RELEASES[0],
        P.NODE_PROVIDER,
        P.VIRTUAL_CLUSTER_INSTANCE,
    }
    assert expected <= types


def test_every_policy_object_is_in_the_pack():
    defined = [v for v in vars(P).values() if isinstance(v, (ResourceValidationPolicy, StackValidationPolicy))]
    assert {id(p) for p in defined} == {id(p) for p in P.POLICIES}
    names = [p.name for p in P.POLICIES]
    assert len(names) == len(set(names))


def test_enforcement_levels():
    levels = {p.name: p.enforcement_level for p in P.POLICIES}
    assert levels.pop(P.GPU_CEILING_NON_PROD) == EnforcementLevel.ADVISORY
    assert levels.pop(P.public_ranges_nonprod.name) == EnforcementLevel.ADVISORY
    assert set(levels.values()) == {EnforcementLevel.MANDATORY}


def test_pack_runtime_pins_match_the_program():
    pack, program = requirement_pins(POLICY_DIR / "requirements.txt"), {**requirement_pins(PROJECT_DIR / "requirements.txt"), **requirement_pins(PROJECT_DIR / "requirements-dev.txt")}
    assert set(pack) == {"pulumi-policy", "pulumi", "pyyaml"}
    assert {name: program.get(name) for name in pack} == pack


def test_policy_pack_project_file():
    project = yaml.safe_load((POLICY_DIR / "PulumiPolicy.yaml").read_text())
    assert project["runtime"]["name"] == "python"
    assert project["runtime"]["options"]["virtualenv"]
    assert project["version"] and project["description"]


# --- The pack as the CLI runs it -----------------------------------------------------------------


def test_pack_serves_the_policies_over_grpc(runs, tmp_path, shipped_records_dir):
    """Starts policy/ the way the CLI's Python analyzer does and talks to it: proves the imports
    resolve from policy/, the pack lists every policy with its level, and the SDK's own servicer
    applies config and levels."""
    from google.protobuf import empty_pb2
    from pulumi.runtime.proto import analyzer_pb2

    with served_pack(pack_copy_judging_the_shipped_stacks(tmp_path, shipped_records_dir), cwd=tmp_path) as analyzer:
        info = analyzer.GetAnalyzerInfo(empty_pb2.Empty(), timeout=30)
        served = {p.name: p.enforcementLevel for p in info.policies}
        assert served == {
            p.name: analyzer_pb2.ADVISORY if p.enforcement_level == EnforcementLevel.ADVISORY else analyzer_pb2.MANDATORY
            for p in P.POLICIES
        }
        run, instance = one(runs, "team-vision-dev", P.VIRTUAL_CLUSTER_INSTANCE)

        def remote():
            return analyze_remote(analyzer, instance.type, instance.plain_inputs, instance.urn, instance.name)

        assert [d.message for d in remote()] == []  # each violation by its message, whole
        config = analyzer_pb2.PolicyConfig(enforcementLevel=analyzer_pb2.ADVISORY)
        config.properties.update({P.MAX_GPUS_CONFIG: 5})
        analyzer.Configure(analyzer_pb2.ConfigureAnalyzerRequest(policyConfig={P.GPU_CEILING_NON_PROD: config}), timeout=30)
        [diagnostic] = remote()
        assert diagnostic.policyName == P.GPU_CEILING_NON_PROD
        assert diagnostic.enforcementLevel == analyzer_pb2.ADVISORY
        assert "the tenant's GPU limit is 6" in diagnostic.message and "at most 5" in diagnostic.message


def test_an_unknown_member_defers_the_iam_policies(runs):
    """A new service account's e-mail is unknown during the first preview: the grant is checked
    during `pulumi up`, never waved through."""
    run, reg = one(runs, "dev", "gcp:projects/iAMMember:IAMMember", "tenant-nlp-project-platform-vm-role")
    props = {**reg.plain_inputs, "member": UNKNOWN_STRING_VALUE}
    for policy in (P.grant_allow_list, P.workload_identity_members, P.conditioned_grants):
        with pytest.raises(UnknownValueError):
            violations(policy, args_of(run, reg, props=props))


def test_a_name_unknown_during_preview_does_not_defer_a_policy(runs):
    """Naming the resource reads fields no check needs (here the account a grant is bound on, the
    e-mail of an account created in the same update): unknown, they are named so, not waited for."""
    run, reg = one(runs, "dev", "gcp:serviceaccount/iAMMember:IAMMember", "workload-identity")
    props = {**reg.plain_inputs, "serviceAccountId": UNKNOWN_STRING_VALUE, "member": "allUsers"}
    [message] = violations(P.workload_identity_members, args_of(run, reg, props=props))
    assert message.startswith("auto-nodes-workload-identity (on service account (known after apply)): member: 'allUsers' is not allowed")
