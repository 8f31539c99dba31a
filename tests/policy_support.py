"""Running the pack's validators the way the analyzer does, on what the mock engine registered.

The runner itself is tools/policy_check.py (`make plan` runs the pack with it too); here are the
tests' views of it. Shared by tests/test_policies.py (the whole pack, served as the CLI serves it),
tests/test_policies_gke_iam.py and tests/test_policies_tenancy.py (each policy on real and broken
resources) and tests/test_policy_violations.py (every case of issue #11 rejected).
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import select
import subprocess
import sys
from pathlib import Path
from typing import Any

import policies as P
import yaml
from pulumi_policy import EnforcementLevel, ResourceValidationArgs, StackValidationArgs, StackValidationPolicy

from tools import policy_check
from tools.mock_engine import ProgramRun, Registration

# The pack run the way the analyzer runs it, as the offline plan does (tools/policy_check.py).
from tools.policy_check import Policy, args_of, make_args, policy_resource, reports, stack_args, urn_of  # noqa: F401


def violations(policy: Policy, args: ResourceValidationArgs | StackValidationArgs) -> list[str]:
    """The messages the policy reports. Each must start with the resource it is attached to (its
    name, then the object, `described`), so the message alone tells a user what to fix."""
    found = reports(policy, args)
    for resource, message in found:
        assert message.startswith(f"{resource} (") or message.startswith(f"{resource}: "), (policy.name, resource, message)
    return [message for _, message in found]


def rejected(args: ResourceValidationArgs) -> list[tuple[str, str]]:
    """(policy, message) of every mandatory resource policy of the pack that rejects `args`."""
    found = []
    for policy in P.POLICIES:
        if isinstance(policy, StackValidationPolicy) or policy.enforcement_level != EnforcementLevel.MANDATORY:
            continue
        found += [(policy.name, m) for m in violations(policy, args)]
    return found


def beside_record(found: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """`found` without `stack-resources-by-record`'s refusals. That policy refuses every value off the
    stack's record (tests/test_policy_exact_kinds.py), so a resource edited to probe another policy
    is refused by it too; a test of the other policy's message judges the rest."""
    return [(name, message) for name, message in found if name != P.stack_resources_by_record.name]


def by_record(found: list[tuple[str, str]]) -> list[str]:
    """The messages of `stack-resources-by-record` among `found`."""
    return [message for name, message in found if name == P.stack_resources_by_record.name]


def only(found: list[tuple[str, str]], policy: Policy) -> str:
    """The one message `policy` reports among `found`."""
    messages = [m for name, m in found if name == policy.name]
    assert len(messages) == 1, found
    return messages[0]


def names(found: list[tuple[str, str]]) -> set[str]:
    return {name for name, _ in found}


def analyze(run: ProgramRun, levels: dict[str, EnforcementLevel] | None = None) -> list[tuple[EnforcementLevel, str, str, str]]:
    """(level, policy, resource, message) for every policy of the pack over a run (tools/policy_check.py
    `check`, which `make plan` runs too); each resource policy's message starts with its resource."""
    found = policy_check.check(run, levels)
    for v in found:
        assert v.stack_policy or v.message.startswith((f"{v.resource} (", f"{v.resource}: ")), (v.policy, v.resource, v.message)
    return [(v.level, v.policy, v.resource, v.message) for v in found]


def mandatory(found: list[tuple[EnforcementLevel, str, str, str]]) -> list[tuple[str, str, str]]:
    return [(policy, name, message) for level, policy, name, message in found if level == EnforcementLevel.MANDATORY]


def real(runs: dict[str, ProgramRun], typ: str, stacks=("dev", "prod", "team-vision-dev")) -> list[tuple[ProgramRun, Registration]]:
    found = [(runs[s], r) for s in stacks for r in runs[s].of_type(typ)]
    assert found, f"the program registers no {typ} in {stacks}: this test would pass vacuously"
    return found


def one(runs: dict[str, ProgramRun], stack: str, typ: str, name_contains: str = "") -> tuple[ProgramRun, Registration]:
    run = runs[stack]
    return run, run.one(typ, name_contains)


def edit_values(props: dict, edit) -> dict:
    """A copy of a VirtualClusterInstance's props whose vcluster.yaml went through `edit(document)`."""
    props = copy.deepcopy(props)
    release = props["spec"]["template"]["helmRelease"]
    document = yaml.safe_load(release["values"])
    edit(document)
    release["values"] = yaml.safe_dump(document, sort_keys=False)
    return props


