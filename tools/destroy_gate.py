"""The destroy gate: a change that deletes or replaces a resource holding a team's or the platform's
state is named first and fails, unless it is declared.

Stateful resources (`STATEFUL`): the host cluster, a tenant's virtual cluster instance and its
platform project, a team's GCP project, a tenant's backup plan (its backups go with it), the
platform's namespace. Deleting or replacing any of them loses what it holds, whatever the rest of
the plan does; Pulumi deletes a resource whose URN changed (type, name or parent) unless the new
one names the old as an alias, and replaces one whose replace-on-change input changed.

A declaration names what may go: `ALLOW_DESTROY=tenant-nlp` (comma- or space-separated), passed as
data through the environment (make puts it there; never pasted into a command line). A name
covers the resources named exactly so or starting with it and a hyphen: `tenant-nlp` covers every
resource of tenant nlp, `gke` the host cluster, `platform` the platform's namespace.

Used by the offline plan (tools/plan.py, against the committed stack files or `COMPARE=<ref>`) and
by CI (`python3 tools/destroy_gate.py --preview-json FILE`, on `pulumi preview --json` of the real
stack, declarations from the commits' `Allow-Destroy:` trailers; docs/ci.md "Deletions and
replacements"). This module needs nothing but the standard library, so CI runs it as the base
commit has it: a pull request cannot change the rules its own preview is judged by.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from dataclasses import dataclass

# Resource type → what deleting or replacing it loses.
STATEFUL = {
    "gcp:container/cluster:Cluster": "the host cluster: every tenant's control plane, its volumes and the platform run on it",
    "kubernetes:management.loft.sh/v1:VirtualClusterInstance": "a tenant's virtual cluster: its control plane's data, and every GPU node of the team (deleted with it)",
    "kubernetes:management.loft.sh/v1:Project": "a team's platform project: the platform deletes the virtual clusters in it",
    "gcp:organizations/project:Project": "a team's GCP project: its network, node identity, disks and everything else in it",
    "gcp:gkebackup/backupPlan:BackupPlan": "a tenant's backup plan: Backup for GKE deletes its backups with it",
    "kubernetes:core/v1:Namespace": "a namespace of the host cluster: every object and volume in it",
    "gcp:compute/disk:Disk": "a persistent disk and its data",
}
DESTRUCTIVE_OPS = ("delete", "replace", "delete-replaced", "create-replacement")
TRAILER = "Allow-Destroy"
ENVIRONMENT_VARIABLE = "ALLOW_DESTROY"


@dataclass(frozen=True)
class Destruction:
    action: str  # delete | replace
    type: str
    name: str
    because: str = ""  # why it is replaced, or that it was renamed without an alias

    @property
    def loses(self) -> str:
        return STATEFUL[self.type]


def declared(text: str | None) -> tuple[str, ...]:
    """The names an ALLOW_DESTROY value (or trailers' values) declares."""
    return tuple(dict.fromkeys(t for t in re.split(r"[\s,]+", text or "") if t))


def covered(destruction: Destruction, names: tuple[str, ...]) -> bool:
    return any(destruction.name == n or destruction.name.startswith(n + "-") for n in names)


def stateful(action: str, type_: str, name: str, because: str = "") -> Destruction | None:
    return Destruction(action, type_, name, because) if type_ in STATEFUL and action in ("delete", "replace") else None


def verdict(stack: str, destructions: list[Destruction], names: tuple[str, ...]) -> tuple[str, bool]:
    """The banner for the top of a plan or a CI log, and whether the change may go ahead."""
    if not destructions:
        return "", True
    undeclared = [d for d in destructions if not covered(d, names)]
    lines = [
        f"DESTROYS: stack {stack} would {'delete or replace' if undeclared else 'delete or replace (declared)'} "
        f"{len(destructions)} resource(s) that hold state:"
    ]
    for d in destructions:
        mark = "declared" if covered(d, names) else "NOT DECLARED"
        lines.append(f"  {d.action.upper():<7} {d.type}  {d.name}  [{mark}]: loses {d.loses}" + (f" ({d.because})" if d.because else ""))
    if undeclared:
        wanted = ",".join(dict.fromkeys(_declaration_for(d) for d in undeclared))
        lines.append(
            f"  Refused. If this is meant, declare it: {ENVIRONMENT_VARIABLE}={wanted} make plan … (in CI: a commit trailer "
            f"`{TRAILER}: {wanted}` in the pull request); if not, keep the resource (a rename needs an alias: "
            "pulumi.ResourceOptions(aliases=[pulumi.Alias(name=<old name>)]))."
        )
    return "\n".join(lines) + "\n", not undeclared


def _declaration_for(d: Destruction) -> str:
    """The shortest declaration that covers `d`: its tenant (`tenant-<name>`) or its own name."""
    match = re.match(r"(tenant-[a-z0-9]+(?:-[a-z0-9]+)*?)-(instance|platform-project|project|backup-plan)$", d.name)
    return match.group(1) if match else d.name


# --- pulumi preview --json (CI) --------------------------------------------------------------------


def urn_type_and_name(urn: str) -> tuple[str, str]:
    """A URN's resource type (the last of its qualified type) and name."""
    parts = urn.split("::")
    return parts[2].split("$")[-1], "::".join(parts[3:])


def from_preview(document: dict) -> list[Destruction]:
    """The stateful resources a `pulumi preview --json` document deletes or replaces (its `steps`:
    pulumi/pulumi pkg/display/json.go `PreviewStep`; ops from sdk/go/common/apitype/history.go)."""
    found: dict[str, Destruction] = {}
    for step in document.get("steps") or []:
        op = step.get("op")
        if op not in DESTRUCTIVE_OPS:
            continue
        type_, name = urn_type_and_name(step["urn"])
        action = "delete" if op == "delete" else "replace"
        reasons = ", ".join(step.get("replaceReasons") or [])
        d = stateful(action, type_, name, f"replaced because of {reasons}" if reasons else "")
        if d is not None:
            found.setdefault(step["urn"], d)
    return list(found.values())


def trailer_names(messages: str) -> tuple[str, ...]:
    """The names of every `Allow-Destroy:` trailer line in commit messages."""
    return declared(" ".join(m.group(1) for m in re.finditer(rf"^{TRAILER}:\s*(.+)$", messages, re.MULTILINE | re.IGNORECASE)))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="tools/destroy_gate.py", description="Refuse undeclared deletions and replacements of stateful resources in a `pulumi preview --json`.")
    p.add_argument("--preview-json", required=True, help="the output of `pulumi preview --json`")
    p.add_argument("--stack", required=True)
    p.add_argument("--commit-messages", help="a file of commit messages whose `Allow-Destroy:` trailers declare; default: $ALLOW_DESTROY")
    args = p.parse_args(argv)
    with open(args.preview_json) as f:
        document = json.load(f)
    if args.commit_messages:
        with open(args.commit_messages) as f:
            names = trailer_names(f.read())
    else:
        names = declared(os.environ.get(ENVIRONMENT_VARIABLE))
    banner, allowed = verdict(args.stack, from_preview(document), names)
    print(banner or f"stack {args.stack}: deletes or replaces no stateful resource")
    return 0 if allowed else 1


if __name__ == "__main__":
    sys.exit(main())
