"""`gpu-platform:platformAdminPassword`: the vCluster Platform admin's password (environment stacks).

Unset or empty, the program generates one (32 characters). Set, it must be a Pulumi secret and a
string of at least MIN_LENGTH characters. Problems name the key and never quote the value.

Why a floor of our own: the platform chart takes any string (loft-sh/loft tag v4.11.2,
chart/templates/deployment.yaml hands the Secret named by `admin.passwordSecretRef` to the platform
as `LOFT_ADMIN_PASSWORD`; the chart has no values schema and sets no length). The admin may do
everything on the platform and logs in to its UI and API with this password alone, and NIST
SP 800-63B-4 section 3.1.1.2 requires at least 15 characters for a password that is the only
factor (https://pages.nist.gov/800-63-4/sp800-63b.html).

Why the program checks the secrecy itself: Pulumi.yaml cannot declare the key `secret: true`. The
CLI applies a project default to every stack that lacks the key and then refuses a plaintext value
of a secret key, the default included (pulumi/pulumi sdk/go/common/workspace/config.go, `mergeConfig`
then `validateStackConfigValue`: "must be encrypted as it's secret"; read at commit
0a7aa0e2b59c5fa329664202a3701c553fea3662), so `secret: true` with `default: ""` would fail every
stack that keeps the generated password, and without the default every stack would have to set it.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from .errors import Problems, describe
from .stack_files import SecureValue

KEY = "platformAdminPassword"
MIN_LENGTH = 15
SET_IT = f"pulumi config set --secret {KEY} '<password>' (at least {MIN_LENGTH} characters), or leave it unset and one is generated"


def check_admin_password(value: Any, *, full_key: str, secret_keys: Collection[str] | None, problems: Problems) -> None:
    """`value` as the stack file or the engine gives it: None or "" (unset), a SecureValue (encrypted
    in a stack file read offline: its length is checked when the program runs with it decrypted),
    or the text. `secret_keys`: the full keys the engine marks secret; None when the caller cannot
    tell (values read offline as strings), and then a string's secrecy is not judged."""
    if value is None or value == "" or isinstance(value, SecureValue):
        return
    if not isinstance(value, str):
        problems.add(KEY, f"expected a password (a string), got {describe(value)}; set it with {SET_IT}")
    elif len(value) < MIN_LENGTH:
        problems.add(KEY, f"too short: a password needs at least {MIN_LENGTH} characters; set it with {SET_IT}")
    if secret_keys is not None and full_key not in secret_keys:
        problems.add(KEY, f"not a secret: it would be stored in plain text in the stack file; set it with {SET_IT}")
