"""`zdebug report`: the HTML page as a browser shows it (Debian chromium, headless), offline."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from PIL import Image, ImageStat
from plotly.offline import get_plotlyjs

from zephyr_debug.commands.report import analyses
from zephyr_debug.render.report import Limits, render

from benchmarks import report_data
from benchmarks.report_data import big_evidence
from test_cli_foundation import ZDEBUG, assert_one_line_error, zdebug

PLOTLY_BYTES = len(get_plotlyjs().encode())


def chromium(page: Path, tmp_path: Path) -> tuple[str, str, Image.Image]:
    dom, log, shot, _ = report_data.chromium(page, tmp_path)
    return dom, log, Image.open(shot).convert("RGB")


def assert_rendered(dom: str, log: str, page_html: str) -> None:
    """Every chart drawn (the page's own count), plotly's SVG in the DOM, no console output at all."""
    plots = page_html.count('<div class="plot"')
    assert plots and f'data-rendered="{plots}"' in dom, re.findall(r"data-rendered=\"\d*\"", dom)
    assert dom.count('class="main-svg"') >= plots
    console = [line for line in log.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    assert not console, console


def assert_not_blank(image: Image.Image) -> None:
    stat = ImageStat.Stat(image)
    assert max(stat.stddev) > 20, stat.stddev
    assert len(image.getcolors(maxcolors=1 << 20) or []) > 50


def assert_offline(page_html: str) -> None:
    """Nothing to fetch: no external script, stylesheet or image."""
    assert not re.search(r"<(script|link|img|iframe)[^>]+(src|href)=", page_html, re.I)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_report_of_a_skewed_job_highlights_the_straggler_in_chromium(reference_job, jobs_root, tmp_path):
    # The straggler-tail playbook's job (shared with its test through the session cache).
    result = reference_job("skew-shard:3:x8", "slow-worker:1:x6", workers=3, shards=9, stages=1)
    proc = zdebug("report", str(result.job_dir), "--json", home=jobs_root.parent)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    page = Path(summary["report"])
    assert page == result.job_dir / "report.html" and summary["bytes"] == page.stat().st_size
    text = page.read_text()
    assert_offline(text)
    findings = json.loads(zdebug("stragglers", str(result.job_dir), "--json", home=jobs_root.parent).stdout)
    assert 3 in {f["shard"] for f in findings["findings"]}, findings["findings"]
    dom, log, image = chromium(page, tmp_path)
    assert_rendered(dom, log, text)
    assert_not_blank(image)
    # Every finding is labelled on the timeline (an SVG annotation drawn by plotly) and listed with its next command.
    for f in findings["findings"]:
        assert re.search(rf'class="annotation-text"[^>]*data-unformatted="shard {f["shard"]} · {f["cause"]}"', dom), f
        assert f"<code>{f['next']}</code>" in dom


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_5000_shards_on_200_workers_stay_light_and_render(tmp_path):
    ev = big_evidence()
    text = render(ev, **analyses(ev))
    data_bytes = len(text.encode()) - PLOTLY_BYTES
    assert data_bytes < 2 * 2**20, data_bytes  # 5,052 attempts, 122,200 samples, 1,223 status rows
    # Denser heartbeats and status polls (x4 rows) barely change the page: they are binned.
    dense = big_evidence(heartbeat=0.5, status_every=0.25)
    assert len(dense.samples) > 3.9 * len(ev.samples)
    dense_bytes = len(render(dense, **analyses(dense)).encode()) - PLOTLY_BYTES
    assert dense_bytes < 1.2 * data_bytes, (dense_bytes, data_bytes)
    page = tmp_path / "big.html"
    page.write_text(text)
    dom, log, image = chromium(page, tmp_path)
    assert_rendered(dom, log, text)
    assert_not_blank(image)
    assert "top 10 of 200 workers" in dom


def test_bar_limit_leaves_out_the_shortest_finished_attempts_but_never_a_flagged_shard():
    ev = big_evidence(shards=400, workers=20, straggler=123)
    found = analyses(ev)
    flagged = {f["shard"] for f in found["findings"]["findings"]}
    assert 123 in flagged
    a = ev.attempts
    droppable = int(((a["outcome"] == "done") & ~a["shard"].isin(flagged)).sum())
    text = render(ev, **found, limits=Limits(bars_per_stage=100))
    assert f"{droppable - 100:,} shortest finished attempts not drawn" in text
    assert len(text) < len(render(ev, **found))
    assert "shard 123 \\u00b7" in text  # the straggler keeps its bar and its label


def test_evidence_text_cannot_inject_markup():
    ev = big_evidence(shards=40, workers=4, straggler=7)
    evil = "w</script><script>alert(1)</script><b>"
    ev.attempts["worker"] = ev.attempts["worker"].replace("zephyr-job-p0-workers-1", evil)
    ev.samples["worker"] = ev.samples["worker"].replace("zephyr-job-p0-workers-1", evil)
    from zephyr_debug.crashes.cluster import cluster
    from zephyr_debug.crashes.fingerprint import Fingerprinter
    from zephyr_debug.model import Crash

    groups = cluster([Crash(text=f"E<img src=x>: {evil}", source=evil, shard=1, worker=evil)], Fingerprinter())
    text = render(ev, analyses(ev)["findings"], groups)
    assert "alert(1)</script>" not in text and "<img src=x>" not in text
    assert text.count("<script") == 2 + text.count('<div class="plot"')  # plotly.js, the figure specs, the drawer


def test_unwritable_output_is_a_one_line_error(tmp_path):
    log = Path(__file__).parent / "data" / "formats" / "coordinator_pypi.log"
    proc = zdebug("report", str(log), "-o", str(tmp_path / "missing" / "r.html"), "--json")
    assert_one_line_error(proc, "cannot write")


def test_report_of_a_zephyr_log_lands_next_to_where_it_is_run(tmp_path):
    log = Path(__file__).parent / "data" / "formats" / "coordinator_pypi.log"
    proc = subprocess.run([*ZDEBUG, "report", str(log.resolve())], capture_output=True, text=True, cwd=tmp_path,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    written = list(tmp_path.glob("zdebug-report-*.html"))
    assert len(written) == 1 and str(written[0]) in proc.stdout.replace("\n", "")
    text = written[0].read_text()
    assert_offline(text)
    assert text.count('<div class="plot"') == 2  # the stage's timeline and the status series; no samples
