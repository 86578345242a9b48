"""The verdict on speedscope files other tools write (evented profiles), and rules as data."""

from __future__ import annotations

import copy
import json

import jsonschema
import pytest

from zephyr_debug.errors import ZdebugError
from zephyr_debug.profile import speedscope
from zephyr_debug.profile.summary import default_rules, summarize

SCHEMA = json.loads(speedscope.SCHEMA_PATH.read_text())
FRAMES = [
    {"name": "main", "file": "/home/me/pipeline.py", "line": 3, "col": None},
    {"name": "tokenize", "file": "/home/me/pipeline.py", "line": 10},
    {"name": "DataFrame.groupby", "file": "/venv/lib/python3.11/site-packages/pandas/core/frame.py", "line": 8},
    {"name": "Condition.wait", "file": "/usr/lib/python3.11/threading.py", "line": 320},
]


def evented(spans: list[tuple[list[int], float]]) -> dict:
    """An evented profile: each (stack, seconds) span opens its frames, then closes them."""
    events, at = [], 0.0
    for stack, seconds in spans:
        events += [{"type": "O", "frame": f, "at": at} for f in stack]
        at += seconds
        events += [{"type": "C", "frame": f, "at": at} for f in reversed(stack)]
    return {
        "$schema": speedscope.SCHEMA_URL,
        "activeProfileIndex": None,
        "exporter": "a tracer",
        "shared": {"frames": copy.deepcopy(FRAMES)},
        "profiles": [
            {
                "type": "evented",
                "name": "main thread",
                "unit": "seconds",
                "startValue": 0,
                "endValue": at,
                "events": events,
            }
        ],
    }


def test_evented_profile_shares_follow_the_spans(tmp_path):
    spans = [([0, 1], 3.0), ([0, 2], 1.0), ([0, 3], 2.0)]
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(evented(spans)))
    doc = speedscope.load(path)
    jsonschema.validate(doc, SCHEMA)
    s = summarize(doc)
    total = sum(sec for _, sec in spans)
    assert s["seconds"] == pytest.approx(total)
    assert s["shares"] == pytest.approx({"user": 3 / total, "library": 1 / total, "waiting": 2 / total}, abs=1e-3)
    assert s["verdict"] == "user"
    assert s["hot_frame"]["where"] == "/home/me/pipeline.py:10 tokenize"
    # the library time is charged to the in-app caller, the wait too
    assert s["waiting_at"]["function"] == "main"
    assert {r["function"]: r["share"] for r in s["top_total"]}["main"] == pytest.approx(1.0)


def test_a_torn_frame_name_from_a_nonblocking_sample_is_read_not_fatal():
    """py-spy --nonblocking reads a running process's memory: a frame's file name can come back
    torn, NUL bytes and all (CI: `profile --straggler` exited 70, 'embedded null byte')."""
    doc = evented([([0, 1], 3.0), ([0, 3], 1.0)])
    doc["shared"]["frames"][1]["file"] = "/home/me/pipe\x00line.py"
    s = summarize(speedscope.fix(doc))
    assert s["verdict"] == "user" and s["seconds"] == pytest.approx(4.0)


def test_in_app_rules_are_data():
    doc = speedscope.fix(evented([([0, 2], 2.0), ([0, 1], 1.0)]))
    assert summarize(doc)["verdict"] == "library"
    rules = copy.deepcopy(default_rules())
    rules["in_app"]["rules"].insert(0, {"file": "/site-packages/pandas/", "in_app": True})
    mine = summarize(doc, rules=rules)
    assert mine["verdict"] == "user" and mine["hot_frame"]["function"] == "DataFrame.groupby"


def test_no_samples_is_a_verdict_not_a_crash():
    doc = speedscope.fix(
        {
            "$schema": speedscope.SCHEMA_URL,
            "shared": {"frames": []},
            "profiles": [
                {
                    "type": "sampled",
                    "name": "t",
                    "unit": "seconds",
                    "startValue": 0,
                    "endValue": 0,
                    "samples": [],
                    "weights": [],
                }
            ],
        }
    )
    jsonschema.validate(doc, SCHEMA)
    assert summarize(doc)["verdict"] == "no-samples"


@pytest.mark.parametrize(
    "breakage, message",
    [
        (
            lambda d: (d["profiles"][0]["samples"].append([0, 99]), d["profiles"][0]["weights"].append(0.01)),
            "sample 1 is not a list of frame indices below 4",
        ),
        (lambda d: d["profiles"][0]["weights"].pop(), "same length"),
        (lambda d: d["profiles"][0].update(type="flamegraph"), "unknown profile type 'flamegraph'"),
        (lambda d: d["profiles"][0]["weights"].__setitem__(0, "1"), "sample 0"),
    ],
)
def test_malformed_files_are_one_line_errors(tmp_path, breakage, message):
    doc = {
        "$schema": speedscope.SCHEMA_URL,
        "shared": {"frames": copy.deepcopy(FRAMES)},
        "profiles": [
            {
                "type": "sampled",
                "name": "t",
                "unit": "seconds",
                "startValue": 0,
                "endValue": 0.01,
                "samples": [[0, 1]],
                "weights": [0.01],
            }
        ],
    }
    breakage(doc)
    path = tmp_path / "p.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ZdebugError, match=message) as exc:
        speedscope.load(path)
    assert str(exc.value).startswith(f"{path}: profiles[0]")


def test_one_stray_in_app_sample_does_not_pull_a_thread_into_the_verdict():
    """CI under two CPU burners: a heartbeat thread seen once in app code was counted as in-app."""
    doc = evented([([0, 1], 5.0)])
    beat = evented([([3], 0.01)] * 499 + [([0, 3], 0.01)])["profiles"][0]
    doc["profiles"].append({**beat, "name": "heartbeat"})
    s = summarize(doc)
    assert {t["thread"]: t["in_verdict"] for t in s["threads"]} == {"main thread": True, "heartbeat": False}
    assert s["shares"]["user"] == pytest.approx(1.0)
