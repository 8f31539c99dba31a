"""The offline plan's view of tenant isolation (hooks in tools/plan.py).

- Per tenant: its GCP project and isolation mode (`tenant_line`, `tenant_fields`).
- `--compare-to <git-ref>`: the stack as committed at that ref and as it is now, both evaluated
  offline, and what a deployment would create, delete, replace or update. A tenant that moves to
  another GCP project is named, with what that means (docs/migration.md "Migration").

Which input changes replace a resource rather than update it is the providers' business; the rules
below are the ones that matter for this program (names, projects, locations, IAM bindings, the
Kubernetes object's name and namespace, and the program's own `replace_on_changes`).
`pulumi preview --diff` against the real stack is authoritative.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from components.vcluster_values import VClusterValues
from config import node_properties as props
from config.isolation import placement

INSTANCE = "kubernetes:management.loft.sh/v1:VirtualClusterInstance"

# --- per tenant ------------------------------------------------------------------------------------


def tenant_fields(plan: Any, tenant_plan: Any) -> dict[str, Any]:
    """GCP project and isolation of one tenant of a StackPlan (tools/plan.py)."""
    facts = plan.loaded.facts
    tenant = tenant_plan.tenant
    where = placement(tenant, environment=facts.environment, host_project=facts.project, tenant_projects=facts.tenant_projects)
    if where is None:  # the program refused it already; the plan never gets here
        return {"gcpProject": None, "isolation": tenant.isolation}
    return {
        "gcpProject": where.project,
        "isolation": where.isolation,
        "projectCreated": where.create,
        "natAddresses": 0 if facts.legacy_infrastructure else tenant.network.nat_addresses,
        "nodeMetadata": tenant.node_metadata,
    }


def tenant_line(plan: Any, tenant_plan: Any) -> str:
    f = tenant_fields(plan, tenant_plan)
    if f["isolation"] == "shared":
        where = f"GCP project {f['gcpProject']} (shared with the environment and its other shared tenants: see the warning)"
    else:
        where = f"GCP project {f['gcpProject']} ({'created by Pulumi' if f['projectCreated'] else 'existing'}, the team's own)"
    return (
        f"isolation {f['isolation']}: {where}; control plane accepts joins from {f['natAddresses']} static NAT address(es) only; "
        f"node metadata {f['nodeMetadata']}"
    )


# --- --compare-to --------------------------------------------------------------------------------

# Inputs whose change replaces a resource, by type prefix ("" = every type).
REPLACED_BY = {
    "gcp:": ("project", "name", "region", "zone", "location"),
    "gcp:serviceaccount/account:": ("accountId",),
    "gcp:projects/iAMMember:": ("role", "member", "condition"),
    "gcp:serviceaccount/iAMMember:": ("serviceAccountId", "role", "member", "condition"),
    "gcp:compute/subnetworkIAMMember:": ("subnetwork", "role", "member", "condition"),
    "gcp:projects/service:": ("service",),
    "gcp:projects/iAMCustomRole:": ("roleId",),
    "gcp:compute/subnetwork:": ("network",),
    "gcp:compute/routerNat:": ("router",),
    "gcp:compute/address:": ("addressType", "networkTier"),
    "gcp:organizations/project:": ("projectId",),
    "gcp:monitoring/monitoredProject:": ("metricsScope",),
    "gcp:bigquery/dataset:": ("datasetId", "location"),
    "gcp:bigquery/table:": ("datasetId", "tableId"),
    "kubernetes:": ("metadata.name", "metadata.namespace"),
}

# Run in a fresh interpreter inside the tree of the git ref, with that tree's code: only APIs that
# every version of this project has (read_stack_values, run_program and its registrations).
_SNAPSHOT = r"""
import json, sys
from pathlib import Path
root = Path.cwd()
sys.path.insert(0, str(root))
from config.stack_files import read_stack_values
from tools.mock_engine import run_program
stack, out = sys.argv[1], sys.argv[2]
values = read_stack_values(root, stack)
outputs = {}
reference = values.get("gpu-platform:environmentStack")
if reference:
    env = str(reference).split("/")[-1]
    outputs[reference] = run_program(read_stack_values(root, env), stack=env, project_dir=root).outputs
