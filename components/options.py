"""Resource-option helpers shared by the components."""

from __future__ import annotations

import pulumi


def depends_on_of(opts: pulumi.ResourceOptions | None) -> list[pulumi.Resource]:
    """The component's own `depends_on`, to hand to the children that must wait.

    Pulumi does not pass a component's `depends_on` on to its children, so a component that is
    told to wait for something forwards it to the child resources that do the waiting.
    """
    if opts is None or opts.depends_on is None:
        return []
    depends_on = opts.depends_on
    if isinstance(depends_on, pulumi.Resource):
        return [depends_on]
    return [d for d in depends_on if isinstance(d, pulumi.Resource)]
