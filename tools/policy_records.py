"""Each committed stack's record for the policy pack (policy/stacks/<stack>.json, written by `make
policy-data`, tools/policy_data.py): its exact identities and tenants (tools/stack_identities.py),
the resources the pack holds by value (policy/guardrails/recorded.py), the projects and locations
its GCP resources may name (policy/guardrails/placement.py), and what a team stack takes from its
environment's record.
"""

from __future__ import annotations

import ipaddress
import json
from typing import Any, Callable

from components.monitoring_queries import pool_at_limit_key
from config import node_properties as props
from tools.stack_identities import stack_identities
from tools.mock_engine import MOCK_ADDRESS_RANGE, ProgramRun
from tools.policy_check import P  # noqa: F401 - puts policy/ on sys.path, as the CLI runs the pack

from guardrails import placement, recorded  # noqa: E402

NS = "gpu-platform"


def environment_stack_of(values: dict[str, Any]) -> str | None:
    reference = values.get(f"{NS}:environmentStack")
    return str(reference).split("/")[-1] if reference else None


def stack_data(runs: dict[str, ProgramRun], values: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Per stack (environment stacks first in `runs`), the exact identities and tenants its grants
    and instances may name."""
    out: dict[str, Any] = {}
    for stack, run in sorted(runs.items(), key=lambda item: (environment_stack_of(values[item[0]]) is not None, item[0])):
        env = environment_stack_of(values[stack])
        out[stack] = stack_entry(stack, run, values[stack], out.get(env) if env else None, runs.get(env) if env else None)
    return out


# The environment stack's resources a team stack brings with it (the environment plans every team
# stack of this repository with its own tenants: components/environment_monitoring.py): the team's
# pool-at-limit alert policy. They are recorded in the team stack's record (`environmentResources`),
# not the environment's, so that two teams added on two branches change two files of their own.
def _team_of(registration: Any) -> str | None:
    """The team whose pool-at-limit alert policy `registration` is, or None."""
    if registration.type != recorded.ALERT_POLICY:
        return None
    prefix = pool_at_limit_key("")
    key = registration.name.rsplit("-" + prefix, 1)
    return key[1] if len(key) == 2 and key[1] else None


def _inline_tenants(values: dict[str, Any]) -> set[str]:
    return {t.get("name") for t in values.get(f"{NS}:tenants") or [] if isinstance(t, dict)}


def team_stack_resources(environment_run: ProgramRun, values: dict[str, Any]) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Per team of a team stack (not inline in the environment's `values`), the recorded forms of the
    environment run's resources that team brings (`_team_of`)."""
    inline = _inline_tenants(values)
    out: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for r in environment_run.registrations:
        team = _team_of(r) if r.custom else None
        if team is not None and team not in inline:
            out.setdefault(team, {}).setdefault(r.type, []).append(_picked_by_the_cloud(r.type, recorded.recorded_form(r.type, r.plain_inputs)))
    return out


# What a team stack takes from its environment's entry: the environment's decisions about its
# tenants, and the host cluster they run on (its name, the private ranges its clients come from).
ENVIRONMENT_DECISIONS = (
    "approvedTenantSecurity", "controlPlaneMaximum", "allowSharedWithProjectTenants", "hostCluster", "hostClientRanges", "reservedNodeTypes",
)


def stack_entry(
    stack: str, run: ProgramRun, values: dict[str, Any], environment_entry: dict[str, Any] | None, environment_run: ProgramRun | None = None
) -> dict[str, Any]:
    """One stack's entry of `stacks`, from its run; a team stack's needs its environment's entry, and
    its environment's run for `environmentResources` (left out without it)."""
    env = environment_stack_of(values)
    entry = stack_identities(run, values[f"{NS}:environment"], env or stack, environment_entry if env else None)
    # The resources the pack holds to this stack's configuration exactly (policy/guardrails/recorded.py);
    # an environment's, but those its team stacks bring.
    teams = set(team_stack_resources(run, values)) if env is None else set()
    entry["resources"] = recorded_resources(run, exclude=lambda r: _team_of(r) in teams)
    if env is not None and environment_run is not None:
        tenant = (values.get(f"{NS}:tenant") or {}).get("name")
        entry["environmentResources"] = team_stack_resources(environment_run, {}).get(tenant, {})
    # The projects, locations, regions and zones its GCP resources may name (policy/guardrails/placement.py).
    entry["gcpPlacement"] = gcp_placement(run)
    if env is not None:
        entry["environmentStackReference"] = values[f"{NS}:environmentStack"]
    if env is None:
        facts = run_facts(run)
        entry["approvedTenantSecurity"] = facts.get("approvedTenantSecurity", {})
        entry["controlPlaneMaximum"] = facts.get("controlPlaneMaximum")
        entry["allowSharedWithProjectTenants"] = facts.get("allowSharedWithProjectTenants", False)
        entry["hostCluster"] = facts.get("hostCluster")
        # The host's pod and node ranges every control plane's LoadBalancer admits beside the
        # tenant's NAT addresses (components/tenant_vcluster.py).
        entry["hostClientRanges"] = list(facts.get("hostClientCidrs") or [])
        # Each reserved node type (a tenant's slice of a reservation) and its tenant.
        entry["reservedNodeTypes"] = {
            nt["name"]: nt["properties"][props.RESERVATION_TENANT]
            for nt in facts.get("nodeTypes") or []
            if props.RESERVATION_TENANT in (nt.get("properties") or {})
        }
    else:
        assert environment_entry is not None, f"stack {stack}: its environment's entry first"
        entry.update({key: environment_entry[key] for key in ENVIRONMENT_DECISIONS})
    return entry


def recorded_resources(run: ProgramRun, exclude: Callable[[Any], bool] = lambda r: False) -> dict[str, list[dict[str, Any]]]:
    """Per kind of policy/guardrails/recorded_kinds.py SPECS, what the record keeps of each resource of
    that kind the run registers but those `exclude`d, in a stable order (tenants register in
    parallel); and the default provider the engine makes for a package whose resources name no
    provider of their own (the commands'): none of its inputs but its version."""
    out: dict[str, list[dict[str, Any]]] = {}
    for r in run.registrations:
        if r.custom and r.type in recorded.SPECS and not exclude(r):
            out.setdefault(r.type, []).append(_picked_by_the_cloud(r.type, recorded.recorded_form(r.type, r.plain_inputs)))
    for package in sorted({r.type.split(":", 1)[0] for r in run.registrations if r.custom and not r.provider and not r.type.startswith("pulumi:")}):
        provider = f"pulumi:providers:{package}"
        if provider in recorded.SPECS:
            out.setdefault(provider, []).append({})
    return {k: sorted(out[k], key=lambda entry: json.dumps(entry, sort_keys=True)) for k in sorted(out)}


def _picked_by_the_cloud(resource_type: str, form: dict[str, Any]) -> dict[str, Any]:
    """A recorded form with the addresses the mock engine hands out where Compute Engine picks one
    (tools/mock_engine.py MOCK_ADDRESS_RANGE) as null at the paths where the pack admits such a
    value by its form (recorded_kinds.py COMPUTED): the record does not know them. One anywhere else is a
    value the record would hold as it is, which no real address equals: an error, not a record."""
    computed = recorded.COMPUTED.get(resource_type, {})

    def walk(path: str, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: walk(recorded.field_path(path, k), v) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(recorded.field_path(path, i), v) for i, v in enumerate(value)]
        if isinstance(value, str) and _is_mock_address(value):
            if recorded.path_pattern(path) not in computed:
                raise ValueError(
                    f"{resource_type} {path}: {value!r} is an address the mock engine made up (a cloud-assigned one), where the pack "
                    "has no form for it: add the path to policy/guardrails/recorded_kinds.py COMPUTED"
                )
            return None
        return value

    return walk("", form)


def _is_mock_address(text: str) -> bool:
    try:
        network = ipaddress.ip_network(text, strict=True)
    except ValueError:
        return False
    mock = ipaddress.ip_network(MOCK_ADDRESS_RANGE)
    return network.version == mock.version and network.num_addresses == 1 and network.subnet_of(mock)  # type: ignore[arg-type]


def gcp_placement(run: ProgramRun) -> dict[str, list[str]]:
    """Per placement field (policy/guardrails/placement.py FIELDS: project, location, region, zone),
    every value the run's GCP resources give it: the only values the pack lets a GCP resource of
    this stack name there."""
    found: dict[str, set[str]] = {field: set() for field in placement.FIELDS}
    for r in run.registrations:
        if r.custom and placement.is_gcp(r.type):
            for field in placement.FIELDS:
                value = r.plain_inputs.get(field)
                if isinstance(value, str):
                    found[field].add(value)
    return {field: sorted(values) for field, values in found.items()}


def run_facts(run: ProgramRun) -> dict[str, Any]:
    """The environment facts an environment stack's run exports."""
    return run.outputs.get("environmentFacts") or {}
