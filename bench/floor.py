"""The SDK floor the program is measured against: programs that register resources and do
nothing else.

`floor_program` registers as many resources of the same SDK classes as the program, each with the
fewest inputs its class accepts, flat, on explicit providers. `replay_program` registers exactly
what the program registered — the same types, names, inputs, parents, providers and dependencies —
with none of the program's logic: the SDK's own cost of that resource graph.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from typing import Any, Callable

def sdk_class(typ: str) -> tuple[Callable[..., Any], dict[str, Any]]:
    """The SDK class the program instantiates for a registered type, and the extra constructor
    arguments it needs (CustomResource takes its apiVersion and kind)."""
    import pulumi

    package, module, name = typ.split(":")
    if package == "pulumi" and module == "providers":
        return importlib.import_module(f"pulumi_{name}").Provider, {}
    if package == "kubernetes":
        group, _, version = module.partition("/")
        try:
            return getattr(importlib.import_module(f"pulumi_kubernetes.{group.split('.')[0]}.{version}"), name), {}
        except (ImportError, AttributeError):
            return importlib.import_module("pulumi_kubernetes.apiextensions").CustomResource, {"api_version": module, "kind": name}
    try:
        sdk = importlib.import_module(f"pulumi_{package}")
    except ImportError:  # our components
        return (lambda resource_name, **kw: pulumi.ComponentResource(typ, resource_name, None, kw.get("opts"))), {}
    submodule = module.split("/")[0]
    owner = sdk if submodule == "index" else importlib.import_module(f"pulumi_{package}.{submodule}")
    return getattr(owner, name), {}


def _required_args(cls: Any) -> dict[str, Any]:
    """Dummy values for the arguments the SDK class refuses to go without."""
    args_class = getattr(sys.modules.get(cls.__module__), f"{cls.__name__}Args", None)
    if args_class is None:
        return {}
    values = {}
    for name, parameter in inspect.signature(args_class.__init__).parameters.items():
        if name in ("self", "__self__") or parameter.default is not inspect.Parameter.empty:
            continue
        annotation = str(parameter.annotation)
        values[name] = 1 if "int" in annotation else False if "bool" in annotation else "bench"
    return values


# Inputs tools/mock_engine.py reads back to compute outputs, optional to the SDK.
MOCK_READS = {
    "gcp:projects/iAMCustomRole:IAMCustomRole": {"role_id": "bench"},
    "gcp:serviceaccount/account:Account": {"account_id": "bench"},
}


def floor_program(types: list[str]) -> Callable[[], None]:
    """A program that registers one resource per entry of `types`, of the same SDK classes, with the
    fewest inputs those classes accept, on explicit providers like the real program."""
    import pulumi

    plan = []
    for i, typ in enumerate(types):
        cls, extra = sdk_class(typ)
        required = _required_args(cls) if isinstance(cls, type) else {}
        plan.append((typ, f"r{i}", cls, {**required, **MOCK_READS.get(typ, {}), **extra}))

    def program() -> None:
        providers: dict[str, Any] = {}
        for typ, name, cls, kwargs in sorted(plan, key=lambda p: not p[0].startswith("pulumi:providers:")):
            package = typ.split(":")[2] if typ.startswith("pulumi:providers:") else typ.split(":")[0]
            opts = pulumi.ResourceOptions(provider=providers[package]) if package in providers else None
            resource = cls(name, **kwargs, opts=opts)
            if typ.startswith("pulumi:providers:"):
                providers[package] = resource

    return program


def replay_program(registrations: list) -> Callable[[], None]:
    """A program that registers `registrations` (tools.mock_engine.Registration) again, as they
    were: generic resource classes with the recorded inputs, parents, providers and dependencies."""
    import pulumi
    from pulumi.runtime import rpc

    def inputs(value: Any) -> Any:
        if rpc.is_rpc_secret(value):
            return pulumi.Output.secret(inputs(rpc.unwrap_rpc_secret(value)))
        if isinstance(value, dict):
            return {k: inputs(v) for k, v in value.items()}
        if isinstance(value, list):
            return [inputs(v) for v in value]
        return value

    by_urn = {r.urn: r for r in registrations}

    def prerequisites(r) -> list[str]:
        edges = [r.parent, *r.dependencies, *(u for urns in r.property_dependencies.values() for u in urns)]
        if r.provider:
            edges.append(r.provider.rsplit("::", 1)[0])
        return [u for u in edges if u in by_urn and u != r.urn]

    order: list = []
    placed: set[str] = set()

    def place(r) -> None:
        if r.urn in placed:
            return
        placed.add(r.urn)
        for urn in prerequisites(r):
            place(by_urn[urn])
        order.append(r)

    for r in registrations:
        place(r)

    def program() -> None:
        made: dict[str, Any] = {}
        for r in order:
            provider = made.get(r.provider.rsplit("::", 1)[0]) if r.custom and r.provider else None
            opts = pulumi.ResourceOptions(
                parent=made.get(r.parent),
                provider=provider,
                depends_on=[made[u] for u in prerequisites(r) if u != r.parent and made.get(u) is not provider],
                protect=r.protect,
            )
            if r.type.startswith("pulumi:providers:"):
                made[r.urn] = pulumi.ProviderResource(r.type.split(":")[2], r.name, inputs(r.inputs), opts)
            elif r.custom:
                made[r.urn] = pulumi.CustomResource(r.type, r.name, inputs(r.inputs), opts)
            else:
                made[r.urn] = pulumi.ComponentResource(r.type, r.name, None, opts)

    return program
