"""Where a pool's GPUs come from: its ordered capacity list, and how that order reaches the platform.

A pool lists its capacity options in the order it wants them, e.g. `[{reservation: research-h100},
spot, on-demand]`: its slice of a reservation of the environment first, then Spot, then on-demand.
Node types are the environment's (one NodeProvider for every tenant), so the order is carried by
the node types themselves:

- every pooled option (on-demand, Spot, Flex-start) is offered at a *rank*, its place among the
  pool's pooled options (1, 2, 3), and reserved types at rank 0. The property CAPACITY_OPTION says
  both (`r2-on-demand`), so a pool selects exactly the (capacity type, rank) pairs of its list and
  one node type serves every pool that lists that capacity type at that place;
- a node type's `cost` is `rank × RANK_BAND + its list price in thousandths of a USD per hour ×
  PRICE_STEP + a tie-break` (its zone's place in nodeProvider.zones × 100 + its shape's place in
  the catalog). The platform "selects the cheapest available node type" among those a pool's claim
  admits (vcluster-docs platform/administer/node-providers/overview.mdx at commit 0f45a06, "Node
  types" and "Cost": "The cost unit is intentionally unspecified. It is not a currency but a
  relative value"), and every rank-r type of a pool costs less than every rank-(r+1) type, so the
  pool's order holds in every zone; within a rank the cheapest shape comes first, and no two types a
  pool selects cost the same (which one the platform takes on a tie is not documented, and the
  capacity fallback must know which type a claim got).

`cost` is therefore no longer a price: the plan shows it as the order it encodes, beside the price.
The API holds it as an int64 ("The higher the cost, the less likely it is to be selected": loft-sh/api
commit ec8bc28, pkg/apis/storage/v1/nodetype_types.go `NodeTypeSpec.Cost`), so three ranks of
RANK_BAND (10^10) fit with room to spare.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BeforeValidator, PlainSerializer, WithJsonSchema

from . import node_properties as props

ON_DEMAND, SPOT, FLEX_START, RESERVATION = props.ON_DEMAND, props.SPOT, props.FLEX_START, props.RESERVED
POOLED = (ON_DEMAND, SPOT, FLEX_START)
# Prices in thousandths of a USD per hour stay below UNPRICED: nodeProvider.prices allows at most
# 1000 USD/h (config/node_provider.py MAX_USD_PER_HOUR = 1,000,000 thousandths), the catalog's
# dearest VM is about 90 USD/h. A type whose price the region does not record sorts last in its rank.
UNPRICED = 9_999_999
PRICE_STEP = 1000  # room for the tie-break below each price step: zone place × 100 + shape place
RANK_BAND = (UNPRICED + 1) * PRICE_STEP
RESERVED_RANK = 0
MAX_RANK = len(POOLED)
RESERVED_PREFIX = "rsv-"
ALLOWED = "on-demand, spot, flex-start, {reservation: <name of a nodeProvider.reservations entry>}"


@dataclass(frozen=True)
class Reserve:
    """A `{reservation: <name>}` entry: the tenant's slice of an environment reservation."""

    name: str

    def __str__(self) -> str:
        return f"{{reservation: {self.name}}}"


def _read_entry(value: Any) -> Any:
    if isinstance(value, Reserve) or value in POOLED:
        return value
    if isinstance(value, dict) and set(value) == {"reservation"} and isinstance(value["reservation"], str) and value["reservation"]:
        return Reserve(value["reservation"])
    shown = f"{value!r}" if not isinstance(value, dict) else "{" + ", ".join(f"{k}: {v}" for k, v in value.items()) + "}"
    raise ValueError(f"{shown} is not a capacity option; allowed: {ALLOWED}")


def _dump_entry(value: Any) -> Any:
    return {"reservation": value.name} if isinstance(value, Reserve) else value


CapacityEntry = Annotated[
    Any,
    BeforeValidator(_read_entry),
    PlainSerializer(_dump_entry),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "string", "enum": list(POOLED)},
                {"type": "object", "properties": {"reservation": {"type": "string"}}, "required": ["reservation"], "additionalProperties": False},
            ]
        }
    ),
]


def kind_of(entry: Any) -> str:
    return RESERVATION if isinstance(entry, Reserve) else entry


def option_value(capacity: str, rank: int) -> str:
    """CAPACITY_OPTION of a pooled node type."""
    return f"r{rank}-{capacity}"


def reserved_type_name(reservation: str, tenant: str) -> str:
    """The node type (and CAPACITY_OPTION) of a tenant's slice of a reservation."""
    return f"{RESERVED_PREFIX}{reservation}-{tenant}"


def cost(rank: int, usd_per_hour: float | None, tie_break: int = 0) -> int:
    """The NodeProvider's `cost` of a node type at `rank` with that list price and tie-break
    (0..PRICE_STEP-1; module docstring). Never 0: the API omits a zero cost and computes one."""
    within = UNPRICED if usd_per_hour is None else min(round(usd_per_hour * 1000), UNPRICED)
    return rank * RANK_BAND + max(within, 0) * PRICE_STEP + min(max(tie_break, 0), PRICE_STEP - 1) + 1


def tie_break(zone_place: int, shape_place: int) -> int:
    return zone_place * 100 + min(shape_place, 99)


def effective(capacity: tuple[Any, ...] | None, spot: bool) -> tuple[Any, ...]:
    """A pool's capacity list: as written, or from the older `spot` (kept: `spot: true` is
    `capacity: [spot]`, unset is `[on-demand]`)."""
    if capacity is not None:
        return tuple(capacity)
    return (SPOT,) if spot else (ON_DEMAND,)


def ranks(capacity: tuple[Any, ...]) -> tuple[int, ...]:
    """Each entry's rank: reservations 0, the pooled options 1, 2, 3 in the order listed."""
    out, pooled = [], 0
    for entry in capacity:
        if isinstance(entry, Reserve):
            out.append(RESERVED_RANK)
        else:
            pooled += 1
            out.append(pooled)
    return tuple(out)


def pooled_ranks(capacity: tuple[Any, ...]) -> tuple[tuple[str, int], ...]:
    """(capacity type, rank) of each pooled entry."""
    return tuple((entry, rank) for entry, rank in zip(capacity, ranks(capacity), strict=True) if not isinstance(entry, Reserve))


def short(capacity: tuple[Any, ...]) -> str:
    """The pool-name suffix of a capacity list: "" for [on-demand], "-spot" for [spot] (the names
    pools had before capacity lists), else each entry in order (rsv, spot, flex, od)."""
    if capacity in ((ON_DEMAND,), ()):
        return ""
    codes = {ON_DEMAND: "od", SPOT: "spot", FLEX_START: "flex"}
    return "-" + "-".join("rsv" if isinstance(e, Reserve) else codes[e] for e in capacity)


def describe(entry: Any) -> str:
    return f"reservation {entry.name}" if isinstance(entry, Reserve) else str(entry)
