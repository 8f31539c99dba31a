"""What a deployment of this checkout would do to a stack that runs another version: `make plan
COMPARE=<ref>` (`--compare-to`), the upgrade check (docs/operations.md "Upgrade"), and the plan's
default comparison with the stack files as committed (tools/plan_committed.py).

Both sides are evaluated offline under the mock engine, each with its own code and stack files, and
matched as Pulumi's engine matches a program's resources with a stack's state:

- **By URN, then by alias** (tools/engine_urns.py: the engine's URNs, and the aliases its step
  generator looks a resource up by). An old resource nobody claims is deleted; a new one that
  matches nothing is created. A renamed tenant instance without an alias is a deletion and a
  creation.
- **Replaced when an input that forces replacement changes** (`REPLACE_ON_CHANGE`, recorded from
  the providers' own schemas with their sources), or one of the resource's own `replace_on_changes`.

`pulumi preview --diff` against the real stack stays authoritative: what the providers compute
(defaults, server-side values) is not here. The destroy gate (tools/destroy_gate.py) judges the
result.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from components.vcluster_values import VClusterValues
from config import node_properties as props
from policy.vcluster_reader import TenantInstance
from tools import destroy_gate
from tools.engine_urns import Resource, engine_urns, match
from tools.property_paths import PathError, at, differences

CODE_DIR = Path(__file__).resolve().parent.parent  # this checkout of the code: its releases are its git's

INSTANCE = "kubernetes:management.loft.sh/v1:VirtualClusterInstance"

# Inputs whose change replaces a resource, by type prefix ("" = every type). Paths are the
# Pulumi (camelCase) input names.
# - Stateful GCP types: the top-level fields with `ForceNew: true` in terraform-provider-google,
#   which pulumi-gcp bridges (a ForceNew field's change is a replacement), read in
#   hashicorp/terraform-provider-google at commit e03b7622a26cf4e878f90bdccaca6aa3d03a7999:
#   google/services/container/resource_container_cluster.go (`ResourceContainerCluster`),
#   google/services/resourcemanager/resource_google_project.go, and
#   google/services/gkebackup/resource_gke_backup_backup_plan.go. Nested ForceNew fields (e.g. a
#   node config's) are not listed: the preview shows them.
# - Kubernetes objects: pulumi/pulumi-kubernetes provider/pkg/provider/forcenew.go
#   (`forceNewProperties`: `.metadata.name` and `.metadata.namespace` for every kind; the kinds it
#   adds fields for are none of the program's custom resources).
# - Other GCP types: names, projects and locations, and the identity fields of IAM members, as this
#   plan reads the same provider (not one by one against its source: none of them holds state).
REPLACE_ON_CHANGE = {
    "gcp:container/cluster:Cluster": (
        "name", "location", "clusterIpv4Cidr", "description", "enableKubernetesAlpha", "enableTpu", "enableAutopilot",
        "initialNodeCount", "confidentialNodes", "network", "nodePools", "project", "subnetwork", "ipAllocationPolicy",
        "networkingMode", "defaultMaxPodsPerNode", "datapathProvider", "dataplaneOptimizationMode",
    ),
    "gcp:organizations/project:Project": ("projectId", "tags"),
    "gcp:gkebackup/backupPlan:BackupPlan": ("cluster", "location", "name", "project"),
    "kubernetes:": ("metadata.name", "metadata.namespace"),
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
    "gcp:monitoring/monitoredProject:": ("metricsScope",),
    "gcp:bigquery/dataset:": ("datasetId", "location"),
    "gcp:bigquery/table:": ("datasetId", "tableId"),
}

# Run in a fresh interpreter, once for several trees (each a checkout of a git ref): each tree's own
# code evaluates the stack files of a directory (the tree's own, or the user's for the upgrade
# check), its modules dropped before the next tree's are imported (the SDKs, the slow part, load
# once). Only APIs every version of this project has: read_stack_values, run_program and its
# registrations (name, type, parent, urn, custom, inputs; aliases where recorded). A stack that code
# refuses is written as its error.
_SNAPSHOT = r"""
import json, sys
from pathlib import Path

