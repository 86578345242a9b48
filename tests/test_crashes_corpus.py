"""Grouping accuracy on the labeled corpus of real failures (tests/data/crashes/, built by its
generate.py): pairwise precision/recall targets, and far fewer groups than exact-text hashing
or the seed regex."""

from __future__ import annotations

import json

import pytest

from benchmarks import bench_crashes
from benchmarks.bench_crashes import (CORPUS, PRECISION_TARGET, RECALL_TARGET, load_corpus, ours, pairwise, quality,
                                      variants)


def test_every_found_report_is_labeled_and_every_label_is_found():
    crashes, truth = load_corpus()
    assert not [t for t in truth if t.startswith("<unlabeled")]
    assert len(crashes) == len(json.loads((CORPUS / "labels.json").read_text()))


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
    crashes, truth = load_corpus()
    again = variants(crashes, len(crashes), seed=7)
    assert ours(again) == ours(crashes)
    assert pairwise(ours(again), truth)["precision"] >= PRECISION_TARGET


@pytest.mark.slow
def test_benchmark_reports_every_row_in_the_agreed_shape():
    results = bench_crashes.run(quick=True)
    assert all(set(r) == {"value", "unit", "baseline", "baseline_value", "ratio", "target", "meets"}
               for r in results.values())
    assert results["crashes_precision"]["meets"] and results["crashes_recall"]["meets"]
    assert results["crashes_fingerprint_throughput_1core"]["value"] > 0
