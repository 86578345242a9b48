"""Grouping accuracy on the labeled corpora of real failures (tests/data/crashes/, built by its
generate.py, and variations/, built by variations.py): pairwise precision/recall targets, and
far fewer groups than exact-text hashing, the seed regex or Drain3."""

from __future__ import annotations

import json

import pytest

from benchmarks import bench_crashes
from benchmarks.bench_crashes import (
    CORPORA,
    PRECISION_TARGET,
    RECALL_TARGET,
    extended_corpus,
    load_corpus,
    ours,
    pairwise,
    quality,
    variants,
)


@pytest.mark.parametrize("root", CORPORA, ids=lambda p: p.name)
def test_every_found_report_is_labeled_and_every_label_is_found(root):
    crashes, truth = load_corpus(root)
    assert not [t for t in truth if t.startswith("<unlabeled")]
    assert len(crashes) == len(json.loads((root / "labels.json").read_text()))


def test_grouping_meets_precision_and_recall_targets_and_beats_the_baselines():
    q = quality()
    mine = q["ours"]
    assert mine["precision"] >= PRECISION_TARGET, q
    assert mine["recall"] >= RECALL_TARGET, q
    assert mine["groups"] < q["seed_regex"]["groups"] < q["exact"]["groups"]
    assert mine["groups"] <= mine["bugs"] * 1.2
    if "drain3" in q:  # optional bench dependency
        assert mine["precision"] + mine["recall"] > q["drain3"]["precision"] + q["drain3"]["recall"]


def test_fresh_values_temp_dirs_and_addresses_do_not_change_the_grouping():
    crashes, truth = extended_corpus()
    again = variants(crashes, len(crashes), seed=7)
    assert ours(again) == ours(crashes)
    assert pairwise(ours(again), truth)["precision"] >= PRECISION_TARGET


@pytest.mark.slow
def test_benchmark_reports_every_row_in_the_agreed_shape():
    results = bench_crashes.run(quick=True)
    assert all(
        set(r) == {"value", "unit", "baseline", "baseline_value", "ratio", "target", "meets"} for r in results.values()
    )
    assert results["crashes_precision"]["meets"] and results["crashes_recall"]["meets"]
    assert results["crashes_fingerprint_throughput_1core"]["value"] > 0
    assert results["crashes_directory_1000_wall"]["value"] > results["crashes_directory_1000_wall"]["baseline_value"]
