"""The policy pack over a stack, offline: the pack's own policies on what the program registered.

What `pulumi preview --policy-pack policy` does with the CLI, without it: the pack's public entry,
`POLICIES` of policy/policies.py (imported as the CLI runs the pack, with policy/ on sys.path), each
resource policy on every custom resource a mock-engine run registered and each stack policy on the
whole stack, through pulumi_policy's own argument types. Validators get their props through the
SDK's own unknown-checking proxy, as under the CLI: a read-only Mapping (not a dict) that raises
UnknownValueError on values unknown during preview. The offline plan (tools/plan.py) prints what
this finds; the pack's tests (tests/policy_support.py) run the same functions.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import inspect
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from config.stack_files import PROJECT_DIR

POLICY_DIR = PROJECT_DIR / "policy"
if str(POLICY_DIR) not in sys.path:  # the pack imports its sibling modules top-level, as the CLI runs it
    sys.path.insert(0, str(POLICY_DIR))

import policies as P  # noqa: E402  (the pack's public entry)
from pulumi_policy import (  # noqa: E402
    EnforcementLevel,
    PolicyCustomTimeouts,
    PolicyProviderResource,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.proxy import UNKNOWN_STRING_VALUE, UnknownValueError, unknown_checking_proxy  # noqa: E402

from tools.mock_engine import ProgramRun, Registration  # noqa: E402

Policy = ResourceValidationPolicy | StackValidationPolicy


@dataclass(frozen=True)
class Violation:
    """One violation as the CLI reports it: the policy, its level, the resource it is attached to
    (the name in its URN; "<stack>" for a stack policy that names none) and the whole message."""

    level: EnforcementLevel
    policy: str
    resource: str
    message: str
    stack_policy: bool = False

    @property
    def mandatory(self) -> bool:
        return self.level == EnforcementLevel.MANDATORY


def _options(protect: bool = False) -> PolicyResourceOptions:
    return PolicyResourceOptions(
        protect=protect,
        ignore_changes=[],
        delete_before_replace=None,
        aliases=[],
        custom_timeouts=PolicyCustomTimeouts(0, 0, 0),
        additional_secret_outputs=[],
    )


def urn_of(resource_type: str, name: str, project: str = P.PROGRAM_PROJECT, stack: str = "dev") -> str:
    return f"urn:pulumi:{stack}::{project}::{resource_type}::{name}"


def make_args(
    resource_type: str,
    props: dict[str, Any],
    *,
    name: str = "test",
    project: str = P.PROGRAM_PROJECT,
    urn: str | None = None,
    protect: bool = False,
    provider: PolicyProviderResource | None = None,
    config: dict[str, Any] | None = None,
) -> ResourceValidationArgs:
    return ResourceValidationArgs(
        resource_type=resource_type,
        props=unknown_checking_proxy(copy.deepcopy(props)),
        urn=urn or urn_of(resource_type, name, project),
        name=name,
        opts=_options(protect),
        provider=provider,
        config=config,
    )


def args_of(run: ProgramRun, reg: Registration, *, props: dict | None = None, config: dict | None = None, **overrides) -> ResourceValidationArgs:
    """A registered resource as a policy sees it: its inputs, URN, protect option and provider."""
    provider = None
    if reg.provider:
        provider_urn = reg.provider.rsplit("::", 1)[0]
        found = run.by_urn().get(provider_urn)
        if found is not None:
            provider = PolicyProviderResource(found.type, unknown_checking_proxy(found.plain_inputs), found.urn, found.name)
    options = {"name": reg.name, "urn": reg.urn, "protect": reg.protect, "provider": provider, "config": config, **overrides}
    return make_args(reg.type, reg.plain_inputs if props is None else props, **options)


def policy_resource(resource_type: str, props: dict[str, Any], urn: str, name: str) -> PolicyResource:
    return PolicyResource(resource_type, unknown_checking_proxy(copy.deepcopy(props)), urn, name, _options(), None, None, [], {})


def stack_args(run: ProgramRun, extra: list[PolicyResource] = ()) -> StackValidationArgs:
    """Every custom resource of a run (plus `extra`), as a stack policy sees the stack at `pulumi
    up`: with its final outputs (pulumi/pulumi tag v3.187.0 pkg/resource/deploy/step_generator.go,
    AnalyzeResources), here the mock provider's state over its inputs."""
    resources = [policy_resource(r.type, r.final_state, r.urn, r.name) for r in [*run.registrations, *run.reads] if r.custom]
    return StackValidationArgs(resources=[*resources, *extra])


