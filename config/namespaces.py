"""Which namespaces of a stack's configuration the program reads, and what a key in any other one is.

A key is `<namespace>:<name>`. The Pulumi CLI accepts any namespace and hands every key to the
program, so a misspelt namespace (`gpu_platform:tenants`, `gpu-platfrom:tenants`) is silently
configuration nobody reads: the stack then plans with no tenants, and `pulumi up` would delete
every inline team's cluster. Here a namespace close to one the program or its providers read is an
error with the key meant; any other namespace is named in a warning (it may belong to a tool of
the user's, and harms nothing).
"""

from __future__ import annotations

import difflib

from .errors import Problem

PROJECT_NAMESPACE = "gpu-platform"
# The namespaces of the providers this program runs with their config keys (requirements.txt pins
# them: pulumi-gcp, pulumi-kubernetes, pulumi-command) and the CLI's own `pulumi:` keys
# (`pulumi:tags`, `pulumi:template`, `pulumi:disable-default-providers`: Pulumi's docs,
# https://www.pulumi.com/docs/iac/concepts/config/, "Configuration keys").
KNOWN_NAMESPACES = (PROJECT_NAMESPACE, "gcp", "kubernetes", "command", "pulumi")


def _normal(namespace: str) -> str:
    return "".join(c for c in namespace.lower() if c.isalnum())


def close_namespace(namespace: str) -> str | None:
    """The known namespace `namespace` is a misspelling of, or None."""
    for known in KNOWN_NAMESPACES:
        if _normal(namespace) == _normal(known) or sorted(_normal(namespace)) == sorted(_normal(known)):
            return known
    close = difflib.get_close_matches(namespace.lower(), KNOWN_NAMESPACES, n=1, cutoff=0.75)
    return close[0] if close else None


def namespace_problems(keys: set[str]) -> tuple[list[Problem], list[str]]:
    """(errors, warnings) for the keys outside the known namespaces: an error for each key of a
    namespace close to a known one, one warning naming the keys of every other namespace."""
    problems, others = [], []
    for key in sorted(keys):
        namespace, _, name = key.partition(":")
        if not name or namespace in KNOWN_NAMESPACES:
            continue
        meant = close_namespace(namespace)
        if meant is not None:
            problems.append(
                Problem(key, f"namespace {namespace!r} is read by nothing; did you mean `{meant}:{name}`? (namespaces read: {', '.join(KNOWN_NAMESPACES)})")
            )
        else:
            others.append(key)
    warnings = []
    if others:
        warnings.append(
            f"configuration key(s) {', '.join(others)} belong to no namespace this program or its providers read "
            f"({', '.join(KNOWN_NAMESPACES)}): ignored; remove them unless another tool of yours reads them"
        )
    return problems, warnings
