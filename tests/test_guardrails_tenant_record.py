"""Each tenant's record in the pack's data (program_data.json `stacks.<stack>.tenants`) as the pack
holds its platform objects to it, probe by probe: who reaches the tenant (its Project's members,
clusters and node types, its instance's access rules), where it runs (its platform project
namespace, host namespace, network, subnet and node account), and which addresses its control
plane admits (the host's ranges and its own NAT addresses). Each probe breaks one field of a
resource the real program registers and shows the pack's MANDATORY rejection, whose message names
the resource."""

from __future__ import annotations

import copy

import policies as P
import pytest
import yaml
from policy_support import args_of, edit_values, one, only, policy_resource, rejected, reports, stack_args
from pulumi_policy import StackValidationArgs
from pulumi_policy.proxy import UNKNOWN_STRING_VALUE, UnknownValueError

from shipped_stacks import shipped_values

VCI = P.VIRTUAL_CLUSTER_INSTANCE
ADDRESS = "gcp:compute/address:Address"
FIELD = "spec.template.helmRelease.values"
NLP = "tenant-nlp-instance (instance 'p-nlp/nlp')"
RANGES = f"{FIELD} controlPlane.service.spec.loadBalancerSourceRanges"


def names(found: list[tuple[str, str]]) -> set[str]:
    return {name for name, _ in found}


def properties(document: dict) -> dict:
    return document["privateNodes"]["autoNodes"][0]["properties"]


def ranges(document: dict) -> list[str]:
    return document["controlPlane"]["service"]["spec"]["loadBalancerSourceRanges"]


# --- Who reaches a tenant ---------------------------------------------------------------------------------


def test_the_record_gives_each_tenant_exactly_its_configured_users_and_teams(runs):
    """The record is the program's objects for the tenant's `access` config; the committed objects pass."""
    for stack in runs:
        configured = shipped_values(stack).get("gpu-platform:tenants") or [shipped_values(stack).get("gpu-platform:tenant")]
        for tenant in configured:
            access = P.STACKS[stack]["tenants"][tenant["name"]]["platformAccess"]
            users, teams = tenant["access"].get("users", []), tenant["access"].get("teams", [])
            members = [(m["kind"], m["name"], m["clusterRole"]) for m in access["project"]["members"]]
            assert members == [("User", u, "loft-management-project-viewer") for u in users] + [("Team", t, "loft-management-project-viewer") for t in teams]
            [rule] = access["instance"]["access"]
            [in_cluster] = access["instance"]["template.access"]["rules"]
            for found in (rule, in_cluster):
                assert (found.get("users", []), found.get("teams", [])) == (users, teams)
            assert access["instance"]["extraAccessRules"] is None
    for stack, run in runs.items():
        for typ in (P.PLATFORM_PROJECT, VCI):
            for reg in run.of_type(typ):
                assert P.platform_access_by_design.name not in names(rejected(args_of(run, reg))), reg.name


ALLOWED_ACCESS = "[{'teams': ['nlp'], 'verbs': ['get', 'use'], 'name': 'team'}]"
ALLOWED_RULES = "{'rules': [{'clusterRole': 'cluster-admin', 'teams': ['nlp']}]}"


@pytest.mark.parametrize(
    "edit, message",
    [
        # cluster-admin inside the tenant for everyone, beside the program's rules.
        (
            lambda s: s.update(extraAccessRules=[{"users": ["*"], "teams": ["*"], "clusterRole": "cluster-admin"}]),
            "spec.extraAccessRules: [{'users': ['*'], 'teams': ['*'], 'clusterRole': 'cluster-admin'}] is not what gpu-platform writes for "
            "tenant nlp of stack dev; allowed: not set (gpu-platform grants no access beyond spec.access and spec.template.access)",
        ),
        # The in-tenant cluster-admin grant for every user.
        (
            lambda s: s["template"]["access"]["rules"][0].update(users=["*"]),
            "spec.template.access: {'rules': [{'clusterRole': 'cluster-admin', 'teams': ['nlp'], 'users': ['*']}]} is not what gpu-platform "
            f"writes for tenant nlp of stack dev; allowed: exactly {ALLOWED_RULES} (cluster-admin inside the virtual cluster for the "
            "tenant's access.users and access.teams only)",
        ),
        (
            lambda s: s["access"][0].update(users=["*"]),
            "spec.access: [{'teams': ['nlp'], 'verbs': ['get', 'use'], 'name': 'team', 'users': ['*']}] is not what gpu-platform writes for "
            f"tenant nlp of stack dev; allowed: exactly {ALLOWED_ACCESS} (get and use of the instance for the tenant's access.users and access.teams)",
        ),
        # Another team connects to nlp's cluster.
        (
            lambda s: s["access"][0].update(teams=["speech"]),
            "spec.access: [{'teams': ['speech'], 'verbs': ['get', 'use'], 'name': 'team'}] is not what gpu-platform writes for tenant nlp "
            f"of stack dev; allowed: exactly {ALLOWED_ACCESS}",
        ),
    ],
)
def test_an_instance_reachable_by_others_than_its_team_is_rejected(runs, edit, message):
    run, reg = one(runs, "dev", VCI, "nlp")
    props = copy.deepcopy(reg.plain_inputs)
    edit(props["spec"])
    assert only(rejected(args_of(run, reg, props=props)), P.platform_access_by_design).startswith(f"{NLP}: {message}")


