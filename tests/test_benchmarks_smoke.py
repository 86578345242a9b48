"""The benchmark harness runs and reports ratios in the agreed shape (numbers are not asserted)."""

from benchmarks import bench_coordinator

KEYS = {"value", "unit", "baseline", "baseline_value", "ratio", "target", "meets"}


def test_coordinator_benchmark_reports_a_ratio():
    result = bench_coordinator.run(quick=True)["coordinator_calls_per_s"]
    assert set(result) == KEYS
    assert result["value"] > 0 and result["baseline_value"] > 0
    assert abs(result["ratio"] - result["value"] / result["baseline_value"]) < 1e-9
