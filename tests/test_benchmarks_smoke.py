"""The benchmark harness runs and reports ratios in the agreed shape (numbers are not asserted)."""

from benchmarks import bench_coordinator

KEYS = {"value", "unit", "baseline", "baseline_value", "ratio", "target", "meets"}


def test_coordinator_benchmark_reports_a_ratio():
    result = bench_coordinator.run(quick=True)["coordinator_calls_per_s"]
    assert set(result) == KEYS
    assert result["value"] > 0 and result["baseline_value"] > 0
    assert abs(result["ratio"] - result["value"] / result["baseline_value"]) < 1e-9


def test_install_benchmark_measures_the_core_closure():
    from benchmarks import bench_install

    result = bench_install.run(quick=True)
    assert all(set(r) == KEYS for r in result.values())
    assert {"pandas", "numpy", "typer"} <= set(bench_install.closure(["zephyr-debug"]))
    assert "marin-zephyr" not in bench_install.closure(["zephyr-debug"])  # extras are not the core
    without = result["install_without_plotly"]
    assert 0 < without["value"] < result["install_core"]["value"] and 0 < without["ratio"] < 1