def pools_of(document: dict) -> dict[str, dict]:
    return {p["name"]: p for entry in document["privateNodes"]["autoNodes"] for p in entry["dynamic"]}


def pack_stacks(stacks: dict[str, Any]):
    """The pack judging with `stacks` as its per-stack data (policy/stacks/) for a while: the
    shipped stacks' own data for their runs, whatever stacks this checkout holds."""
    return policy_check.judging_stacks(stacks, replace=True)


@contextlib.contextmanager
def pack_bootstrap(bootstrap: dict[str, Any], inventory: dict[str, Any] | None = None):
    """The pack judging with `bootstrap` as its data of the CI bootstrap (program_data.json
    `bootstrap`) and `inventory` as what the bootstrap may register (its `inventory` entry) for a
    while: the bootstrap as shipped, whatever this checkout's configures (an adopter's without
    team projects registers no folder or billing grants, which the shipped one makes). Changed in
    place, as the guardrails hold on to the mappings (identities.py ACCOUNTS, common.py INVENTORY)."""
    data = P.DATA["bootstrap"]
    saved, saved_accounts = dict(data), dict(data["accounts"])
    accounts = data["accounts"]
    project = P.DATA["projects"]["bootstrap"]
    saved_inventory = P.DATA["inventory"][project]
    data.update({k: v for k, v in bootstrap.items() if k != "accounts"})
    accounts.clear()
    accounts.update(bootstrap["accounts"])
    if inventory is not None:
        P.DATA["inventory"][project] = inventory
    try:
        yield
    finally:
        data.update(saved)
        accounts.clear()
        accounts.update(saved_accounts)
        P.DATA["inventory"][project] = saved_inventory


def committed_bootstrap_inventory() -> dict[str, Any]:
    """What this checkout's pack data (policy/program_data.json) lets its bootstrap register."""
    document = json.loads((Path(P.__file__).resolve().parent / "program_data.json").read_text())
    return document["inventory"][document["projects"]["bootstrap"]]


def pack_copy_judging_the_shipped_stacks(directory: Path, shipped_records_dir: Path) -> Path:
    """A copy of policy/ alone (what `pulumi policy publish` uploads) whose records are the stacks
    as shipped (tests/conftest.py `shipped_records_dir`) and whose data of the CI bootstrap is the
    bootstrap as shipped: the served pack then judges the shipped stacks' runs by their own data,
    whatever stacks and bootstrap this checkout holds."""
    import shutil

    from shipped_stacks import SHIPPED_BOOTSTRAP

    from tools import policy_data

    copied = directory / "published" / "policy"
    shutil.copytree(Path(P.__file__).resolve().parent, copied, ignore=shutil.ignore_patterns(".venv", "__pycache__", "stacks"))
    shutil.copytree(shipped_records_dir, copied / "stacks")
    data = json.loads((copied / "program_data.json").read_text())
    data["bootstrap"] = policy_data.bootstrap_data(SHIPPED_BOOTSTRAP.parent)
    (copied / "program_data.json").write_text(json.dumps(data, indent=2) + "\n")
    return copied


@contextlib.contextmanager
def served_pack(pack_dir: Path, cwd: Path | None = None):
    """Starts a pack the way the CLI's Python analyzer does (`python -m pulumi.policy <engine>
    <dir>`) and yields a gRPC Analyzer stub talking to it."""
    import grpc
    from pulumi.runtime.proto import analyzer_pb2_grpc

    process = subprocess.Popen(
        [sys.executable, "-u", "-m", "pulumi.policy", "127.0.0.1:1", str(pack_dir)],
        cwd=cwd or pack_dir,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )
    try:
        ready, _, _ = select.select([process.stdout], [], [], 60)
        line = process.stdout.readline().strip() if ready else ""
        assert line.isdigit(), f"the pack did not start: {line!r} {process.stderr.read() if process.poll() is not None else ''}"
        channel = grpc.insecure_channel(f"127.0.0.1:{line}")
        try:
            yield analyzer_pb2_grpc.AnalyzerStub(channel)
        finally:
            channel.close()
    finally:
        process.kill()
        process.wait(timeout=30)


def _struct(props: dict):
    from google.protobuf import struct_pb2

    properties = struct_pb2.Struct()
    properties.update(json.loads(json.dumps(props, default=str)))
    return properties


def analyze_remote(analyzer, resource_type: str, props: dict, urn: str, name: str, *, protect: bool = False, provider=None) -> list:
    """The diagnostics of one resource, sent as the engine sends it: its inputs, options and provider."""
    from pulumi.runtime.proto import analyzer_pb2

    request = analyzer_pb2.AnalyzeRequest(
        type=resource_type,
        properties=_struct(props),
        urn=urn,
        name=name,
        options=analyzer_pb2.AnalyzerResourceOptions(protect=protect),
        provider=provider,
    )
    return list(analyzer.Analyze(request, timeout=30).diagnostics)