def reports(policy: Policy, args: ResourceValidationArgs | StackValidationArgs) -> list[tuple[str, str]]:
    """(resource, message) of every violation the policy reports, as the CLI shows it: attached to
    the resource's URN (a resource policy's own resource, whatever urn it passes; a stack policy's
    urn, or the stack when it names none), its name taken from that URN, and the message. Runs an
    awaitable validator to completion like the analyzer."""
    found: list[tuple[str, str]] = []
    _validate(policy, args, found)
    return found


def _validate(policy: Policy, args: ResourceValidationArgs | StackValidationArgs, found: list[tuple[str, str]]) -> None:
    def report(message: str, urn: str | None = None) -> None:
        attached = args.urn if isinstance(args, ResourceValidationArgs) else urn
        found.append((attached.rsplit("::", 1)[-1] if attached else "<stack>", message))

    result = policy.validate(args, report)
    if inspect.isawaitable(result):
        loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(result)
        finally:
            loop.close()


def _judged(policy: Policy, level: EnforcementLevel, args: ResourceValidationArgs) -> list[Violation]:
    """What a resource policy reports on one resource; one that reads a value unknown here (a
    secret output the plan was handed as [secret]) is deferred as the analyzer defers it during a
    preview, with an advisory note after what it reported first (pulumi/pulumi-policy
    sdk/python/lib/pulumi_policy/policy.py: UnknownValueError → "can't run policy … during preview")."""
    found: list[tuple[str, str]] = []
    try:
        _validate(policy, args, found)
    except UnknownValueError as e:
        note = f"{args.name}: can't run here: {e.message}; the pack runs it when Pulumi has the value (`pulumi up`)"
        return [*(Violation(level, policy.name, r, m) for r, m in found), Violation(EnforcementLevel.ADVISORY, policy.name, args.name, note)]
    return [Violation(level, policy.name, r, m) for r, m in found]


@contextlib.contextmanager
def judging_stacks(stacks: dict[str, Any], *, replace: bool = False):
    """The pack judging with `stacks` as its per-stack data (program_data.json `stacks`) for a
    while: on top of its own (`replace`: instead of it)."""
    saved = dict(P.STACKS)
    if replace:
        P.STACKS.clear()
    P.STACKS.update(stacks)
    try:
        yield
    finally:
        P.STACKS.clear()
        P.STACKS.update(saved)


def _unknown(value: Any, hidden: str) -> Any:
    """`value` with every string `hidden` made unknown, as the SDK marks a value unknown during a preview."""
    if isinstance(value, dict):
        return {k: _unknown(v, hidden) for k, v in value.items()}
    if isinstance(value, list):
        return [_unknown(v, hidden) for v in value]
    return UNKNOWN_STRING_VALUE if value == hidden else value


def check(run: ProgramRun, levels: dict[str, EnforcementLevel] | None = None, hidden: str | None = None) -> list[Violation]:
    """Every violation of every policy of the pack over a run (a policy at `levels` DISABLED is
    skipped): resource policies on every custom resource, stack policies on the whole stack. A
    value the run was handed as `hidden` (a secret output an outputs file does not show) is unknown
    to the pack, which defers a policy that reads it (_judged)."""
    found = []
    # Each resource's arguments built once for every policy: validators see them through the
    # SDK's read-only proxy, so no policy can change what the next one sees.
    resources = [
        args_of(run, reg, props=_unknown(reg.plain_inputs, hidden) if hidden is not None else None) for reg in run.registrations if reg.custom
    ]
    stack = stack_args(run)
    for policy in P.POLICIES:
        level = (levels or {}).get(policy.name, policy.enforcement_level)
        if level == EnforcementLevel.DISABLED:
            continue
        if isinstance(policy, StackValidationPolicy):
            found += [Violation(level, policy.name, resource, m, stack_policy=True) for resource, m in reports(policy, stack)]
            continue
        for args in resources:
            found += _judged(policy, level, args)
    return found


def read_levels(path: Path) -> dict[str, EnforcementLevel]:
    """Enforcement levels from a policy pack configuration file, in the form the CLI's
    `--policy-pack-config` takes: {"<policy>": "<level>"} or {"<policy>": {"enforcementLevel": "<level>", …}}
    (pulumi/pulumi-policy sdk/python/lib/pulumi_policy/policy.py: `EnforcementLevel` values)."""
    try:
        document = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise ValueError(f"not readable as JSON ({e})") from None
    names = {p.name for p in P.POLICIES}
    levels = {}
    for name, spec in (document.items() if isinstance(document, dict) else ()):
        level = spec.get("enforcementLevel") if isinstance(spec, dict) else spec
        if name not in names:
            raise ValueError(f"{name!r} is not a policy of the pack; allowed: {', '.join(sorted(names))}")
        try:
            levels[name] = EnforcementLevel(level)
        except ValueError:
            raise ValueError(f"{name}: {level!r} is not allowed; allowed: {', '.join(e.value for e in EnforcementLevel)}") from None
    return levels
