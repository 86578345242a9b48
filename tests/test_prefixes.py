"""The prefix grammar (zephyrlog.PREFIXES): every message the grammar knows, under every prefix
form, behind a transport's prefix, mixed line by line and behind unknown junk, reads to the same
Evidence as under the canonical Python logging prefix. Forms whose time is coarser than the
canonical milliseconds (1 s glog, Iris `[hh:mm:ss]`, journald) or absent read the same facts
(attempts, outcomes, counts, stages, abort) with their own times."""

from __future__ import annotations

import calendar
import random
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from logmaker import Knobs, evidence_diff, make_job

from zephyr_debug import zephyrlog
from zephyr_debug.sources import logtext

CANONICAL = re.compile(r"^(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d),(\d{3}) \w+ [\w.\-]+: (.*)$")
PYTHON = zephyrlog.PREFIXES[0]
INNER = [p for p in zephyrlog.PREFIXES if not p.outer]
OUTER = [p for p in zephyrlog.PREFIXES if p.outer]
JOB = Knobs(seed=7, stages=2, shards=16, workers=3, task_errors=0.08, infra=0.05, foreign=0.0, spam=0.0, abort="task")


def _exact(p: zephyrlog.Prefix) -> bool:
    """Its time is as fine as the canonical one (ms) and dated (a year, or a month-day)."""
    t = zephyrlog.prefix_time(p.format(1.0).encode())
    m = re.search(p.time or b"", p.example.encode())
    return t is not None and t.month is not None and m is not None and len(m.groupdict().get("f") or b"") >= 3


def _reprefix(text: str, pick, junk: str = "") -> str:
    """Every canonical line under `pick(ts)`'s prefix; a line it does not start (a traceback) keeps
    the outer prefix of the line before it when `pick` gives one (as a transport prints it)."""
    out, outer = [], ""
    for line in text.splitlines():
        m = CANONICAL.match(line)
        if m is None:
            out.append(outer + line)
            continue
        y, mo, d, h, mi, s, ms, message = m.groups()
        ts = calendar.timegm((int(y), int(mo), int(d), int(h), int(mi), int(s))) + int(ms) / 1000
        outer, inner = pick(ts)
        out.append(junk + outer + inner + message)
    return "\n".join(out) + "\n"


def _diff(a, b) -> list[str]:
    """evidence_diff, less the prefixes each crash text starts with (its other lines must agree)."""
    tails = [[c.text.splitlines()[1:] for c in ev.crashes] for ev in (a, b)]
    return [d for d in evidence_diff(a, b) if not re.match(r"crashes\[\d+\]\.text: ", d)] + (
        ["crash texts differ past their first line"] if tails[0] != tails[1] else []
    )


def _facts(ev) -> dict:
    """What any prefix form must read alike, times aside."""
    a = ev.attempts
    cols = [c for c in ("stage", "shard", "attempt", "worker", "outcome", "kind") if c in a]
    st = ev.status
    return {
        "attempts": sorted(map(tuple, a[cols].astype(str).to_numpy().tolist())),
        "status": st[["stage", "completed", "total", "in_flight", "queue_depth"]].astype(str).values.tolist(),
        "stages": [s.name for s in ev.stages],
        "fatal": ev.fatal_error,
        "crashes": len(ev.crashes),
    }


def _load(tmp: Path, name: str, text: str):
    """The text read from one fixed path (sources named in the Evidence compare equal)."""
    path = tmp.parent / "prefixes-job.log"
    path.write_text(text, encoding="utf-8")
    return logtext.load([path], "job")


@pytest.fixture(scope="module")
def canonical_text() -> str:
    (text,) = make_job(JOB).values()
    return text


@pytest.fixture(scope="module")
def canonical(canonical_text, tmp_path_factory):
    return _load(tmp_path_factory.mktemp("canonical"), "c", canonical_text)


def _first_dated(pick):
    """`pick`, but the first line keeps the canonical (dated) prefix: a year-less form takes the
    year from the evidence's other dates."""
    state = {"first": True}

    def chosen(ts):
        if state.pop("first", False):
            return "", PYTHON.format(ts)
        return pick(ts)

    return chosen


@pytest.mark.parametrize("prefix", INNER, ids=lambda p: p.name)
def test_every_inner_form(prefix, canonical_text, canonical, tmp_path):
    ev = _load(tmp_path, prefix.name, _reprefix(canonical_text, _first_dated(lambda ts: ("", prefix.format(ts)))))
    if _exact(prefix):
        assert _diff(canonical, ev) == [], prefix.name
    else:
        assert _facts(ev) == _facts(canonical), prefix.name


