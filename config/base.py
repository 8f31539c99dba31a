"""Shared pieces of the config models: camelCase keys, no unknown keys, small syntax checks."""

from __future__ import annotations

import ipaddress
import re

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class ConfigModel(BaseModel):
    """Stack config object: keys are camelCase as in the stack files, unknown keys are errors."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)


DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
REGION = re.compile(r"^[a-z]+-[a-z]+[0-9]+$")
GCP_LABEL_KEY = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
GCP_LABEL_VALUE = re.compile(r"^[a-z0-9_-]{0,63}$")
# Go/Karpenter durations as vCluster accepts them: 30s, 5m, 1h30m.
DURATION = re.compile(r"^(?=\d)(\d+h)?(\d+m)?(\d+s)?$")


def duration_seconds(text: str) -> int:
    match = DURATION.match(text)
    if not match:
        raise ValueError(text)
    hours, minutes, seconds = (int(g[:-1]) if g else 0 for g in match.groups())
    return hours * 3600 + minutes * 60 + seconds


def parse_cidr(text: str) -> ipaddress.IPv4Network | None:
    """An IPv4 network in CIDR form with no host bits set, or None."""
    try:
        net = ipaddress.IPv4Network(text, strict=True)
    except (ValueError, TypeError):
        return None
    return net if "/" in str(text) else None


def zone_region(zone: str) -> str:
    return zone.rsplit("-", 1)[0]
