"""The zones of each Compute Engine region (config/zones.yaml, with its source and date)."""

from __future__ import annotations

import functools
from pathlib import Path

from . import yaml_io

ZONES_PATH = Path(__file__).with_name("zones.yaml")


@functools.cache
def _record() -> dict:
    return yaml_io.load(ZONES_PATH.read_text(), source="config/zones.yaml")


def source_url() -> str:
    return _record()["source"]["url"]


def region_zones(region: str) -> tuple[str, ...] | None:
    """The region's zones (full names), or None for a region the record does not know."""
    letters = _record()["regions"].get(region)
    return None if letters is None else tuple(f"{region}-{letter}" for letter in letters)


def regions() -> tuple[str, ...]:
    return tuple(_record()["regions"])


def zone_problem(zone: str, region: str) -> str | None:
    """What is wrong with `zone` as a zone of `region`, or None; the message says what exists."""
    zones = region_zones(region)
    if zones is None or zone in zones:
        return None
    return f"{zone!r} is not a zone of {region}; its zones: {', '.join(zones)} (config/zones.yaml, from {source_url()})"
