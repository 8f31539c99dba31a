"""The upgrade check's and the committed-stack comparison's text (tools/plan_compare.py): what is
created, deleted, replaced and updated, tenants moving, security settings changing, and why a
comparison was skipped or is not gated."""

from __future__ import annotations

from config.tenant_security import PROD, SETTINGS, as_yaml
from tools import destroy_gate
from tools.isolation_plan import REACH
from tools.plan_committed import COMMITTED
from tools.plan_compare import INSTANCE, Changes


# The default comparison judges what is not committed yet; what is, other judges see.
UNCOMMITTED_ONLY = (
    "this gate sees uncommitted edits of the stack files only: once they are committed, `make plan COMPARE=origin/main` "
    "(the branch they go into) and CI's preview of the pull request judge them"
)


def render_changes(changes: Changes, host_project: str | None = None, environment: str | None = None) -> str:
    if changes.skipped:
        return changes.skipped + "\n"
    out = [
        f"Changes against {changes.ref} (stack {changes.stack}): {changes.count('create')} to create, {changes.count('delete')} to delete, "
        f"{changes.count('replace')} to replace, {changes.count('update')} to update",
        "  Both sides evaluated offline under the mock engine; which changes replace a resource is this plan's reading of the "
        "providers: `pulumi preview --diff` is authoritative.",
    ]
    if changes.ref == COMMITTED:
        out.append(f"  Deletions and replacements: {UNCOMMITTED_ONLY}.")
    if changes.ungated:
        out.append(f"  Not gated: {changes.ungated}.")
    if changes.note:
        out.append(f"  {changes.note}")

    def mode(project: str | None, host: str | None) -> str:
        return "" if project is None else " (shared)" if project == host else " (its own)"

    for move in changes.moves:
        if move.before is None or move.after is None:
            continue
        was = mode(move.before, changes.host_project_before or host_project)
        out.append(
            f"  TENANT {move.tenant} MOVES from GCP project {move.before}{was} to {move.after}{mode(move.after, host_project)}: its network, NAT "
            "addresses, node identity and virtual cluster are replaced, and every VM of it is deleted with the old virtual cluster "
            "(docs/migration.md \"Migration\")."
        )
    for c in changes.security:
        reach = REACH.get((c.setting, c.after))
        approval = (
            f"; in prod it needs platform.approvedTenantSecurity.{c.tenant}.{c.setting}: {as_yaml(c.after)} in the environment stack"
            if reach
            else ""
        )
        out.append(
            f"  SECURITY CHANGE: tenant {c.tenant}: {c.setting} {as_yaml(c.before)} → {as_yaml(c.after)}"
            + (f" ({reach})" if reach else " (back to the safe value)" if c.after == SETTINGS[c.setting][1] else "")
            + (approval if environment == PROD or environment is None else "")
            + "."
        )
    for change in changes.changes:
        if change.action == "replace" and change.type == INSTANCE:
            out.append(
                f"  VIRTUAL CLUSTER RE-CREATED: {change.name} is deleted (its finalizers delete the tenant's VMs) and created anew; "
                "what runs inside it and its control-plane data are lost: back it up first (docs/migration.md \"Migration\")."
            )
    symbols = {"create": "+", "delete": "-", "replace": "±", "update": "~"}
    for change in changes.changes:
        detail = f"  ({'; '.join(change.because)})" if change.because and change.action in ("replace", "delete") else (
            f"  (changed: {', '.join(change.because)})" if change.because else ""
        )
        out.append(f"  {symbols[change.action]} {change.action:<7} {change.type}  {change.name}{detail}")
    if not changes.changes:
        out.append("  no changes")
    return "\n".join(out) + "\n"





def gate(stack: str, changes: Changes | None, declared: tuple[str, ...]) -> tuple[str, bool]:
    """The DESTROYS block for the top (and the end) of a stack's plan, and whether the plan may pass:
    the destroy gate's verdict (tools/destroy_gate.py), or, for a comparison that is not gated (the
    committed stack file is the example as shipped), the same list with why it does not count."""
    destructions = changes.destructions() if changes else []
    if not (changes and changes.ungated and destructions):
        return destroy_gate.verdict(stack, destructions, declared)
    lines = [f"DESTROYS (not gated): stack {stack} would delete or replace {len(destructions)} resource(s) that hold state, against {changes.ref}:"]
    for d in destructions:
        lines.append(f"  {d.action.upper():<7} {d.type}  {d.name}  [not gated]: loses {d.loses}" + (f" ({d.because})" if d.because else ""))
    lines.append(
        f"  Not gated: {changes.ungated}. Commit your stack file before your first `pulumi up`: from then on the plan refuses "
        "what would delete or replace against it unless declared (ALLOW_DESTROY)."
    )
    return "\n".join(lines) + "\n", True


def no_comparison() -> str:
    """Said by a plan without COMPARE whose stack files are as committed (or not in git at all)."""
    return f"Deletions and replacements: no uncommitted edit of the stack files to compare with their commit; {UNCOMMITTED_ONLY}.\n"