@pytest.mark.parametrize("inner", [PYTHON, *(p for p in INNER if p.name in ("glog", "none"))], ids=lambda p: p.name)
@pytest.mark.parametrize("outer", OUTER, ids=lambda p: p.name)
def test_every_outer_form_before_an_inner_one(outer, inner, canonical_text, canonical, tmp_path):
    """A transport's prefix (viewer receive time glued on, kubectl, Iris CLI, Ray, journald)."""
    if not outer.example.endswith(" ") and not inner.example:
        pytest.skip("a time glued onto a bare message leaves no word boundary to find the message by")
    ev = _load(tmp_path, "x", _reprefix(canonical_text, _first_dated(lambda ts: (outer.format(ts), inner.format(ts)))))
    if _exact(inner) or (_exact(outer) and inner.time is None) or (_exact(outer) and _exact(inner)):
        assert _diff(canonical, ev) == [], (outer.name, inner.name)
    else:
        assert _facts(ev) == _facts(canonical), (outer.name, inner.name)


EXACT = [p for p in INNER if _exact(p)]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    forms=st.lists(st.sampled_from(EXACT), min_size=1, max_size=4),
    junk=st.lists(st.sampled_from(["app", "[pod-7]", "(w)", "|", "-", "#", ">", "x=1", "<", "/a/b"]), max_size=3).map(
        lambda words: "".join(w + " " for w in words)
    ),
    seed=st.integers(0, 1000),
)
def test_mixed_forms_behind_junk_read_alike(forms, junk, seed, canonical_text, canonical, tmp_path):
    """Each line in a form drawn from the exact ones, behind the same unknown words (balanced
    brackets: an unclosed `[` before `[exec] [stage]` reads as part of the exec id)."""
    rnd = random.Random(seed)
    text = _reprefix(canonical_text, _first_dated(lambda ts: ("", rnd.choice(forms).format(ts))), junk)
    ev = _load(tmp_path, f"m{seed}", text)
    assert _diff(canonical, ev) == [], ([p.name for p in forms], junk)


def test_the_12_hour_viewer_tail_reads_its_times(tmp_path):
    """`4095/4096 complete, 1 in-flight, 0 queued` for 12 h, copied from a log viewer whose
    receive time is glued to a glog line: the times are read, the stage is not 0 s long."""
    viewer = next(p for p in OUTER if p.name == "viewer-glued")
    glog = next(p for p in INNER if p.name == "glog")
    start = calendar.timegm((2026, 11, 19, 10, 0, 0))
    lines = [
        viewer.format(start + t) + glog.format(start + t) + "[exec] [stage0-Map] 4095/4096 complete, 1 in-flight, "
        "0 queued, 300/300 workers alive, 0 dead"
        for t in range(0, 12 * 3600 + 1, 60)
    ]
    ev = _load(tmp_path, "tail", "\n".join(lines) + "\n")
    ts = ev.status["ts"].dropna()
    assert len(ts) >= 2 and ts.max() - ts.min() == pytest.approx(12 * 3600)


def _records(text: str) -> list[tuple[float, str]]:
    """The canonical lines as log records (time, message with its traceback), in order."""
    out: list[tuple[float, str]] = []
    for line in text.splitlines():
        m = CANONICAL.match(line)
        if m is None:
            out[-1] = (out[-1][0], out[-1][1] + "\n" + line)
            continue
        y, mo, d, h, mi, s, ms, message = m.groups()
        out.append((calendar.timegm((int(y), int(mo), int(d), int(h), int(mi), int(s))) + int(ms) / 1000, message))
    return out


@pytest.mark.parametrize("export", ["cloud-logging", "journald", "iris-jsonl"])
def test_json_record_exports_read_as_the_log(export, canonical_text, canonical, tmp_path):
    """Cloud Logging's JSON array (newest first), journald's JSON lines (µs times), Iris records."""
    import json
    from datetime import UTC, datetime

    recs = _records(canonical_text)
    iso = [datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z") for ts, _ in recs]
    texts = [t for _, t in recs]
    if export == "cloud-logging":
        rows = [{"textPayload": t, "timestamp": i, "severity": "INFO"} for t, i in zip(texts, iso, strict=True)]
        body = json.dumps(rows[::-1])
    elif export == "journald":
        body = "\n".join(json.dumps({"MESSAGE": t, "__REALTIME_TIMESTAMP": str(round(ts * 1e6))}) for ts, t in recs)
    else:
        body = "\n".join(json.dumps({"data": t, "timestamp": i}) for t, i in zip(texts, iso, strict=True))
    path = tmp_path / "export.json"
    path.write_text(body + "\n", encoding="utf-8")
    from zephyr_debug.sources import load

    assert _facts(load(str(path))) == _facts(canonical), export