def remote_provider(run: ProgramRun, reg: Registration):
    """The registration's provider, as the engine hands it to an analyzer."""
    from pulumi.runtime.proto import analyzer_pb2

    found = run.by_urn().get(reg.provider.rsplit("::", 1)[0]) if reg.provider else None
    if found is None:
        return None
    return analyzer_pb2.AnalyzerProviderResource(type=found.type, properties=_struct(found.plain_inputs), urn=found.urn, name=found.name)


# --- The pack served as the CLI serves it, judging dev configured with every option held by value ---

BILLING_EXPORT = "acme-ml-dev.billing.gcp_billing_export_v1_000000_000000_000000"
OTHER_EXPORT = "acme-ml-prod.billing.gcp_billing_export_v1_000000_000000_000000"
SSO = {"issuerUrl": "https://accounts.example.com", "clientId": "gpu-platform", "groups": ["ml-admins"], "groupsClaim": "groups"}


def configured_dev_values() -> dict:
    """dev as shipped, with every option whose resources the pack holds by value: single sign-on, an
    e-mail notification channel and the showback view over dev's own billing export."""
    from shipped_stacks import shipped_values

    values = shipped_values("dev")
    values["gpu-platform:platform"]["sso"] = SSO
    monitoring = values.setdefault("gpu-platform:monitoring", {})
    monitoring["notificationChannels"] = [{"email": "oncall@acme.example"}]
    monitoring.setdefault("showback", {})["billingExportTable"] = BILLING_EXPORT
    return values


def published_pack(directory: Path, runs: dict[str, ProgramRun], values: dict[str, dict]) -> Path:
    """A copy of policy/ alone under `directory`, its records (policy/stacks/) those `make
    policy-data` writes for `runs` with their stack files' `values`."""
    import shutil

    from tools import policy_data

    copied = directory / "policy"
    shutil.copytree(Path(P.__file__).resolve().parent, copied, ignore=shutil.ignore_patterns(".venv", "__pycache__"))
    for stack, record in policy_data.stack_data(runs, values).items():  # one file per stack
        (copied / "stacks" / f"{stack}.json").write_text(json.dumps(record))
    return copied


def refusals(diagnostics) -> list[tuple[str, str]]:
    """(policy, message) of each MANDATORY diagnostic; the CLI shows the description, then the message."""
    from pulumi.runtime.proto import analyzer_pb2

    return [(d.policyName, d.message.split("\n", 1)[1]) for d in diagnostics if d.enforcementLevel == analyzer_pb2.MANDATORY]


def served_refusals(analyzer, run: ProgramRun, reg: Registration, props: dict) -> list[tuple[str, str]]:
    """The served pack's refusals of `reg` with `props` for inputs, sent with its options and provider."""
    return refusals(analyze_remote(analyzer, reg.type, props, reg.urn, reg.name, protect=reg.protect, provider=remote_provider(run, reg)))


def served_stack_refusals(analyzer, run: ProgramRun, replaced: dict[str, dict]) -> list[tuple[str, str]]:
    """The stack's resources with their final outputs, reads included, `replaced` by URN."""
    from google.protobuf import struct_pb2
    from pulumi.runtime.proto import analyzer_pb2

    resources = []
    for reg in [*run.registrations, *run.reads]:
        if reg.custom:
            properties = struct_pb2.Struct()
            properties.update(json.loads(json.dumps(replaced.get(reg.urn, reg.final_state), default=str)))
            options = analyzer_pb2.AnalyzerResourceOptions(protect=reg.protect)
            resources.append(analyzer_pb2.AnalyzerResource(type=reg.type, properties=properties, urn=reg.urn, name=reg.name, options=options))
    return refusals(analyzer.AnalyzeStack(analyzer_pb2.AnalyzeStackRequest(resources=resources), timeout=60).diagnostics)


def of(found: list[tuple[str, str]], policy: str) -> list[str]:
    return [m for name, m in found if name == policy]


def requirement_pins(path: Path) -> dict[str, str]:
    """name → version of a requirements file whose every requirement is pinned with ==."""
    out = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("-"):  # -c constraints.txt
            name, _, version = line.partition("==")
            assert version, f"{path}: {line!r} is not pinned with =="
            out[name.lower().replace("_", "-")] = version
    return out