run = run_program(values, stack=stack, stack_outputs=outputs, project_dir=root)
rows = [
    {"urn": r.urn, "type": r.type, "name": r.name, "custom": r.custom,
     "inputs": r.plain_inputs if hasattr(r, "plain_inputs") else r.inputs,
     "replaceOnChanges": list(getattr(r, "replace_on_changes", []))}
    for r in run.registrations
]
Path(out).write_text(json.dumps(rows, default=str))
"""


class CompareError(Exception):
    pass


@dataclass
class Resource:
    urn: str
    type: str
    name: str
    inputs: dict[str, Any]
    replace_on_changes: list[str] = field(default_factory=list)


@dataclass
class Change:
    action: str  # create | delete | replace | update
    type: str
    name: str
    because: list[str] = field(default_factory=list)  # changed inputs ("project: a → b")


@dataclass
class TenantMove:
    tenant: str
    before: str | None  # GCP project, None: the tenant did not exist
    after: str | None


@dataclass
class Changes:
    ref: str
    stack: str
    changes: list[Change]
    moves: list[TenantMove]
    note: str | None = None  # e.g. the stack did not exist at the ref

    def count(self, action: str) -> int:
        return sum(1 for c in self.changes if c.action == action)

    def to_dict(self) -> dict[str, Any]:
        return {
            "ref": self.ref,
            "note": self.note,
            "counts": {a: self.count(a) for a in ("create", "delete", "replace", "update")},
            "changes": [{"action": c.action, "type": c.type, "name": c.name, "because": c.because} for c in self.changes],
            "tenantMoves": [{"tenant": m.tenant, "from": m.before, "to": m.after} for m in self.moves],
        }


def resources_of(run: Any) -> dict[str, Resource]:
    """The custom resources of a ProgramRun (tools/mock_engine.py), by URN."""
    return {
        r.urn: Resource(r.urn, r.type, r.name, _normal(r.plain_inputs), list(getattr(r, "replace_on_changes", [])))
        for r in run.registrations
        if r.custom
    }


def snapshot_at(ref: str, stack: str, project_dir: Path) -> dict[str, Resource] | None:
    """The stack's custom resources as the code and stack files at `ref` register them, or None
    when the stack file did not exist there."""
    try:
        archive = subprocess.run(["git", "-C", str(project_dir), "archive", "--format=tar", ref], capture_output=True, check=True).stdout
    except FileNotFoundError:
        raise CompareError("git is not installed") from None
    except subprocess.CalledProcessError as e:
        raise CompareError(f"git cannot read {ref!r} in {project_dir}: {e.stderr.decode().strip()}") from None
    with tempfile.TemporaryDirectory(prefix="gpu-platform-compare-") as tmp:
        tree = Path(tmp) / "tree"
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(tree, filter="data")
        if not (tree / f"Pulumi.{stack}.yaml").exists():
            return None
        out = Path(tmp) / "resources.json"
        result = subprocess.run(
            [sys.executable, "-c", _SNAPSHOT, stack, str(out)], cwd=tree, capture_output=True, text=True, env={"PYTHONDONTWRITEBYTECODE": "1", **_env()}
        )
        if result.returncode != 0:
            tail = "\n".join(result.stderr.strip().splitlines()[-12:])
            raise CompareError(f"stack {stack} as committed at {ref} could not be evaluated offline:\n{tail}")
        rows = json.loads(out.read_text())
    return {
        r["urn"]: Resource(r["urn"], r["type"], r["name"], _normal(r["inputs"]), list(r.get("replaceOnChanges") or []))
        for r in rows
        if r.get("custom", True)
    }


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def compare(before: dict[str, Resource] | None, after: dict[str, Resource], *, ref: str, stack: str) -> Changes:
    changes: list[Change] = []
    note = None
    if before is None:
        note = f"stack {stack} does not exist at {ref}: everything is created"
        before = {}
    for urn, new in after.items():
        old = before.get(urn)
        if old is None:
            changes.append(Change("create", new.type, new.name))
            continue
        differing = _differing(old.inputs, new.inputs)
        if not differing:
            continue
        forcing = [k for k in differing if _forces_replacement(new, k)]
        replaced_paths = [p for p in new.replace_on_changes if _at(old.inputs, p) != _at(new.inputs, p)]
        because = [f"{k}: {_short(_at(old.inputs, k))} → {_short(_at(new.inputs, k))}" for k in forcing]
        because += [f"{p}: {_short(_at(old.inputs, p))} → {_short(_at(new.inputs, p))}" for p in replaced_paths]
        if because:
            changes.append(Change("replace", new.type, new.name, because))
        else:
            changes.append(Change("update", new.type, new.name, sorted(differing)))
    for urn, old in before.items():
        if urn not in after:
            changes.append(Change("delete", old.type, old.name))
    order = {"replace": 0, "delete": 1, "create": 2, "update": 3}
    changes.sort(key=lambda c: (order[c.action], c.type, c.name))
    return Changes(ref, stack, changes, _moves(before, after), note)


def _moves(before: dict[str, Resource], after: dict[str, Resource]) -> list[TenantMove]:
    def projects(resources: dict[str, Resource]) -> dict[str, str | None]:
        found = {}
        for r in resources.values():
            if r.type == INSTANCE:
                name = _at(r.inputs, "metadata.name")
                try:
                    entries = VClusterValues.parse(_at(r.inputs, "spec.template.helmRelease.values") or "").auto_nodes
                except ValueError:
                    entries = []
                found[name] = (entries[0].get("properties") or {}).get(props.PROJECT) if entries else None
        return found

    old, new = projects(before), projects(after)
    return [TenantMove(t, old.get(t), new.get(t)) for t in sorted(set(old) | set(new)) if old.get(t) != new.get(t)]


def render_changes(changes: Changes, host_project: str | None = None) -> str:
    out = [
        f"Changes against {changes.ref} (stack {changes.stack}): {changes.count('create')} to create, {changes.count('delete')} to delete, "
        f"{changes.count('replace')} to replace, {changes.count('update')} to update",
        "  Both sides evaluated offline under the mock engine; which changes replace a resource is this plan's reading of the "
        "providers: `pulumi preview --diff` is authoritative.",
    ]
    if changes.note:
        out.append(f"  {changes.note}")
    for move in changes.moves:
        def mode(project: str | None) -> str:
            return "" if project is None else " (shared)" if project == host_project else " (its own)"

        if move.before is None or move.after is None:
            continue
        out.append(
            f"  TENANT {move.tenant} MOVES from GCP project {move.before}{mode(move.before)} to {move.after}{mode(move.after)}: its network, NAT "
            "addresses, node identity and virtual cluster are replaced, and every VM of it is deleted with the old virtual cluster "
            "(docs/migration.md \"Migration\")."
        )
    for change in changes.changes:
        if change.action == "replace" and change.type == INSTANCE:
            out.append(
                f"  VIRTUAL CLUSTER RE-CREATED: {change.name} is deleted (its finalizers delete the tenant's VMs) and created anew; "
                "what runs inside it and its control-plane data are lost: back it up first (docs/migration.md \"Migration\")."
            )
    symbols = {"create": "+", "delete": "-", "replace": "±", "update": "~"}
    for change in changes.changes:
        detail = f"  ({'; '.join(change.because)})" if change.because and change.action == "replace" else (
            f"  (changed: {', '.join(change.because)})" if change.because else ""
        )
        out.append(f"  {symbols[change.action]} {change.action:<7} {change.type}  {change.name}{detail}")
    if not changes.changes:
        out.append("  no changes")
    return "\n".join(out) + "\n"


def compare_plan(plan: Any, ref: str) -> Changes:
    """The changes of a StackPlan's stack (tools/plan.py) since `ref`."""
    before = snapshot_at(ref, plan.stack, plan.stack_path.parent)
    return compare(before, resources_of(plan.run), ref=ref, stack=plan.stack)