@pytest.mark.parametrize(
    "edit, message",
    [
        (
            lambda s: s["members"].append({"kind": "Team", "name": "speech", "clusterRole": "loft-management-project-viewer"}),
            "spec.members: [{'group': 'storage.loft.sh', 'clusterRole': 'loft-management-project-viewer', 'kind': 'Team', 'name': 'nlp'}, "
            "{'kind': 'Team', 'name': 'speech', 'clusterRole': 'loft-management-project-viewer'}] is not what gpu-platform writes for tenant "
            "nlp of stack dev; allowed: exactly [{'group': 'storage.loft.sh', 'clusterRole': 'loft-management-project-viewer', 'kind': 'Team', "
            "'name': 'nlp'}] (the tenant's access.users and access.teams, as project viewers)",
        ),
        (
            lambda s: s.update(allowedClusters=[{"name": "*"}]),
            "spec.allowedClusters: [{'name': '*'}] is not what gpu-platform writes for tenant nlp of stack dev; allowed: exactly "
            "[{'name': 'loft-cluster'}] (the platform's own cluster only)",
        ),
    ],
)
def test_a_project_open_to_others_than_its_team_is_rejected(runs, edit, message):
    run, reg = one(runs, "dev", P.PLATFORM_PROJECT, "nlp")
    props = copy.deepcopy(reg.plain_inputs)
    edit(props["spec"])
    found = rejected(args_of(run, reg, props=props))
    assert only(found, P.platform_access_by_design) == f"tenant-nlp-platform-project (platform project 'nlp'): {message}"


def test_a_project_of_no_recorded_tenant_is_rejected(runs):
    run, reg = one(runs, "dev", P.PLATFORM_PROJECT, "nlp")
    props = copy.deepcopy(reg.plain_inputs)
    props["metadata"]["name"] = "audio"
    assert only(rejected(args_of(run, reg, props=props)), P.platform_access_by_design) == (
        "tenant-nlp-platform-project (platform project 'audio'): metadata.name: tenant 'audio' is not a tenant of stack dev in the pack's data; "
        "allowed: nlp, speech (a new tenant flows in with make policy-data)"
    )


# --- Where a tenant runs -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "namespace, why",
    [
        ("vcluster-platform", "the platform's own namespace"),
        ("vcluster-speech", "another tenant's host namespace"),
    ],
)
def test_a_control_plane_outside_its_own_host_namespace_is_rejected(runs, namespace, why):
    """Outside its namespace the tenant's backup plan (which selects vcluster-nlp) misses it, and
    two control planes would share one."""
    run, reg = one(runs, "dev", VCI, "nlp")
    props = copy.deepcopy(reg.plain_inputs)
    props["spec"]["clusterRef"]["namespace"] = namespace
    assert only(rejected(args_of(run, reg, props=props)), P.tenant_placement_by_design) == (
        f"{NLP}: spec.clusterRef.namespace: {namespace!r} is not the host namespace of tenant nlp of stack dev; allowed: 'vcluster-nlp' "
        "(the tenant's backup plan selects that one, and no two control planes share one)"
    ), why


def test_an_instance_in_another_teams_platform_project_is_rejected(runs):
    run, reg = one(runs, "dev", VCI, "nlp")
    props = copy.deepcopy(reg.plain_inputs)
    props["metadata"]["namespace"] = "p-speech"
    assert only(rejected(args_of(run, reg, props=props)), P.tenant_placement_by_design) == (
        "tenant-nlp-instance (instance 'p-speech/nlp'): metadata.namespace: 'p-speech' is not the platform project namespace of tenant nlp "
        "of stack dev; allowed: 'p-nlp' (another team's project would give that team its instance)"
    )


