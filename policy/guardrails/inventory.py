"""What the program's runs register, per Pulumi project (program_data.json `inventory`), for the
policies that allow only that."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pulumi_policy import ResourceValidationArgs

from .common import INVENTORY, project_of

SOURCE = "policy/program_data.json inventory (make policy-data)"


def inventory_of(args: ResourceValidationArgs) -> Mapping[str, Any] | None:
    return INVENTORY.get(project_of(args.urn))
