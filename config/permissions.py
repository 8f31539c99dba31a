"""The custom roles' permission lists (config/permissions.yaml), with the reason for each."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from . import yaml_io

PERMISSIONS_PATH = Path(__file__).with_name("permissions.yaml")

AUTO_NODES = "autoNodes"
LEGACY_AUTO_NODES = "legacyAutoNodes"
TENANT_SUBNET_USE = "tenantSubnetUse"
TENANT_DISKS = "tenantDisks"
TENANT_LOAD_BALANCERS = "tenantLoadBalancers"


@dataclass(frozen=True)
class RoleSpec:
    key: str
    title: str
    description: str
    permissions: tuple[str, ...]
    reasons: dict[str, str]  # permission → why (empty for the legacy role, which is upstream's)


@dataclass(frozen=True)
class RoleCatalog:
    roles: dict[str, RoleSpec]
    forbidden_in_any_role: tuple[str, ...]
    forbidden_for_platform: tuple[str, ...]
    only_in_roles: dict[str, tuple[str, ...]]  # permission → the role keys that alone may hold it


@functools.lru_cache(maxsize=None)
def load_roles(path: Path = PERMISSIONS_PATH) -> RoleCatalog:
    raw = yaml_io.load(path.read_text())
    roles = {}
    for key in (AUTO_NODES, LEGACY_AUTO_NODES, TENANT_SUBNET_USE, TENANT_DISKS, TENANT_LOAD_BALANCERS):
        entries = raw[key]["permissions"]
        permissions = tuple(e["permission"] if isinstance(e, dict) else e for e in entries)
        reasons = {e["permission"]: e["reason"] for e in entries if isinstance(e, dict)}
        if len(set(permissions)) != len(permissions):
            raise ValueError(f"permissions.yaml: {key} lists a permission twice")
        roles[key] = RoleSpec(key, raw[key]["title"], raw[key]["description"], permissions, reasons)
    only_in = {permission: tuple(keys) for permission, keys in raw["onlyInRoles"].items()}
    return RoleCatalog(roles, tuple(raw["forbiddenInAnyRole"]), tuple(raw["forbiddenForPlatform"]), only_in)


def role_id(prefix: str, key: str) -> str:
    """Custom role ids: stable, derived from one overridable prefix (deleted ids stay reserved for
    up to 37 days, so a re-created environment may need a new prefix)."""
    return f"{prefix}_{key}"