def test_vms_in_another_tenants_network_as_its_identity_are_rejected(runs):
    """nlp's VMs as speech's node account, in speech's network and subnet (both tenants share dev's project)."""
    run, reg = one(runs, "dev", VCI, "nlp")

    def edit(document):
        for key in ("gpu-platform/node-service-account", "gpu-platform/subnetwork", "gpu-platform/network"):
            properties(document)[key] = "dev-speech-nodes"

    found = [m for name, m in rejected(args_of(run, reg, props=edit_values(reg.plain_inputs, edit))) if name == P.tenant_placement_by_design.name]
    where = f'{NLP}: {FIELD} privateNodes.autoNodes[0].properties'
    assert found == [
        f"{where}[\"gpu-platform/node-service-account\"]: 'dev-speech-nodes' is not the node account of tenant nlp of stack dev; allowed: "
        "'dev-nlp-nodes' (its VMs would run as that account: the platform may act as every tenant's node account)",
        f"{where}[\"gpu-platform/network\"]: 'dev-speech-nodes' is not the network of tenant nlp of stack dev; allowed: 'dev-nlp-nodes' "
        "(its VMs would start in that network)",
        f"{where}[\"gpu-platform/subnetwork\"]: 'dev-speech-nodes' is not the subnet of tenant nlp of stack dev; allowed: 'dev-nlp-nodes' "
        "(its VMs would start in that subnet)",
    ]


def test_a_team_stacks_vms_as_another_tenants_identity_are_rejected(runs):
    run, reg = one(runs, "team-vision-dev", VCI)
    props = edit_values(reg.plain_inputs, lambda d: properties(d).update({"gpu-platform/node-service-account": "dev-nlp-nodes"}))
    assert only(rejected(args_of(run, reg, props=props)), P.tenant_placement_by_design) == (
        f"tenant-vision-instance (instance 'p-vision/vision'): {FIELD} privateNodes.autoNodes[0].properties[\"gpu-platform/node-service-account\"]: "
        "'dev-nlp-nodes' is not the node account of tenant vision of stack team-vision-dev; allowed: 'dev-vision-nodes' (its VMs would run "
        "as that account: the platform may act as every tenant's node account)"
    )


# --- Which addresses its control plane admits ----------------------------------------------------------------


def nat_address(run, tenant: str, i: int = 0) -> str:
    """The address the (mock) provider reserved for a tenant's NAT address, as the stack's outputs hold it."""
    return run.one(ADDRESS, f"tenant-{tenant}-gcp-nat-{i}").final_state["address"]


@pytest.mark.parametrize(
    "edit, message",
    [
        # One more single address beside the NAT address: anyone's machine.
        (
            lambda r: r.append("203.0.113.7/32"),
            f"{RANGES}: 2 single address(es) for the 1 NAT address(es) of tenant nlp of stack dev (dev-nlp-nat-0); allowed: one "
            "<address>/32 per NAT address (vcluster-control-plane-nat-addresses compares them with the addresses once they exist)",
        ),
        # Private, but not the host's: the whole of 10/8.
        (
            lambda r: r.append("10.0.0.0/8"),
            f"{RANGES}[3]: '10.0.0.0/8' is not allowed; allowed: the host cluster's pod and node ranges (10.4.0.0/14, 10.0.0.0/20) and the "
            "tenant's NAT addresses, each one external address <address>/32",
        ),
        # One address, but none a NAT address can be: private, the metadata server's, IPv6.
        (lambda r: r.append("10.9.9.9/32"), f"{RANGES}[3]: '10.9.9.9/32' is not allowed"),
        (lambda r: r.append("169.254.169.254/32"), f"{RANGES}[3]: '169.254.169.254/32' is not allowed"),
        (lambda r: r.append("2001:db8::1/128"), f"{RANGES}[3]: '2001:db8::1/128' is not allowed"),
    ],
)
def test_a_control_plane_admitting_more_than_its_nat_addresses_and_the_host_is_rejected(runs, edit, message):
    run, reg = one(runs, "dev", VCI, "nlp")
    props = edit_values(reg.plain_inputs, lambda d: edit(ranges(d)))
    assert only(rejected(args_of(run, reg, props=props)), P.control_plane_isolation).startswith(f"{NLP}: {message}")


