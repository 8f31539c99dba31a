"""Cost guardrails: a ceiling on the GPUs one tenant's pools may hold together, counting every
pool kind (a dynamic pool by its nvidia.com/gpu limit, a static pool by quantity × GPUs per node)."""

from __future__ import annotations

from typing import Callable

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    Severity,
)
from vcluster_reader import GPU_RESOURCE, VClusterValues

from .common import (
    INSTANCE_ENVIRONMENT_LABEL,
    INSTANCE_LABEL_FIELD,
    NON_PROD_ENVIRONMENTS,
    VIRTUAL_CLUSTER_INSTANCE,
    ResourcePolicy,
    Values,
    environment_by_stack,
    environment_of_instance,
    show,
)

DEFAULT_MAX_GPUS_PER_TENANT = 16
MAX_GPUS_CONFIG = "maxGpusPerTenant"


def tenant_gpu_limit(values: VClusterValues) -> tuple[int | None, list[str]]:
    """(the GPUs the tenant's GPU pools may hold together, None if one is unbounded; one note per pool)."""
    total: int | None = 0
    notes = []
    for pool in values.gpu_pools():
        limit = pool.gpu_limit
        notes.append(f"{pool.kind} {pool.name}={limit if limit is not None else 'unbounded'}")
        total = None if total is None or limit is None else total + limit
    return total, notes


def _gpu_ceiling_validator(policy_name: str, prod: bool) -> Callable[[ResourceValidationArgs, ReportViolation], None]:
    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        if args.resource_type != VIRTUAL_CLUSTER_INSTANCE:
            return
        # The mandatory policy reports a label that disagrees with the stack (once, for every policy
        # that reads the label: public-ranges-prod judges by the same environment).
        label = environment_of_instance(args.props)
        environment, why = environment_by_stack(args.urn, label, INSTANCE_LABEL_FIELD, report_violation if prod else None)
        if (environment not in NON_PROD_ENVIRONMENTS) != prod:
            return
        parsed = Values(args.props)
        if parsed.values is None:
            return  # reported by vcluster-private-nodes-isolation
        ceiling = int((args.get_config() or {}).get(MAX_GPUS_CONFIG, DEFAULT_MAX_GPUS_PER_TENANT))
        try:
            total, notes = tenant_gpu_limit(parsed.values)
        except (AttributeError, TypeError):
            return  # reported by vcluster-private-nodes-isolation
        if total is not None and total <= ceiling:
            return
        shown = "unbounded" if total is None else str(total)
        report_violation(
            f"{Values.FIELD} privateNodes.autoNodes[] pools: the tenant's GPU limit is "
            f"{shown} ({', '.join(notes)}) for environment {show(environment)} ({why}); allowed: at most {ceiling} "
            f"(policy config {policy_name}.{MAX_GPUS_CONFIG}), with an {GPU_RESOURCE} limit on every dynamic GPU pool "
            "and a static pool's GPUs per node fixed by its nodeTypeSelector",
            None,
        )

    validate.__name__ = f"validate_{policy_name.replace('-', '_')}"
    validate.__doc__ = (
        "Flags a tenant whose GPU pools may together hold more GPUs than the ceiling; reports only "
        f"for {'prod' if prod else 'dev and staging'} instances (their stack's environment; label {INSTANCE_ENVIRONMENT_LABEL} "
        "only for a stack the pack's record does not know)."
    )
    return validate


def _ceiling_schema() -> PolicyConfigSchema:
    return PolicyConfigSchema(
        properties={
            MAX_GPUS_CONFIG: {
                "type": "integer",
                "minimum": 0,
                "default": DEFAULT_MAX_GPUS_PER_TENANT,
                "description": "Largest total nvidia.com/gpu limit one tenant's GPU pools may have.",
            }
        }
    )


# Why two policies for one rule: CrossGuard attaches the enforcement level to a policy, not to a
# violation, so one policy cannot be advisory for dev/staging and mandatory for prod. The two share
# one validator; each reports only for its environment class (the instance's stack's environment;
# for a stack the pack's record does not know, its gpu-platform/environment label; anything but
# dev/staging, a missing label included, counts as prod, so the mandatory one fails closed) and
# each has its own maxGpusPerTenant, so prod may be given a different ceiling than dev.
GPU_CEILING_NON_PROD = "tenant-gpu-ceiling-nonprod"
GPU_CEILING_PROD = "tenant-gpu-ceiling-prod"
validate_gpu_ceiling_nonprod = _gpu_ceiling_validator(GPU_CEILING_NON_PROD, prod=False)
validate_gpu_ceiling_prod = _gpu_ceiling_validator(GPU_CEILING_PROD, prod=True)

gpu_ceiling_nonprod = ResourcePolicy(
    name=GPU_CEILING_NON_PROD,
    description=f"A dev or staging tenant's GPU limit (its dynamic GPU pools' nvidia.com/gpu limits plus its static pools' GPUs) stays within {MAX_GPUS_CONFIG} (default {DEFAULT_MAX_GPUS_PER_TENANT}).",
    validate=validate_gpu_ceiling_nonprod,
    enforcement_level=EnforcementLevel.ADVISORY,
    config_schema=_ceiling_schema(),
    severity=Severity.MEDIUM,
)
gpu_ceiling_prod = ResourcePolicy(
    name=GPU_CEILING_PROD,
    description=f"A prod tenant's GPU limit (its dynamic GPU pools' nvidia.com/gpu limits plus its static pools' GPUs) stays within {MAX_GPUS_CONFIG} (default {DEFAULT_MAX_GPUS_PER_TENANT}).",
    validate=validate_gpu_ceiling_prod,
    enforcement_level=EnforcementLevel.MANDATORY,
    config_schema=_ceiling_schema(),
    severity=Severity.HIGH,
)

POLICIES = [gpu_ceiling_nonprod, gpu_ceiling_prod]
