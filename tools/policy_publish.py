"""Publish the policy pack to Pulumi Cloud under the version its files give it (policy/pack_version.py:
`<version of PulumiPolicy.yaml>-<digest of the pack's files>`), the version the bootstrap's policy
group enables when it is applied from the same commit (docs/guardrails.md "Publishing the pack").

    make policy-publish [ORG=<your-org>]     # python -m tools.policy_publish [--organization <org>] [--dry-run]

Before it publishes, it checks, and stops with what to do:
- policy/program_data.json and the stack records of policy/stacks/ are fresh (as `make policy-data --check`);
- the pack's files are committed: the bootstrap, applied from the same commit, derives the same version;
- the checkout contains `origin/main` (when this clone has that ref): a pack published from a branch
  behind main lacks the records main has, and the stacks of those would fail against it.

Then it sets `version:` in policy/PulumiPolicy.yaml to that version for the time of `pulumi policy
publish <org>` (the CLI takes a Python pack's version from that file: pulumi/pulumi
pkg/resource/plugin/analyzer_plugin.go, `proj.Version`, at commit 1b5949891b3cefcb9974752b24a5ecef0acc86c8)
and puts the file back. The organization: --organization, else the bootstrap's pulumiCloud.organization.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from config import yaml_io
from config.stack_files import PROJECT_DIR
from policy.pack_version import PROJECT_FILE, pack_version, with_version

MAIN = "origin/main"


class PublishError(Exception):
    """Why the pack is not published; nothing was uploaded."""


def _git(project_dir: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(project_dir), *args], capture_output=True, text=True)


def problems_before_publishing(project_dir: Path, *, check_data: bool = True) -> list[str]:
    """Everything that keeps this checkout's pack from being published, each with its fix."""
    problems = []
    if check_data:
        result = subprocess.run([sys.executable, "-m", "tools.policy_data", "--check"], cwd=project_dir, capture_output=True, text=True)
        if result.returncode != 0:
            problems.append(f"the pack's data is stale ({result.stderr.strip()}): run `make policy-data` and commit what it writes")
    if _git(project_dir, "rev-parse", "--git-dir").returncode != 0:
        return [*problems, f"{project_dir} is not a git checkout: publish from a clone, at the commit the bootstrap is applied from"]
    dirty = _git(project_dir, "status", "--porcelain", "--", "policy").stdout.strip()
    if dirty:
        problems.append(
            "policy/ has changes that are not committed, so the bootstrap applied from a commit would enable another version:\n"
            + "\n".join(f"    {line}" for line in dirty.splitlines())
        )
    if _git(project_dir, "rev-parse", "--verify", "--quiet", f"{MAIN}^{{commit}}").returncode == 0:
        if _git(project_dir, "merge-base", "--is-ancestor", MAIN, "HEAD").returncode != 0:
            problems.append(
                f"this checkout does not contain {MAIN}: its pack lacks what main has (other teams' records), and their stacks "
                f"would fail against it; run `git fetch origin && git merge {MAIN}` (the pull request's merge with main) first"
            )
    return problems


def organization_of(project_dir: Path) -> str | None:
    values = yaml_io.load((project_dir / "bootstrap" / "Pulumi.ci.yaml").read_text(), source="bootstrap/Pulumi.ci.yaml")["config"]
    return (values.get("gpu-platform-bootstrap:pulumiCloud") or {}).get("organization")


def publish(project_dir: Path, organization: str, *, dry_run: bool = False, check_data: bool = True) -> str:
    """Publishes policy/ under its version; returns the version. Raises PublishError."""
    problems = problems_before_publishing(project_dir, check_data=check_data)
    if problems:
        raise PublishError(f"{len(problems)} problem{'s' if len(problems) > 1 else ''}; nothing was published:\n" + "\n".join(f"  - {p}" for p in problems))
    pack_dir = project_dir / "policy"
    version = pack_version(pack_dir)
    if dry_run:
        return version
    project_file = pack_dir / PROJECT_FILE
    committed = project_file.read_text()
    try:
        project_file.write_text(with_version(committed, version))
        result = subprocess.run(["pulumi", "policy", "publish", organization], cwd=pack_dir, capture_output=True, text=True)
    except FileNotFoundError:
        raise PublishError("the pulumi CLI is not on PATH") from None
    finally:
        project_file.write_text(committed)
    if result.returncode != 0:
        raise PublishError(f"pulumi policy publish {organization} failed (version {version}):\n{result.stdout}{result.stderr}")
    return version


def main(argv: list[str] | None = None, project_dir: Path = PROJECT_DIR) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.policy_publish", description=__doc__.split("\n\n")[0])
    parser.add_argument("--organization", help="the Pulumi organization (default: bootstrap/Pulumi.ci.yaml pulumiCloud.organization)")
    parser.add_argument("--dry-run", action="store_true", help="check and print the version, publish nothing")
    args = parser.parse_args(argv)
    organization = args.organization or organization_of(project_dir)
    if not organization:
        print("error: no organization: pass --organization (ORG=) or set pulumiCloud.organization in bootstrap/Pulumi.ci.yaml", file=sys.stderr)
        return 1
    try:
        version = publish(project_dir, organization, dry_run=args.dry_run)
    except PublishError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    if args.dry_run:
        print(f"would publish {organization}/gpu-platform-guardrails version {version}")
    else:
        print(f"published {organization}/gpu-platform-guardrails version {version}; now apply the bootstrap from this commit: cd bootstrap && pulumi up")
    return 0


if __name__ == "__main__":
    sys.exit(main())