def evaluate(root, stack):
    from config.stack_files import read_stack_values
    from tools.mock_engine import run_program
    values = read_stack_values(root, stack)
    outputs = {}
    reference = values.get("gpu-platform:environmentStack")
    if reference:
        env = str(reference).split("/")[-1]
        outputs[reference] = run_program(read_stack_values(root, env), stack=env, project_dir=root).outputs
    run = run_program(values, stack=stack, stack_outputs=outputs, project_dir=root)
    return [
        {"urn": r.urn, "type": r.type, "name": r.name, "parent": r.parent, "custom": r.custom,
         "inputs": r.plain_inputs if hasattr(r, "plain_inputs") else r.inputs,
         "replaceOnChanges": list(getattr(r, "replace_on_changes", [])), "aliases": list(getattr(r, "aliases", []))}
        for r in run.registrations
    ]

jobs = json.loads(sys.argv[1])
roots = {str(Path(job[0]).resolve()) for job in jobs}
installed = (sys.prefix + "/", sys.base_prefix + "/")  # the SDKs (a tree may hold the venv, .venv)
previous = None
for tree, stack, out, stacks_dir in jobs:
    root = Path(tree).resolve()
    if root != previous:  # another tree: drop the modules of the one before
        for name, module in list(sys.modules.items()):
            path = str(getattr(module, "__file__", None) or "")
            if any(path.startswith(r + "/") for r in roots) and not path.startswith(installed):
                del sys.modules[name]
        if previous is not None:
            sys.path.remove(str(previous))
        sys.path.insert(0, str(root))
        previous = root
    stacks_dir = Path(stacks_dir).resolve()
    try:
        rows = evaluate(stacks_dir, stack) if (stacks_dir / f"Pulumi.{stack}.yaml").exists() else None
    except Exception as e:  # that code refuses these stack files (or fails on them): said, not a traceback
        rows = {"error": str(e).strip() or type(e).__name__}
    Path(out).write_text(json.dumps(rows, default=str))
"""


class CompareError(Exception):
    pass


@dataclass
class Change:
    action: str  # create | delete | replace | update
    type: str
    name: str
    because: list[str] = field(default_factory=list)  # changed inputs ("project: a → b"), or why deleted


@dataclass
class TenantMove:
    tenant: str
    before: str | None  # GCP project, None: the tenant did not exist
    after: str | None


@dataclass
class SecurityChange:
    tenant: str
    setting: str  # a key of config/tenant_security.py SETTINGS
    before: Any
    after: Any


@dataclass
class Changes:
    ref: str
    stack: str
    changes: list[Change]
    moves: list[TenantMove]
    note: str | None = None  # e.g. the stack did not exist at the ref
    security: list[SecurityChange] = field(default_factory=list)
    skipped: str | None = None  # why there is no comparison (then nothing else is set)
    host_project_before: str | None = None  # the environment's GCP project on the old side, when it differs
    ungated: str | None = None  # why its deletions and replacements are shown but do not fail the plan

    def count(self, action: str) -> int:
        return sum(1 for c in self.changes if c.action == action)

    def destructions(self) -> list[destroy_gate.Destruction]:
        """The deletions and replacements of stateful resources (tools/destroy_gate.py)."""
        found = (destroy_gate.stateful(c.action, c.type, c.name, "; ".join(c.because)) for c in self.changes)
        return [d for d in found if d is not None]

    def to_dict(self) -> dict[str, Any]:
        return {
            "ref": self.ref,
            "note": self.note,
            "skipped": self.skipped,
            "ungated": self.ungated,
            "counts": {a: self.count(a) for a in ("create", "delete", "replace", "update")},
            "changes": [{"action": c.action, "type": c.type, "name": c.name, "because": c.because} for c in self.changes],
            "tenantMoves": [{"tenant": m.tenant, "from": m.before, "to": m.after} for m in self.moves],
            "securityChanges": [{"tenant": c.tenant, "setting": c.setting, "from": c.before, "to": c.after} for c in self.security],
        }


# --- both sides ---------------------------------------------------------------------------------------


def resources_of(run: Any) -> list[Resource]:
    """Every resource of a ProgramRun (tools/mock_engine.py), components too, in registration order."""
    return engine_urns(
        [
            {"urn": r.urn, "type": r.type, "name": r.name, "parent": r.parent, "custom": r.custom, "inputs": r.plain_inputs,
             "replaceOnChanges": r.replace_on_changes, "aliases": r.aliases}
            for r in run.registrations
        ]
    )


@dataclass(frozen=True)
class NotPlanned:
    """A stack that the code of a tree refuses (or fails on), with what it said."""

    error: str


def snapshots_at(
    refs: list[str], stacks: list[str], project_dir: Path, host_projects: dict[tuple[str, str], str | None] | None = None
) -> dict[tuple[str, str], list[Resource] | None]:
    """Per git ref and stack, the stack's resources as the code and stack files at that ref register
    them (None where the stack file did not exist), every one evaluated in one interpreter; and into
    `host_projects`, the environment's GCP project there."""
    with tempfile.TemporaryDirectory(prefix="gpu-platform-compare-") as tmp:
        jobs, keys = [], []
        for i, ref in enumerate(refs):
            tree = Path(tmp) / f"tree{i}" / "gpu-platform"
            extract(ref, project_dir, tree)
            for stack in stacks:
                jobs.append((str(tree), stack, str(Path(tmp) / f"resources-{i}-{stack}.json"), str(tree)))
                keys.append((ref, stack))
                if host_projects is not None:
                    host_projects[ref, stack] = host_project_of(tree, stack)
        found = evaluate_trees(jobs, keys)
    for (ref, stack), resources in found.items():
        if isinstance(resources, NotPlanned):
            raise CompareError(f"Pulumi.{stack}.yaml as committed at {ref} does not plan with the code of {ref}:\n{indented(resources.error)}")
    return found  # type: ignore[return-value]


