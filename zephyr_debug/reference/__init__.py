"""The reference pipeline: a Zephyr-like coordinator and workers with fault injection."""

from zephyr_debug.reference.coordinator import CoordinatorConfig, StageSpec
from zephyr_debug.reference.faults import Fault
from zephyr_debug.reference.faults import parse as parse_fault
from zephyr_debug.reference.launcher import Job, JobConfig, JobResult, default_stages, run_job

__all__ = [
    "CoordinatorConfig",
    "Fault",
    "Job",
    "JobConfig",
    "JobResult",
    "StageSpec",
    "default_stages",
    "parse_fault",
    "run_job",
]
