"""Shared fixtures: real reference jobs with test-sized timings, cached per session."""

from __future__ import annotations

import inspect
import os
from pathlib import Path

import pytest
from hypothesis import settings

from zephyr_debug.reference import CoordinatorConfig, JobConfig, JobResult, StageSpec, parse_fault, run_job

FAST = CoordinatorConfig(heartbeat_interval=0.2, heartbeat_timeout=4.0, status_interval=0.25, no_workers_timeout=3.0)


def fast_stages(shards: int = 8, rows: int = 4000, chunk_seconds: float = 0.02, stages: int = 2) -> list[StageSpec]:
    work = {"rows": rows, "chunk_rows": max(rows // 10, 1), "chunk_seconds": chunk_seconds}
    specs = [StageSpec("Map", shards, work), StageSpec("Map → Write", max(shards // 4, 1), work)]
    return specs[:stages]


def run_reference(
    root: Path,
    faults: tuple[str, ...] = (),
    *,
    workers: int = 3,
    runner: str = "inline",
    shards: int = 8,
    rows: int = 4000,
    chunk_seconds: float = 0.02,
    stages: int = 2,
    deadline_s: float = 120.0,
    **overrides,
) -> JobResult:
    """Run one reference job to its end with test-sized heartbeats and timeouts."""
    coordinator = overrides.pop("coordinator", FAST)
    config = JobConfig(
        workers=workers,
        runner=runner,
        stages=fast_stages(shards, rows, chunk_seconds, stages),
        faults=[parse_fault(f) for f in faults],
        coordinator=coordinator,
        root=root,
        deadline_s=deadline_s,
        **overrides,
    )
    return run_job(config)


# Property tests draw the same examples every run, so a run cannot go red by chance;
# ZDEBUG_HYPOTHESIS=random draws new ones (to look for new failures, not in CI).
settings.register_profile("fixed", derandomize=True, database=None)
settings.register_profile("random")
settings.load_profile(os.environ.get("ZDEBUG_HYPOTHESIS", "fixed"))

RUN_DEFAULTS = {
    "coordinator": FAST,
    **{name: p.default for name, p in inspect.signature(run_reference).parameters.items() if p.kind is p.KEYWORD_ONLY},
}


# The files that took longest in a fresh-clone run (`--durations=0`, summed per file; docs/testing.md).
# `make test` hands files to its processes in this order (`--no-loadscope-reorder`), the rest by name
# after them, so no process is left with a long file at the end while the others sit idle. A file
# missing from the list only runs later: the order never changes a result.
LONGEST_FIRST = (
    "test_playbooks",
    "test_scale_free",
    "test_findings_alerts",
    "test_fusion",
    "test_columns",
    "test_iris",
    "test_cli_foundation",
    "test_report",
    "test_analysis",
    "test_prometheus_integration",
    "test_profile",
    "test_counters",
    "test_reference",
    "test_streams",
    "test_realcaptures",
    "test_dense_equivalence",
)


def pytest_collection_modifyitems(config, items) -> None:
    """Longest files first (a stable sort: tests keep their order within a file)."""
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.stem, len(rank)))


def pytest_configure(config) -> None:
    """Tests never write to the user's job store: a fresh one per run unless a test names its own."""
    home = os.environ.get("ZDEBUG_HOME")
    if home is None or home == os.environ.get("ZDEBUG_TEST_HOME"):  # unset, or made by the parent pytest (xdist)
        import tempfile

        os.environ["ZDEBUG_HOME"] = os.environ["ZDEBUG_TEST_HOME"] = tempfile.mkdtemp(prefix="zdebug-test-home-")


@pytest.fixture(autouse=True)
def _no_stale_notes():
    """Every test starts with no pending read notes (a test that rewrites a file with `streams`
    and does not `load` it would leave its note for the next test's load)."""
    from zephyr_debug import streams

    streams.NOTES.clear()


@pytest.fixture(scope="session")
def jobs_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("zdebug-home") / "jobs"
    os.environ["ZDEBUG_HOME"] = str(root.parent)
    return root


@pytest.fixture(scope="session")
def reference_job(jobs_root):
    """`reference_job(faults, **options)`: a finished JobResult, run once per distinct call."""
    cache: dict[tuple, JobResult] = {}

    def get(*faults: str, **options) -> JobResult:
        key = (faults, tuple(sorted({**RUN_DEFAULTS, **options}.items())))  # a default given or left out: one job
        if key not in cache:
            cache[key] = run_reference(jobs_root, faults, **options)
        return cache[key]

    return get