def code_snapshot(release: str, stack: str, project_dir: Path) -> list[Resource]:
    """The upgrade check's old side: the stack's resources as the code of `release` (a release of this
    repository's code) registers them from the stack files of `project_dir` (the user's, as they are
    now; with the release's own Pulumi.yaml, whose declared keys and defaults are that code's)."""
    import shutil

    with tempfile.TemporaryDirectory(prefix="gpu-platform-upgrade-") as tmp:
        tree, stacks_dir = Path(tmp) / "code" / "gpu-platform", Path(tmp) / "stacks"
        extract(release, CODE_DIR, tree)
        stacks_dir.mkdir()
        shutil.copy(tree / "Pulumi.yaml", stacks_dir / "Pulumi.yaml")
        for path in project_dir.glob("Pulumi.*.yaml"):
            shutil.copy(path, stacks_dir / path.name)
        [resources] = evaluate_trees([(str(tree), stack, str(Path(tmp) / "resources.json"), str(stacks_dir))], [stack]).values()
    if isinstance(resources, NotPlanned):
        raise CompareError(
            f"your Pulumi.{stack}.yaml does not plan with the code of {release}:\n{indented(resources.error)}\n"
            f"The upgrade check runs {release}'s code on your stack files as deployed with it. A key only the new version "
            "reads (one you add for the upgrade) goes in after the check; or compare with the commit you deployed from: "
            "make plan COMPARE=<that commit> (its code and stack files)."
        )
    assert resources is not None  # the stack file exists: the plan read it
    return resources


def evaluate_trees(jobs: list[tuple[str, str, str, str]], keys: list[Any]) -> dict[Any, list[Resource] | NotPlanned | None]:
    """Each job (code tree, stack, output file, directory of the stack files) evaluated with that
    tree's code, all in one fresh interpreter (the SDKs load once): its resources, None where the
    stack file does not exist, NotPlanned where that code refuses it."""
    env = {"PYTHONDONTWRITEBYTECODE": "1", **{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}}
    result = subprocess.run([sys.executable, "-c", _SNAPSHOT, json.dumps(jobs)], cwd=Path(jobs[0][0]).parent, capture_output=True, text=True, env=env)
    if result.returncode != 0:
        tail = "\n".join(result.stderr.strip().splitlines()[-12:])
        raise CompareError(f"stack {', '.join(sorted({job[1] for job in jobs}))} as committed could not be evaluated offline:\n{tail}")
    found = {}
    for key, (_, _, out, _) in zip(keys, jobs):
        rows = json.loads(Path(out).read_text())
        found[key] = None if rows is None else NotPlanned(rows["error"]) if isinstance(rows, dict) else engine_urns(rows)
    return found


