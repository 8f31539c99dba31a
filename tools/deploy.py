"""CI's deployment of an environment (docs/ci.md "Continuous delivery"): the environment stack, then
each of its team stacks (tools/team_stacks.py), every one behind the destroy gate.

    python -m tools.deploy dev --organization acme --before <the commit main was at before the push>

For each stack, in this checkout (reviewed `main`):

1. The commits being deployed: those since the commit of the stack's last successful update
   (`pulumi stack history --json`, its `git.head`), when this checkout descends from it; else the
   push's own (`--before`..HEAD: a new stack, or one last updated from a commit `main` lacks).
2. `pulumi preview --json` of the stack, judged by the destroy gate (tools/destroy_gate.py) with the
   `Allow-Destroy:` trailers of those commits' messages: a deletion or replacement of a stateful
   resource that none of them declares stops this stack before any change.
3. `pulumi up` with the policy pack (a mandatory violation stops it before any change).

The environment stack comes first; when it fails (gate or update) its team stacks, which read its
outputs, are not attempted. One failing team stack does not hold back the other teams' reviewed
changes: every team stack is attempted, and the exit status is 1 when any failed, naming them.
The gate judges the preview the step runs just before `pulumi up`, in the same job and concurrency
group (nothing else updates the stack in between); `pulumi up` plans again, from the same code,
configuration and state.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

from config.stack_files import PROJECT_DIR
from tools import destroy_gate
from tools.team_stacks import check_environment_stack, team_stacks

SHA = re.compile(r"[0-9a-f]{40}")


def up_command(organization: str, stack: str) -> list[str]:
    return ["pulumi", "up", "--yes", "--non-interactive", "--diff", "--policy-pack", "policy", "--stack", f"{organization}/{stack}"]


def _pulumi(arguments: list[str], project_dir: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["pulumi", *arguments], cwd=project_dir, capture_output=True, text=True, check=False)


def _is_ancestor(commit: str, project_dir: Path) -> bool:
    found = subprocess.run(["git", "-C", str(project_dir), "merge-base", "--is-ancestor", "--end-of-options", commit, "HEAD"], capture_output=True)
    return found.returncode == 0


def deployed_since(organization: str, stack: str, before: str | None, project_dir: Path) -> tuple[str | None, str]:
    """(the commit after which this checkout's commits are being deployed to `stack`, why)."""
    history = _pulumi(["stack", "history", "--json", "--page-size", "100", "--stack", f"{organization}/{stack}"], project_dir)
    try:
        updates = json.loads(history.stdout) if history.returncode == 0 else []
    except ValueError:
        updates = []
    last = destroy_gate.last_deployed_commit(updates if isinstance(updates, list) else [])
    if last is not None and _is_ancestor(last, project_dir):
        return last, f"since {last[:12]}, the stack's last successful update"
    push = before if before and SHA.fullmatch(before) and set(before) != {"0"} and _is_ancestor(before, project_dir) else None
    why = "no successful update recorded a commit" if last is None else f"its last update's commit {last[:12]} is not in this history"
    return push, f"the push's own commits ({why})" if push else f"this commit alone ({why}, and no earlier commit of the push)"


def gate(organization: str, stack: str, before: str | None, project_dir: Path) -> bool:
    """The destroy gate on `pulumi preview --json` of `stack`, declarations from the commits being
    deployed; prints its verdict."""
    since, why = deployed_since(organization, stack, before, project_dir)
    messages = destroy_gate.commit_messages(str(project_dir), since)
    names, ignored = destroy_gate.trailer_declarations(messages)
    preview = _pulumi(["preview", "--json", "--non-interactive", "--stack", f"{organization}/{stack}"], project_dir)
    try:
        document = json.loads(preview.stdout)
    except ValueError:
        document = None
    if preview.returncode != 0 or not isinstance(document, dict):
        print(f"stack {stack}: `pulumi preview --json` failed, so nothing is deployed:\n{preview.stderr.strip()}", flush=True)
        return False
    banner, allowed = destroy_gate.verdict(stack, destroy_gate.from_preview(document), names, ignored)
    print(f"stack {stack}: declarations from {len(messages)} commit(s), {why}: {', '.join(names) or 'none'}", flush=True)
    print(banner or f"stack {stack}: deletes or replaces no stateful resource", flush=True)
    return allowed


def deploy_stack(organization: str, stack: str, before: str | None, project_dir: Path) -> bool:
    print(f"::group::destroy gate, then pulumi up {organization}/{stack}", flush=True)
    try:
        if not gate(organization, stack, before, project_dir):
            return False
        return subprocess.run(up_command(organization, stack), cwd=project_dir, check=False).returncode == 0
    finally:
        print("::endgroup::", flush=True)


def deploy(environment_stack: str, organization: str, before: str | None, project_dir: Path = PROJECT_DIR) -> int:
    if not deploy_stack(organization, environment_stack, before, project_dir):
        print(f"environment stack {environment_stack} failed to deploy: its team stacks were not attempted", file=sys.stderr)
        return 1
    failed = [stack for stack in team_stacks(environment_stack, project_dir) if not deploy_stack(organization, stack, before, project_dir)]
    if failed:
        print(f"team stacks of {environment_stack} that failed to deploy: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None, project_dir: Path = PROJECT_DIR) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.deploy", description=__doc__.split("\n\n")[0])
    parser.add_argument("environment_stack", help="the environment stack, e.g. dev")
    parser.add_argument("--organization", required=True, help="the Pulumi organization of the stacks")
    parser.add_argument("--before", help="the commit main was at before this push (github.event.before)")
    args = parser.parse_args(argv)
    check_environment_stack(parser, args.environment_stack, project_dir)
    return deploy(args.environment_stack, args.organization, args.before, project_dir)


if __name__ == "__main__":
    sys.exit(main())