def with_instance(run, reg, props: dict, *, address_unknown: str | None = None) -> StackValidationArgs:
    """The stack after `pulumi up` (each resource's final outputs) with the instance's props
    replaced; `address_unknown`: that Address's address unknown, as in the preview that creates it."""
    resources = []
    for r in stack_args(run).resources:
        if r.urn == reg.urn:
            r = policy_resource(reg.type, props, reg.urn, reg.name)
        elif r.name == address_unknown:
            r = policy_resource(r.resource_type, {**run.by_urn()[r.urn].final_state, "address": UNKNOWN_STRING_VALUE}, r.urn, r.name)
        resources.append(r)
    return StackValidationArgs(resources=resources)


def test_a_control_plane_admitting_an_address_that_is_not_its_nat_address_is_rejected_once_the_addresses_exist(runs):
    """One /32 as the resource policy wants it, but someone else's: the stack policy compares it
    with the address of nlp's NAT Address resource, which exists at `pulumi up`."""
    run, reg = one(runs, "dev", VCI, "nlp")
    ours = f"{nat_address(run, 'nlp')}/32"
    props = edit_values(reg.final_state, lambda d: ranges(d).__setitem__(0, "203.0.113.7/32"))
    assert P.control_plane_isolation.name not in names(rejected(args_of(run, reg, props=props)))  # one /32 for one NAT address
    assert reports(P.nat_addresses, with_instance(run, reg, props)) == [
        (
            "tenant-nlp-instance",
            f"{NLP}: {RANGES}[0]: '203.0.113.7/32' is not a NAT address of tenant nlp of stack dev (dev-nlp-nat-0 {ours}); allowed: "
            "exactly those, each <address>/32, and the host cluster's pod and node ranges",
        ),
        ("tenant-nlp-instance", f"{NLP}: {RANGES}: NAT address dev-nlp-nat-0 ({ours}) of tenant nlp is not admitted; allowed: exactly the tenant's NAT addresses, each <address>/32"),
    ]


def test_a_control_plane_admitting_another_tenants_nat_address_is_rejected(runs):
    run, reg = one(runs, "dev", VCI, "nlp")
    theirs = f"{nat_address(run, 'speech')}/32"
    props = edit_values(reg.final_state, lambda d: ranges(d).append(theirs))
    found = [m for _, m in reports(P.nat_addresses, with_instance(run, reg, props))]
    assert found == [f"{NLP}: {RANGES}[3]: {theirs!r} is not a NAT address of tenant nlp of stack dev (dev-nlp-nat-0 {nat_address(run, 'nlp')}/32); allowed: exactly those, each <address>/32, and the host cluster's pod and node ranges"]


def test_the_committed_control_planes_admit_exactly_their_nat_addresses(runs):
    for stack, run in runs.items():
        for reg in run.of_type(VCI):
            record = P.STACKS[stack]["tenants"][reg.input("metadata", "name")]
            admitted = ranges(yaml.safe_load(reg.input("spec", "template", "helmRelease", "values")))
            nat = {f"{a.final_state['address']}/32" for a in run.of_type(ADDRESS) if a.input("name") in record["natAddresses"]}
            assert len(nat) == len(record["natAddresses"]) > 0, reg.name
            assert sorted(admitted) == sorted([*nat, *P.STACKS[stack]["hostClientRanges"]]), reg.name
        assert reports(P.nat_addresses, stack_args(run)) == [], stack
    research = P.STACKS["prod"]["tenants"]["research"]
    assert research["natAddresses"] == ["prod-research-nat-0", "prod-research-nat-1"]


def test_nat_addresses_unknown_in_preview_defer_that_tenant_and_the_others_are_checked(runs):
    """In the preview that creates nlp's NAT address its address is unknown: the stack policy waits
    for `pulumi up` (the SDK's "can't run during preview" note), after judging speech."""
    run = runs["dev"]
    speech = run.one(VCI, "speech")
    props = edit_values(speech.final_state, lambda d: ranges(d).__setitem__(0, "203.0.113.7/32"))
    found: list[str] = []
    with pytest.raises(UnknownValueError):
        P.nat_addresses.validate(with_instance(run, speech, props, address_unknown="tenant-nlp-gcp-nat-0"), lambda message, urn=None: found.append(message))
    assert [m.split(": ", 2)[1] for m in found] == [f"{RANGES}[0]", RANGES]
    assert all(m.startswith("tenant-speech-instance (instance 'p-speech/speech'): ") for m in found)