def snapshot_at(ref: str, stack: str, project_dir: Path) -> list[Resource] | None:
    return snapshots_at([ref], [stack], project_dir)[ref, stack]


def host_project_of(root: Path, stack: str) -> str | None:
    """The environment's GCP project as the stack files under `root` say (a team stack's, its
    environment's); None when they do not say."""
    from config.stack_files import StackFileError, read_stack_values

    try:
        values = read_stack_values(root, stack)
        reference = values.get("gpu-platform:environmentStack")
        if reference:
            values = read_stack_values(root, str(reference).split("/")[-1])
    except StackFileError:
        return None
    project = values.get("gcp:project")
    return project if isinstance(project, str) else None


def is_release(ref: str) -> bool:
    """`ref` names a release of this code (`v0.1.0`: its tag, or its CHANGELOG.md section: tools/releases.py)."""
    from tools.releases import release_commit

    return release_commit(ref, CODE_DIR) is not None


def resolve_ref(ref: str, project_dir: Path) -> str:
    """The commit (its full SHA) a user's ref names: a release (`v0.1.0`) through tools/releases.py
    (its tag, or its CHANGELOG.md section in a clone without tags), anything else as git resolves it.
    Only that SHA reaches git's other commands: a ref is data, and `git rev-parse --verify
    --end-of-options "<ref>^{commit}"` never reads it as an option (`--output=…` would be one to
    `git archive`)."""
    from tools.releases import release_commit

    name = release_commit(ref, project_dir) or ref
    try:
        result = subprocess.run(
            ["git", "-C", str(project_dir), "rev-parse", "--verify", "--quiet", "--end-of-options", f"{name}^{{commit}}"], capture_output=True, text=True
        )
    except FileNotFoundError:
        raise CompareError("git is not installed") from None
    sha = result.stdout.strip()
    if result.returncode != 0 or not re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", sha):
        raise CompareError(f"git cannot read {ref!r} in {project_dir}: not a commit; allowed: a branch, tag, release (vX.Y.Z) or commit of this clone")
    return sha


def extract(ref: str, project_dir: Path, tree: Path) -> None:
    """The files of the git ref (resolved to its commit by `resolve_ref`) written under `tree`."""
    sha = resolve_ref(ref, project_dir)
    try:
        archive = subprocess.run(["git", "-C", str(project_dir), "archive", "--format=tar", sha], capture_output=True, check=True).stdout
    except FileNotFoundError:
        raise CompareError("git is not installed") from None
    except subprocess.CalledProcessError as e:
        raise CompareError(f"git cannot read {ref!r} ({sha}) in {project_dir}: {e.stderr.decode().strip()}") from None
    tree.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(tree, filter="data")


def compare_plan(plan: Any, ref: str) -> Changes:
    """The changes of a StackPlan's stack (tools/plan.py) since `ref`: for a release, the upgrade
    check (that release's code on this checkout's stack files, `code_snapshot`: a release's own stack
    files are the example, never the user's); for any other git ref, its code and stack files."""
    project_dir = plan.stack_path.parent
    host_project_before = None  # the same stack files on both sides
    if is_release(ref):
        before = code_snapshot(ref, plan.stack, project_dir)
        label = f"{ref}'s code on your stack files"
    else:
        hosts: dict[tuple[str, str], str | None] = {}
        before, label = snapshots_at([ref], [plan.stack], project_dir, hosts)[ref, plan.stack], ref
        host_project_before = hosts[ref, plan.stack]
    return compare(
        before, resources_of(plan.run), ref=label, stack=plan.stack, host_project=plan.loaded.facts.project, host_project_before=host_project_before
    )