# --- helpers -----------------------------------------------------------------------------------------


def _normal(value: Any) -> Any:
    """JSON-shaped, integral floats as ints and unset fields dropped (the plan's normalisation),
    so both sides compare alike."""
    from tools.plan import _normalise  # tools.plan imports this module

    return _normalise(json.loads(json.dumps(value, default=str)))


def _differing(old: dict[str, Any], new: dict[str, Any], prefix: str = "") -> list[str]:
    """Changed input paths: top-level keys, and one level into `metadata` (names and namespaces)."""
    keys = []
    for key in sorted(set(old) | set(new)):
        path = f"{prefix}{key}"
        a, b = old.get(key), new.get(key)
        if a == b:
            continue
        if key == "metadata" and isinstance(a, dict) and isinstance(b, dict) and not prefix:
            keys += _differing(a, b, "metadata.")
        else:
            keys.append(path)
    return keys


def _forces_replacement(resource: Resource, path: str) -> bool:
    return any(resource.type.startswith(prefix) and path in keys for prefix, keys in REPLACED_BY.items())


def _at(value: Any, path: str) -> Any:
    """`a.b["c/d"].e` in nested dicts; None where absent."""
    segments: list[str] = []
    rest = path
    while rest:
        if rest.startswith("["):
            end = rest.index("]")
            segments.append(json.loads(rest[1:end]))
            rest = rest[end + 1 :].lstrip(".")
        else:
            head = rest.split(".", 1)[0].split("[", 1)[0]
            segments.append(head)
            rest = rest[len(head) :].lstrip(".")
    for segment in segments:
        value = value.get(segment) if isinstance(value, dict) else None
    return value


def _short(value: Any) -> str:
    text = json.dumps(value, default=str) if not isinstance(value, str) else value
    return text if len(text) <= 60 else text[:57] + "..."
