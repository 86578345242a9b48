"""What a person reads from `zdebug crashes` on the repo's crash corpus (tests/data/crashes):
real values, never a mask token; 80 columns; every group names its stage(s) when the input
knows them; rows in time order; `--group FP` opens one group whole; reports pasted without
their frames or their `Traceback` headers group with their full twins."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import traceback
from pathlib import Path

import pytest

from zephyr_debug import cli
from zephyr_debug.crashes.cluster import SCHEMA_VERSION, cluster
from zephyr_debug.crashes.fingerprint import Fingerprinter
from zephyr_debug.crashes.normalize import rules
from zephyr_debug.crashes.parse import split

CORPUS = Path(__file__).parent / "data" / "crashes"
SOURCES = [
    CORPUS / "files",
    CORPUS / "variations" / "files",
    CORPUS / "logs" / "mixed.log",
    CORPUS / "logs" / "inline-worker-0.log",
]
# Every token the masks write (rules.toml), and the bucket of messages beyond MAX_VARIANTS.
TOKENS = sorted({m.token for m in rules()["masks"]} | {"<other messages>"})
MASKED = re.compile("|".join(map(re.escape, TOKENS)))


@pytest.fixture
def zdebug(capsysbinary, monkeypatch):
    """The real CLI entry point in-process, 80 columns: `zdebug(*args)` -> (code, stdout, stderr)."""
    monkeypatch.setenv("COLUMNS", "80")

    def run(*args: str, stdin: bytes = b"") -> tuple[int, str, str]:
        monkeypatch.setattr(sys, "argv", ["zdebug", *args])
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
        try:
            cli.main()
            code = 0
        except SystemExit as exc:
            code = exc.code or 0
        out, err = capsysbinary.readouterr()
        return code, out.decode(), err.decode()

    return run


def _fits(text: str) -> None:
    assert max(map(len, text.splitlines()), default=0) <= 80, max(text.splitlines(), key=len)


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_text_output_shows_no_mask_token_and_fits_80_columns(zdebug, source):
    assert "<num>" in TOKENS and "<str>" in TOKENS and "<home>" in TOKENS
    code, out, err = zdebug("crashes", str(source), "--dedupe", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["schema_version"] == SCHEMA_VERSION
    groups = data["groups"]
    assert all(v["template"] and v["example"] for g in groups for v in g["variants"])  # JSON keeps the templates
    texts = [zdebug("crashes", str(source))[1], zdebug("crashes", str(source), "--dedupe")[1]]
    texts += [zdebug("crashes", str(source), "--group", g["fingerprint"])[1] for g in groups]
    for text in texts:
        assert text and not MASKED.findall(text), sorted(set(MASKED.findall(text)))
        _fits(text)
    words = " ".join(texts[1].split())  # lines wrapped at 80 columns, joined back
    assert all(f"--group {g['fingerprint'][:8]}" in words for g in groups)  # every group, none elided
    for g in groups:  # the latest event's message as printed is the headline
        assert " ".join(g["raw_message"].split())[:30] in words


@pytest.mark.parametrize("source", SOURCES[1:], ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_group_names_its_stage_and_rows_come_in_time_order(zdebug, source):
    groups = json.loads(zdebug("crashes", str(source), "--dedupe", "--json")[1])["groups"]
    assert all(g["stages"] for g in groups)
    listed = zdebug("crashes", str(source), "--dedupe")[1]
    for block in re.split(r"\n#\d+ ", listed)[1:]:
        assert re.search(r"stage\d-\w+", block), block
    rows = json.loads(zdebug("crashes", str(source), "--json")[1])["crashes"]
    times = [r["ts"] for r in rows if r["ts"] is not None]
    assert times == sorted(times) and [r["ts"] for r in rows[: len(times)]] == times  # undated ones last
    for g in groups[:3]:
        one = json.loads(zdebug("crashes", str(source), "--group", g["fingerprint"], "--json")[1])["group"]
        events = [e["ts"] for e in one["events"] if e["ts"] is not None]
        assert len(one["events"]) == g["count"] and events == sorted(events)


def test_a_group_opened_whole_has_both_ends_every_event_the_verdict_and_the_playbook(zdebug):
    source = CORPUS / "logs" / "mixed.log"
    groups = json.loads(zdebug("crashes", str(source), "--dedupe", "--json")[1])["groups"]
    g = max(groups, key=lambda g: g["count"])
    g = json.loads(zdebug("crashes", str(source), "--group", g["fingerprint"], "--json")[1])["group"]
    code, out, err = zdebug("crashes", str(source), "--group", g["fingerprint"][:8])
    assert code == 0, err
    assert f"group {g['fingerprint']}" in out and "verdict: " in out and "zdebug playbook " in out
    assert out.count("Traceback (most recent call last):") >= 2  # the first and the latest event, raw
    assert f"{len(g['events'])} event(s) in time order" in out
    for e in g["events"]:
        assert e["source"] in out
        assert e["stage"] in out
    one = json.loads(zdebug("crashes", str(source), "--group", g["fingerprint"], "--json")[1])["group"]
    assert one["fingerprint"] == g["fingerprint"] and one["verdict"] and one["verdict_reason"]
    assert one["first"].startswith("Traceback") and one["latest"].startswith("Traceback")
    assert one["first_at"] == one["events"][0] and one["latest_at"] == one["events"][-1]
    code, _, err = zdebug("crashes", str(source), "--group", "zzzz")
    assert code == 2 and err.count("\n") == 1 and "zzzz" in err


def test_a_crash_loop_is_called_deterministic_with_its_reason(zdebug, tmp_path):
    tb = _raised(lambda: _lookup({"id": 1}))
    log = tmp_path / "worker.log"
    log.write_text(
        "".join(
            f"2026-12-02 21:59:{10 + i:02d},000 INFO zephyr.worker: [w-{i % 2}] Executing stage stage1-Reduce "
            f"shard 4 (attempt {i})\n{tb}"
            for i in range(3)
        )
    )
    (g,) = json.loads(zdebug("crashes", str(log), "--dedupe", "--json")[1])["groups"]
    assert g["verdict"] == "deterministic" and "shard 4 of stage1-Reduce" in g["verdict_reason"]
    out = zdebug("crashes", str(log), "--group", g["fingerprint"])[1]
    assert "verdict: deterministic" in out and "retrying will not help" in out
    assert "zdebug playbook task-error-abort" in out
    events = [line.split() for line in out.splitlines() if line.startswith("2026-12-02")]
    # attempts as the log numbers them: 0, 1, 2
    assert [(e[2], e[4], e[6]) for e in events] == [("stage1-Reduce", "4", str(i)) for i in range(3)]


def _lookup(record: dict) -> str:
    return record["user_id"]


def _wrapped(record: dict) -> str:
    try:
        return _lookup(record)
    except KeyError as exc:
        raise ValueError(f"bad record {record}") from exc


def _raised(fn) -> str:
    try:
        fn()
    except Exception:
        return traceback.format_exc()
    raise AssertionError("did not raise")


def _crashes(*texts: str) -> list:
    return [c for i, t in enumerate(texts) for c in split(t.splitlines(), f"paste-{i}")]


def test_bare_exception_lines_and_headerless_parts_group_with_their_full_twins():
    fp = Fingerprinter()
    full = _raised(lambda: _wrapped({"id": 1}))
    headless = "\n".join(line for line in full.splitlines() if not line.startswith("Traceback"))
    second_headless = full.replace("\n\nTraceback (most recent call last):\n", "\n\n", 1)
    assert "Traceback" not in headless and second_headless.count("Traceback (most") == 1
    bare = "KeyError: 'user_id'"
    crashes = _crashes(full, headless, second_headless, bare)
    assert len(crashes) == 4
    (group,) = cluster(crashes, fp)
    assert group.count == 4 and group.joined == 1 and group.fingerprint == fp.signature(full).fingerprint
    assert group.wrapper and group.wrapper.startswith("ValueError")


def test_a_bare_line_with_two_possible_twins_stays_apart():
    fp = Fingerprinter()
    one = _raised(lambda: _lookup({}))
    other = _raised(lambda: {}["user_id"])  # another site raising the same KeyError
    groups = cluster(_crashes(one, other, "KeyError: 'user_id'"), fp)
    assert sorted(g.count for g in groups) == [1, 1, 1]


def test_a_bare_exception_line_in_a_long_log_is_no_crash():
    lines = ["2026-12-02 21:59:16,743 INFO app: working"] * 100 + ["ValueError: not a report here"]
    assert list(split(lines, "big.log")) == []
    assert [c.text for c in split(["KeyError: 'user_id'", ""], "paste")] == ["KeyError: 'user_id'"]


def test_exit_status_is_1_for_crashes_with_no_earlier_run_and_0_for_a_log_without(zdebug, tmp_path):
    source = str(CORPUS / "logs" / "mixed.log")
    assert zdebug("crashes", source, "--dedupe", "--exit-status")[0] == 1
    assert zdebug("crashes", source, "--exit-status")[0] == 1
    assert zdebug("crashes", source, "--dedupe")[0] == 0
    quiet = tmp_path / "worker.log"
    quiet.write_text("2026-12-02 21:59:16,743 INFO zephyr.worker: [w-1] Executing stage s0 shard 7 (attempt 0)\n")
    assert zdebug("crashes", str(quiet), "--dedupe", "--exit-status")[0] == 0


def test_a_faulthandler_dump_cut_by_another_workers_line_groups_with_its_full_twin(tmp_path):
    script = tmp_path / "native.py"
    script.write_text("import ctypes\ndef decode():\n    ctypes.string_at(0)\ndef run():\n    decode()\nrun()\n")
    proc = subprocess.run([sys.executable, "-X", "faulthandler", str(script)], capture_output=True, text=True)
    assert proc.returncode == -11 and "string_at" in proc.stderr
    dump = proc.stderr.rstrip("\n").splitlines()
    at = next(i for i, line in enumerate(dump) if "string_at" in line) + 1  # cut before the in-app frames
    other = "I20261202 21:59:18.000 140415056467648 zephyr.execution Worker w-2 running shard 9"
    log = [
        "2026-12-02 21:59:16,743 INFO zephyr.worker: [w-1] Executing stage stage0-Map shard 7 (attempt 0)",
        *dump,
        "2026-12-02 21:59:17,743 INFO zephyr.worker: [w-3] Executing stage stage0-Map shard 8 (attempt 0)",
        *dump[:at],
        other,
        *dump[at:],
    ]
    crashes = list(split(log, "merged.log"))
    assert len(crashes) == 2
    fp = Fingerprinter()
    full, cut = (fp.signature(c.text) for c in crashes)
    assert full.frames[0] == "native:decode" and full.partial is None
    assert cut.partial == "cut" and cut.fingerprint != full.fingerprint
    (group,) = cluster(crashes, fp)
    assert group.count == 2 and group.joined == 1 and group.fingerprint == full.fingerprint
    assert group.shards == (7, 8)
