"""The running Pulumi program's configuration, as the plain mapping `config.stack.load_stack` takes."""

from __future__ import annotations

from typing import Any

from pulumi.runtime import config as runtime_config


def runtime_values() -> dict[str, Any]:
    """Every configuration value the engine handed this program (full keys, `ns:key`).

    Secret values are included as the engine passes them; `load_stack` never reads the secret
    keys, and nothing here is logged. Read through the SDK's config module because a typo check
    needs the whole key set, which `pulumi.Config` cannot list.
    """
    values: dict[str, Any] = dict(runtime_config.get_config_env())
    values.update(runtime_config.CONFIG.get())
    return values


def runtime_secret_keys() -> set[str]:
    """The full keys whose values the engine holds as secrets (it hands them over decrypted)."""
    keys = set(runtime_config.get_config_secret_keys_env())
    return keys | {k for k in runtime_values() if runtime_config.is_config_secret(k)}


def is_set(full_key: str) -> bool:
    """True when the key has a non-empty value, without reading a secret through pulumi.Config
    (which would warn that a secret was read in plain text)."""
    value = runtime_config.get_config(full_key)
    return value is not None and value != ""
