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