def compare(
    before: list[Resource] | None, after: list[Resource], *, ref: str, stack: str, host_project: str | None = None, host_project_before: str | None = None
) -> Changes:
    """`host_project`: the environment's GCP project (a tenant in it is shared), on the new side and,
    unless `host_project_before` says otherwise, on the old."""
    changes: list[Change] = []
    note = None
    if before is None:
        note = f"stack {stack} does not exist at {ref}: everything is created"
        before = []
    olds = {r.urn: r for r in before}
    matched = match(olds, after)
    created: dict[str, list[str]] = {}
    for new in after:
        if not new.custom:
            continue
        old = olds.get(matched.get(new.urn, ""))
        if old is None:
            changes.append(Change("create", new.type, new.name))
            created.setdefault(new.type, []).append(new.name)
            continue
        differing = _differing(old.inputs, new.inputs)
        if old.type != new.type:
            differing.append("(type)")
        if not differing:
            continue
        forcing = [k for k in differing if _forces_replacement(new, k)]
        because = [f"{k}: {_short(at(old.inputs, k))} → {_short(at(new.inputs, k))}" for k in forcing]
        for path in new.replace_on_changes:  # any change under the path replaces (tools/property_paths.py)
            try:
                found = differences(old.inputs, new.inputs, path)
            except PathError as e:
                raise CompareError(f"{new.type} {new.name}: replace_on_changes {e}") from None
            because += [f"{where}: {_short(a)} → {_short(b)}" for where, a, b in found]
        because = list(dict.fromkeys(because))
        if because:
            changes.append(Change("replace", new.type, new.name, because))
        else:
            changes.append(Change("update", new.type, new.name, sorted(differing)))
    taken = set(matched.values())
    for old in before:
        if old.custom and old.urn not in taken:
            twin = max(created.get(old.type, []), key=lambda n: len(os.path.commonprefix([n, old.name])), default=None)
            why = [f"its URN changed ({twin} of the same type is created) without an alias naming the old one"] if twin else []
            changes.append(Change("delete", old.type, old.name, why))
    order = {"replace": 0, "delete": 1, "create": 2, "update": 3}
    changes.sort(key=lambda c: (order[c.action], c.type, c.name))
    by_urn_before = {r.urn: r for r in before if r.custom}
    by_urn_after = {r.urn: r for r in after if r.custom}
    old_host = host_project_before or host_project
    security = _security_changes(by_urn_before, by_urn_after, old_host, host_project)
    return Changes(ref, stack, changes, _moves(by_urn_before, by_urn_after), note, security, host_project_before=old_host if old_host != host_project else None)


def _moves(before: dict[str, Resource], after: dict[str, Resource]) -> list[TenantMove]:
    def projects(resources: dict[str, Resource]) -> dict[str, str | None]:
        found = {}
        for r in resources.values():
            if r.type == INSTANCE:
                name = at(r.inputs, "metadata.name")
                try:
                    entries = VClusterValues.parse(at(r.inputs, "spec.template.helmRelease.values") or "").auto_nodes
                except ValueError:
                    entries = []
                found[name] = (entries[0].get("properties") or {}).get(props.PROJECT) if entries else None
        return found

    old, new = projects(before), projects(after)
    return [TenantMove(t, old.get(t), new.get(t)) for t in sorted(set(old) | set(new)) if old.get(t) != new.get(t)]


def _settings(resources: dict[str, Resource], host_project: str | None) -> dict[str, dict[str, Any]]:
    """Per tenant, its security settings as its instance shows them (isolation when the
    environment's project is known), and its GCP project."""
    found = {}
    for r in resources.values():
        if r.type != INSTANCE:
            continue
        try:
            instance = TenantInstance.parse(at(r.inputs, "spec") or {}, at(r.inputs, "metadata.name"))
        except ValueError:
            continue
        found[str(instance.name)] = {**instance.security_settings(host_project), "gcpProject": instance.project}
    return found


def _security_changes(before: dict[str, Resource], after: dict[str, Resource], old_host: str | None, new_host: str | None) -> list[SecurityChange]:
    old, new = _settings(before, old_host), _settings(after, new_host)
    changes = []
    for tenant in sorted(set(old) & set(new)):
        for key in sorted(set(old[tenant]) | set(new[tenant])):
            if key != "gcpProject" and old[tenant].get(key) != new[tenant].get(key):
                changes.append(SecurityChange(tenant, key, old[tenant].get(key), new[tenant].get(key)))
    return changes



# --- helpers -----------------------------------------------------------------------------------------


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
    return any(resource.type.startswith(prefix) and path in keys for prefix, keys in REPLACE_ON_CHANGE.items())


def indented(text: str) -> str:
    return "\n".join("  " + line if line.strip() else line for line in text.strip().splitlines())


def _short(value: Any) -> str:
    text = json.dumps(value, default=str) if not isinstance(value, str) else value
    return text if len(text) <= 60 else text[:57] + "..."

