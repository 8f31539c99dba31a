"""Resources as Pulumi's engine names and matches them, for the offline comparison
(tools/plan_compare.py): URNs from the chain of parents' types (pulumi/pulumi
sdk/go/common/resource/urn.go `NewURN`; the mock engine names only the immediate parent), and the
aliases a new resource is looked up by when its URN is not in the old state, as
pkg/resource/deploy/step_generator.go computes them at commit 1b5949891b3cefcb9974752b24a5ecef0acc86c8
(`generateAliases`, `collapseAliasToUrn`, `inheritedChildAlias`)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from tools.plan_values import normalise

ROOT_STACK_TYPE = "pulumi:pulumi:Stack"


@dataclass
class Resource:
    urn: str  # as the engine names it (`engine_urns`), not the mock's
    type: str
    name: str
    inputs: dict[str, Any]
    replace_on_changes: list[str] = field(default_factory=list)
    custom: bool = True
    parent: str = ""  # the parent's engine URN; "" under the stack
    aliases: list[dict[str, Any]] = field(default_factory=list)  # alias specs, parents as engine URNs



def _urn(stack: str, project: str, parent: str, type_: str, name: str) -> str:
    """pulumi/pulumi sdk/go/common/resource/urn.go `NewURN`: the parent's qualified type, `$`, the type."""
    qualified = f"{_qualified_type(parent)}${type_}" if parent else type_
    return f"urn:pulumi:{stack}::{project}::{qualified}::{name}"


def _qualified_type(urn: str) -> str:
    return urn.split("::")[2]


def _name(urn: str) -> str:
    return "::".join(urn.split("::")[3:])


def _stack_and_project(urn: str) -> tuple[str, str]:
    parts = urn.split("::")
    return parts[0].removeprefix("urn:pulumi:"), parts[1]


def engine_urns(rows: list[dict[str, Any]]) -> list[Resource]:
    """Registrations (in order) as Resources named by the engine's URNs. The mock engine's URNs name
    only the immediate parent's type; the engine's name the whole chain of parents below the stack."""
    by_mock: dict[str, str] = {}
    resources = []
    for row in rows:
        stack, project = _stack_and_project(row["urn"])
        parent = by_mock.get(row.get("parent") or "", "")  # the stack, or a parent registered before
        urn = _urn(stack, project, parent, row["type"], row["name"])
        by_mock[row["urn"]] = urn
        aliases = [{**a, "parentUrn": by_mock.get(a["parentUrn"], a["parentUrn"])} if a.get("parentUrn") else a for a in row.get("aliases") or []]
        resources.append(
            Resource(urn, row["type"], row["name"], _normal(row["inputs"]), list(row.get("replaceOnChanges") or []), bool(row.get("custom", True)), parent, aliases)
        )
    return resources


def _collapse(resource: Resource, alias: dict[str, Any], matched: dict[str, str]) -> str:
    """step_generator.go `collapseAliasToUrn`."""
    if alias.get("urn"):
        return alias["urn"]
    stack, project = _stack_and_project(resource.urn)
    parent = alias.get("parentUrn") or ""
    if not parent:
        parent = resource.parent
    else:
        parent = matched.get(parent, parent)
    if alias.get("noParent") or (parent and _qualified_type(parent) == ROOT_STACK_TYPE):
        parent = ""
    return _urn(alias.get("stack") or stack, alias.get("project") or project, parent, alias.get("type") or resource.type, alias.get("name") or resource.name)


def _inherited(resource: Resource, type_: str, name: str, parent_alias: str) -> str:
    """step_generator.go `inheritedChildAlias`: a child named after its parent is renamed alike."""
    stack, project = _stack_and_project(resource.urn)
    parent_name = _name(resource.parent)
    alias_name = _name(parent_alias) + name[len(parent_name) :] if name.startswith(parent_name) else name
    return _urn(stack, project, parent_alias, type_, alias_name)


def aliases_of(resource: Resource, matched: dict[str, str]) -> list[str]:
    """step_generator.go `generateAliases`; `matched`: new URN → the old URN it took by an alias."""
    found = [_collapse(resource, a, matched) for a in resource.aliases]
    if resource.parent and resource.parent in matched:
        parent_alias = matched[resource.parent]
        found.append(_inherited(resource, resource.type, resource.name, parent_alias))
        for a in resource.aliases:
            collapsed = _collapse(resource, a, matched)
            found.append(_inherited(resource, _qualified_type(collapsed).split("$")[-1], _name(collapsed), parent_alias))
    return list(dict.fromkeys(found))


def match(before: dict[str, Resource], after: list[Resource]) -> dict[str, str]:
    """New URN → the old URN it updates (its own, or one of its aliases'), in registration order."""
    olds: dict[str, str] = {}
    by_alias: dict[str, str] = {}
    claimed: set[str] = set()
    for resource in after:
        for candidate in [resource.urn, *aliases_of(resource, by_alias)]:
            if candidate in before and candidate not in claimed:
                olds[resource.urn] = candidate
                claimed.add(candidate)
                if candidate != resource.urn:
                    by_alias[resource.urn] = candidate
                break
    return olds



def _normal(value: Any) -> Any:
    """JSON-shaped, integral floats as ints and unset fields dropped (the plan's normalisation),
    so both sides compare alike."""
    return normalise(json.loads(json.dumps(value, default=str)))
