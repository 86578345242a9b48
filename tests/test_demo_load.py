"""`zdebug demo` under load names its default faults and nothing else (issue 27 item 7)."""

from __future__ import annotations

import pytest

from benchmarks.bench_demo import BURNERS, burners, demo_findings, wrong

HANG_S = 900  # a hang guard, not a time limit: CI's busy machine took over 180 s for the three runs


@pytest.mark.slow
@pytest.mark.alone
@pytest.mark.timeout(HANG_S)
def test_the_demo_tells_the_truth_three_times_under_load(tmp_path):
    """Three runs beside CPU burners (issue 27 item 7); `python -m benchmarks demo` runs ten."""
    with burners(BURNERS):
        problems = {i: wrong(demo_findings(tmp_path / str(i))) for i in range(3)}
    assert problems == {0: [], 1: [], 2: []}


@pytest.mark.parametrize(
    "findings,problem",
    [
        ([], "not named: data-skew on stage 0 shard 14"),
        ([{"severity": "warning", "kind": "data-skew", "stage": "stage0-Map", "shard": 3}], "wrong: warning data-skew"),
        (
            [
                {
                    "severity": "warning",
                    "kind": "slow-worker",
                    "stage": "stage0-Map",
                    "shard": 4,
                    "worker": "p0-workers-3",
                }
            ],
            "wrong: warning slow-worker",
        ),
    ],
)
def test_the_truth_check_catches_a_miss_and_a_wrong_finding(findings, problem):
    assert any(p.startswith(problem) for p in wrong(findings))


def test_the_skewed_shard_on_the_slow_worker_names_both():
    """Seen under load: shard 14 (x20) pulled by the slow worker (x6) is `slow-worker, data-skew`."""
    both = {"severity": "warning", "kind": "slow-worker", "causes": ["slow-worker", "data-skew"]}
    found = [{**both, "stage": "stage0-Map", "shard": 14, "worker": "zephyr-demo-p0-workers-1"}]
    assert wrong(found + [{"severity": "info", "kind": "recovered"}]) == []
    assert wrong([{**found[0], "worker": "zephyr-demo-p0-workers-3"}])[0].startswith("wrong: warning slow-worker")
