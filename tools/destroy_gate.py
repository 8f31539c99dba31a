"""The destroy gate: a change that deletes or replaces a resource holding a team's or the platform's
state is named first and fails, unless it is declared.

Stateful resources (`STATEFUL`): the host cluster, a tenant's virtual cluster instance and its
platform project, a team's GCP project, a tenant's backup plan (its backups go with it), the
platform's namespace. Deleting or replacing any of them loses what it holds, whatever the rest of
the plan does; Pulumi deletes a resource whose URN changed (type, name or parent) unless the new
one names the old as an alias, and replaces one whose replace-on-change input changed.

A declaration is exactly one of the two forms the gate's refusal prints, nothing looser:

- `tenant-<team>`: that team's stateful resources, each of its type and exact name
  (`TENANT_RESOURCES`): its virtual cluster instance `tenant-<team>-instance`, platform project
  `tenant-<team>-platform-project`, GCP project `tenant-<team>-project-project` and backup plan
  `tenant-<team>-backup-plan`. `tenant-nlp` covers nothing of team `nlp-x`, and `tenant` nothing.
- a stateful resource's full Pulumi name (`gke-cluster`, `platform-namespace`): the stateful
  resources of exactly that name.

`make plan` takes them from `ALLOW_DESTROY=tenant-nlp,gke-cluster` (comma- or space-separated),
passed as data through the environment (never pasted into a command line). CI takes them from the
commits' `Allow-Destroy:` git trailers (same lists), parsed by git itself (`git interpret-trailers
--parse`: only the message's closing block of trailers counts, never a line in its body), the key
spelled exactly `Allow-Destroy`.

Used by the offline plan (tools/plan.py, against the committed stack files or `COMPARE=<ref>`), by
CI's previews (`python3 tools/destroy_gate.py --preview-json FILE --commit-messages FILE`, on
`pulumi preview --json` of the real stack, the pull request's messages from `git log -z
--format=%B`; docs/ci.md "Deletions and replacements") and by CI's deployments (tools/deploy.py,
with the messages of the commits being deployed). This module needs nothing but the standard
library and git, so CI's previews run it as the base commit has it: a pull request cannot change
the rules its own preview is judged by.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
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
# What `tenant-<team>` covers: per type, the name of the team's resource of that type (the program's
# components: tenant-<team> (__main__.py) → -instance, -platform-project (components/tenant_vcluster.py),
# -project → -project (components/tenant_project.py), -backup → -plan (components/tenant_backup.py)).
TENANT_RESOURCES = {
    "kubernetes:management.loft.sh/v1:VirtualClusterInstance": "instance",
    "kubernetes:management.loft.sh/v1:Project": "platform-project",
    "gcp:organizations/project:Project": "project-project",
    "gcp:gkebackup/backupPlan:BackupPlan": "backup-plan",
}
DESTRUCTIVE_OPS = ("delete", "replace", "delete-replaced", "create-replacement")
TRAILER = "Allow-Destroy"
ENVIRONMENT_VARIABLE = "ALLOW_DESTROY"
# A team's name (config/tenant.py) and a Pulumi name of the program's stateful resources.
NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")


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
    """The declarations an ALLOW_DESTROY value (or a trailer's value) lists, comma- or space-separated."""
    return tuple(dict.fromkeys(t for t in re.split(r"[\s,]+", text or "") if t))


def tenant_of(destruction: Destruction) -> str | None:
    """The team whose resource `destruction` is, by its type and exact name, or None."""
    suffix = TENANT_RESOURCES.get(destruction.type)
    if suffix is None:
        return None
    match = re.fullmatch(rf"tenant-({NAME.pattern})-{suffix}", destruction.name)
    return match.group(1) if match else None


def covered(destruction: Destruction, names: tuple[str, ...]) -> bool:
    """Whether a declaration covers `destruction`: its team's `tenant-<team>`, or its full name."""
    team = tenant_of(destruction)
    return destruction.name in names or (team is not None and f"tenant-{team}" in names)


def stateful(action: str, type_: str, name: str, because: str = "") -> Destruction | None:
    return Destruction(action, type_, name, because) if type_ in STATEFUL and action in ("delete", "replace") else None


def verdict(stack: str, destructions: list[Destruction], names: tuple[str, ...], ignored: tuple[str, ...] = ()) -> tuple[str, bool]:
    """The banner for the top of a plan or a CI log, and whether the change may go ahead. `ignored`:
    why trailers that look like declarations were not taken (printed with a refusal)."""
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
        wanted = ",".join(dict.fromkeys(declaration_for(d) for d in undeclared))
        lines.append(
            f"  Refused. If this is meant, declare it: {ENVIRONMENT_VARIABLE}={wanted} make plan … (in CI: a git trailer "
            f"`{TRAILER}: {wanted}` closing a commit message of the change); if not, keep the resource (a rename needs an alias: "
            "pulumi.ResourceOptions(aliases=[pulumi.Alias(name=<old name>)]))."
        )
        idle = [n for n in names if not any(covered(d, (n,)) for d in destructions)]
        if idle:
            lines.append(
                f"  Declared but covering none of these: {', '.join(idle)} (a declaration is `tenant-<team>` or a stateful "
                "resource's full name, exactly)."
            )
        lines += [f"  Not taken: {why}" for why in ignored]
    return "\n".join(lines) + "\n", not undeclared


def declaration_for(d: Destruction) -> str:
    """The declaration the gate prints for `d`: its team's (`tenant-<team>`), else its full name."""
    team = tenant_of(d)
    return f"tenant-{team}" if team is not None else d.name


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


def _git_environment(directory: str) -> dict[str, str]:
    """git with none of the machine's or user's configuration (no `trailer.*` that changes what
    counts as a trailer) and no repository discovered around `directory`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    return {**env, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CEILING_DIRECTORIES": os.path.dirname(directory)}


def trailers(message: str) -> list[tuple[str, str]]:
    """(key, value) of each git trailer of a commit message, as git parses them (`git interpret-trailers
    --parse`: the closing paragraph of `Key: value` lines, continuation lines unfolded)."""
    with tempfile.TemporaryDirectory(prefix="destroy-gate-") as directory:
        result = subprocess.run(
            ["git", "interpret-trailers", "--parse"], input=message, capture_output=True, text=True, cwd=directory, env=_git_environment(directory), check=True
        )
    return [(key.strip(), value.strip()) for key, _, value in (line.partition(":") for line in result.stdout.splitlines())]


def trailer_declarations(messages: list[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the declarations of the messages' `Allow-Destroy:` trailers, why other trailers that look
    like declarations were not taken: a key spelled otherwise, a value that is no declaration)."""
    names: list[str] = []
    ignored: list[str] = []
    for message in messages:
        for key, value in trailers(message):
            if key.lower() != TRAILER.lower():
                continue
            if key != TRAILER:
                ignored.append(f"trailer {key!r}: the key is spelled {TRAILER!r}")
                continue
            for name in declared(value):
                if NAME.fullmatch(name):
                    names.append(name)
                else:
                    ignored.append(f"{TRAILER}: {name!r} is not `tenant-<team>` or a resource's full name")
    return tuple(dict.fromkeys(names)), tuple(dict.fromkeys(ignored))


def split_messages(text: str) -> list[str]:
    """The commit messages of `git log -z --format=%B` (NUL-separated)."""
    return [m for m in text.split("\0") if m.strip()]


def commit_messages(repository: str, since: str | None, head: str = "HEAD") -> list[str]:
    """The messages of the commits `since..head` (of `head` alone when `since` is None)."""
    limit, revision = ([], f"{since}..{head}") if since else (["-1"], head)
    result = subprocess.run(
        ["git", "-C", repository, "log", "-z", "--format=%B", *limit, "--end-of-options", revision], capture_output=True, text=True, check=True
    )
    return split_messages(result.stdout)


# --- What a deployment deploys (CI's deploy jobs: tools/deploy.py) ----------------------------------


def last_deployed_commit(history: list) -> str | None:
    """The commit of the stack's last successful update, from `pulumi stack history --json`
    (pulumi/pulumi pkg/cmd/pulumi/stack/stack_history.go `updateInfoJSON`: kind, result, version,
    environment; the CLI records the checkout's HEAD as environment `git.head`,
    pkg/cmd/pulumi/metadata/metadata.go, key in pkg/backend/updates.go; commit
    1b5949891b3cefcb9974752b24a5ecef0acc86c8). None when no update succeeded or none recorded it."""
    succeeded = [
        u for u in history
        if isinstance(u, dict) and u.get("kind") == "update" and u.get("result") == "succeeded"
        and re.fullmatch(r"[0-9a-f]{40}", str((u.get("environment") or {}).get("git.head", "")))
    ]
    if not succeeded:
        return None
    return max(succeeded, key=lambda u: int(u.get("version") or 0))["environment"]["git.head"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="tools/destroy_gate.py", description="Refuse undeclared deletions and replacements of stateful resources in a `pulumi preview --json`.")
    p.add_argument("--preview-json", required=True, help="the output of `pulumi preview --json`")
    p.add_argument("--stack", required=True)
    p.add_argument(
        "--commit-messages",
        help="a file of commit messages (`git log -z --format=%%B`: NUL-separated) whose `Allow-Destroy:` git trailers declare; default: $ALLOW_DESTROY",
    )
    args = p.parse_args(argv)
    with open(args.preview_json) as f:
        document = json.load(f)
    ignored: tuple[str, ...] = ()
    if args.commit_messages:
        with open(args.commit_messages) as f:
            names, ignored = trailer_declarations(split_messages(f.read()))
    else:
        names = declared(os.environ.get(ENVIRONMENT_VARIABLE))
    banner, allowed = verdict(args.stack, from_preview(document), names, ignored)
    print(banner or f"stack {args.stack}: deletes or replaces no stateful resource")
    return 0 if allowed else 1


if __name__ == "__main__":
    sys.exit(main())
