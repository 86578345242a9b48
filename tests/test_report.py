"""`zdebug report`: the HTML page as a browser shows it (Debian chromium, headless), offline."""

from __future__ import annotations

import base64
import json
import re
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image, ImageStat
from plotly.offline import get_plotlyjs
from test_cli_foundation import ZDEBUG, assert_one_line_error, zdebug

from benchmarks import report_data
from benchmarks.report_data import Browser, big_evidence
from zephyr_debug.analyze.analysis import analyze
from zephyr_debug.render.report import FLAGGED, Limits, render
from zephyr_debug.render.report_tables import ATTEMPT_ROWS, OUTCOMES, outcome_keys

PLOTLY_BYTES = len(get_plotlyjs().encode())


def rgb(color: str) -> tuple[int, int, int]:
    return tuple(int(color[i : i + 2], 16) for i in (1, 3, 5))


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


def share_near(image: Image.Image, box: tuple[int, int, int, int], color: str, tol: int = 24) -> float:
    """Share of the pixels in `box` within `tol` of `color` on every channel."""
    px = np.asarray(image.crop(box), dtype=int)
    return float((np.abs(px - np.array(rgb(color))).max(axis=2) <= tol).mean()) if px.size else 0.0


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_report_of_a_skewed_job_highlights_the_straggler_in_chromium(reference_job, jobs_root, tmp_path):
    # The straggler-tail playbook's job (shared with its test through the session cache).
    result = reference_job("skew-shard:3:x12", "slow-worker:1:x6", workers=3, shards=12, stages=1, chunk_seconds=0.05)
    proc = zdebug("report", str(result.job_dir), "--json", home=jobs_root.parent)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    page = Path(summary["report"])
    assert page == result.job_dir / "report.html" and summary["bytes"] == page.stat().st_size
    text = page.read_text()
    assert_offline(text)
    found = json.loads(zdebug("diagnose", str(result.job_dir), "--json", home=jobs_root.parent).stdout)["findings"]
    assert 3 in {f["shard"] for f in found}, found
    assert summary["findings"] == len(found)
    dom, log, image = chromium(page, tmp_path)
    assert_rendered(dom, log, text)
    assert_not_blank(image)
    # The top-ranked shard finding is labelled on the timeline (an SVG annotation drawn by plotly); every
    # finding is listed with its severity and next commands, and a shard finding links to its bar.
    top = next(f for f in found if f["shard"] is not None)
    assert re.search(rf'class="annotation-text"[^>]*data-unformatted="shard {top["shard"]} · {top["kind"]}"', dom)
    for f in found:
        assert f"sev-{f['severity']}" in dom and all(f"<code>{step}</code>" in dom for step in f["next"]), f
    assert dom.count('class="jump"') >= sum(f["shard"] is not None for f in found)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_5000_shards_on_200_workers_stay_light_and_render(tmp_path):
    ev = big_evidence()
    found = analyze(ev)
    assert [f.shard for f in found.problems] == [4321], found.findings
    text = render(ev, found)
    data_bytes = len(text.encode()) - PLOTLY_BYTES
    assert data_bytes < 2 * 2**20, data_bytes  # 5,052 attempts, 122,200 samples, 1,223 status rows
    # Denser heartbeats and status polls (x4 rows) barely change the page: they are binned.
    dense = big_evidence(heartbeat=0.5, status_every=0.25)
    assert len(dense.samples) > 3.9 * len(ev.samples)
    dense_bytes = len(render(dense, analyze(dense)).encode()) - PLOTLY_BYTES
    assert dense_bytes < 1.2 * data_bytes, (dense_bytes, data_bytes)
    page = tmp_path / "big.html"
    page.write_text(text)
    dom, log, image = chromium(page, tmp_path)
    assert_rendered(dom, log, text)
    assert_not_blank(image)
    assert "top 10 of 200 workers" in dom
    assert f"{ATTEMPT_ROWS:,} of {len(ev.attempts):,} attempts shown" in dom
    attempt_rows = dom[dom.index('id="attempts"') : dom.index("<h2>Crash groups")].count("<tr><td>Map</td>")
    assert attempt_rows == ATTEMPT_ROWS, attempt_rows


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_pixels_labels_sorting_and_jumps_in_a_driven_chromium(tmp_path):
    # Four stragglers that end together on adjacent worker rows (their labels would collide), one TASK failure.
    ev = big_evidence(shards=60, workers=6, straggler=(54, 55, 56, 57))
    found = analyze(ev)
    assert {f.shard for f in found.problems} == {54, 55, 56, 57}
    page = tmp_path / "report.html"
    page.write_text(render(ev, found))
    with Browser(tmp_path) as b:
        b.open(page)
        assert not b.console(), b.console()
        # Labels: the ones still drawn do not overlap; drawn + left out = one per flagged shard.
        boxes = b.js("""Array.from(document.querySelectorAll('#fig-0 g.annotation')).map(function (g) {
            const r = g.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; })""")
        hidden = int(b.js("document.getElementById('fig-0').dataset.labelsHidden"))
        assert boxes and len(boxes) + hidden == 4, (boxes, hidden)
        for i, p in enumerate(boxes):
            for q in boxes[i + 1 :]:
                assert not (p[0] < q[2] and q[0] < p[2] and p[1] < q[3] and q[1] < p[3]), (p, q)
        # Pixels: the flagged outline's colour is on the straggler's bar edges, the done colour inside it.
        b.js("document.getElementById('fig-0').scrollIntoView()")
        bar = b.js("""(function () {
            const traces = document.querySelectorAll('#fig-0 g.trace.bars');
            const paths = Array.from(traces[traces.length - 1].querySelectorAll('path'));
            const r = paths.map(function (p) { return p.getBoundingClientRect(); })
                .sort(function (a, c) { return c.width - a.width; })[0];
            return [r.left, r.top, r.right, r.bottom]; })()""")
        image = Image.open(b.screenshot(tmp_path / "shot.png")).convert("RGB")
        x0, y0, x1, y1 = (round(v) for v in bar)
        assert x1 - x0 > 300 and y1 - y0 > 5, bar  # the 12x straggler is the longest bar
        edge = max(share_near(image, (x0, y, x1, y + 1), FLAGGED) for y in range(y0 - 3, y0 + 4))
        assert edge > 0.7, edge  # the top edge
        assert share_near(image, (x0 + 5, (y0 + y1) // 2 - 1, x1 - 5, (y0 + y1) // 2 + 1), OUTCOMES["done"][1]) > 0.3
        assert share_near(image, (0, 0, image.width, image.height), FLAGGED) < 0.05  # the outline is not everywhere
        # A TASK failure's colour is on the timeline too.
        assert share_near(image, (0, 0, image.width, image.height), OUTCOMES["task"][1], tol=8) > 0
        # Sorting: a click on the attempt table's "seconds" header sorts the rows, a second click reverses them.
        column = b.js(
            "Array.from(document.querySelectorAll('#attempts th')).findIndex(function (th) {"
            " return th.textContent === 'seconds'; })"
        )

        def seconds() -> list[float]:
            return b.js(
                f"Array.from(document.querySelectorAll('#attempts tbody tr')).map(function (tr) {{"
                f" return Number(tr.cells[{column}].dataset.v); }})"
            )

        before = seconds()
        for direction in (1, -1):
            b.js(f"document.querySelectorAll('#attempts th')[{column}].scrollIntoView({{block: 'center'}})")
            th = b.js(
                f"(function () {{ const r = document.querySelectorAll('#attempts th')[{column}]"
                ".getBoundingClientRect(); return [r.left + r.width / 2, r.top + r.height / 2]; })()"
            )
            b.click(*th)
            after = seconds()
            assert after == sorted(before, reverse=direction < 0) and after != before, after[:5]
        # A finding's link scrolls its timeline into view and outlines its bar with a shape.
        b.js("window.scrollTo(0, document.body.scrollHeight)")
        link = b.js(
            "(function () { const a = document.querySelector('a.jump'); a.scrollIntoView({block: 'center'});"
            " const r = a.getBoundingClientRect(); return [r.left + 5, r.top + r.height / 2,"
            " a.dataset.fig, Number(a.dataset.x1)]; })()"
        )
        b.click(link[0], link[1])
        shapes = b.js(f"document.getElementById('{link[2]}').layout.shapes.map(function (s) {{ return s.x1; }})")
        assert shapes == [pytest.approx(link[3], abs=0.01)]
        top = b.js(f"document.getElementById('{link[2]}').getBoundingClientRect().top")
        assert 0 <= top < b.height and b.js("document.querySelectorAll('tr.target').length") == 1


def test_outcomes_get_their_own_colour_from_what_the_evidence_recorded():
    a = pd.DataFrame(
        {
            "outcome": [
                "done",
                "failed",
                "failed",
                "failed",
                "failed",
                "failed",
                "requeued",
                "running",
                "stale",
                "failed",
            ],
            "kind": [None, "task", "infra", "infra", "task", "task", "infra", None, None, "infra"],
            "failure": [None, "exception", "oom", None, "segv", "exit", None, None, None, None],
            "returncode": [None, 1, None, None, -11, 3, None, None, None, -9],
        }
    )
    assert list(outcome_keys(a)) == ["done", "task", "oom", "lost", "crash", "crash", "lost", "running", "stale", "oom"]
    assert len({color for _, color in OUTCOMES.values()} | {FLAGGED}) == len(OUTCOMES) + 1
    ev = big_evidence(shards=40, workers=4, straggler=39)
    ev.attempts.loc[ev.attempts["outcome"] == "failed", ["kind", "error"]] = ["infra", "worker lost"]
    text = render(ev, analyze(ev))
    spec = json.loads(re.search(r'id="fig-0-spec">(.*?)</script>', text).group(1))
    colors = {t["name"]: t["marker"].get("color") for t in spec["data"]}
    assert colors["worker lost / requeued"] == OUTCOMES["lost"][1] and colors["done"] == OUTCOMES["done"][1]
    # Hovers carry items, bytes, peak RSS, the failure text and the attempt as Zephyr numbers it (the first is 0).
    lost = next(t for t in spec["data"] if t["name"] == "worker lost / requeued")
    _, attempt, _, detail, error = lost["customdata"][0]
    assert (
        attempt == 0
        and error == "worker lost"
        and re.fullmatch(r"1,000 items · 48\.8 KB · peak RSS \d+\.\d MB", detail)
    ), detail


def test_summary_metrics_are_the_quantiles_of_the_finished_attempts():
    ev = big_evidence(shards=200, workers=10, straggler=3)
    text = render(ev, analyze(ev))
    done = ev.attempts[ev.attempts["outcome"] == "done"]
    cells = re.search(r"<td>duration</td>(.*?)</tr>", text).group(1)
    shown = [float(x.replace(",", "")) for x in re.findall(r">([\d,.]+) s<", cells)]
    assert shown == pytest.approx(np.percentile(done["elapsed_s"], [0, 25, 50, 75, 100]), abs=0.06)
    assert f"Summary metrics over {len(done)} finished attempts" in text
    # Worker totals: shards done and busy seconds add up to the attempt table's.
    rows = re.findall(r'<tr><td>(zephyr-job-p0-workers-\d+)</td><td>[^<]*</td><td class="n" data-v="(\d+)">', text)
    assert sum(int(n) for _, n in rows) == len(done) and len(rows) == 10


def test_bar_limit_leaves_out_the_shortest_finished_attempts_but_never_a_flagged_shard():
    ev = big_evidence(shards=400, workers=20, straggler=123)
    found = analyze(ev)
    linked = {s for f in found.findings for s in f.all_shards}
    assert 123 in {f.shard for f in found.problems}
    a = ev.attempts
    droppable = int(((a["outcome"] == "done") & ~a["shard"].isin(linked)).sum())
    text = render(ev, found, limits=Limits(bars_per_stage=100))
    assert f"{droppable - 100:,} shortest finished attempts not drawn" in text
    assert len(text) < len(render(ev, found))
    assert "shard 123 \\u00b7 data-skew" in text and 'data-finding="finding-1"' in text  # label and link kept


def test_evidence_text_cannot_inject_markup():
    ev = big_evidence(shards=40, workers=4, straggler=39)
    evil = "w</script><script>alert(1)</script><b>"
    ev.attempts["worker"] = ev.attempts["worker"].replace("zephyr-job-p0-workers-1", evil)
    ev.attempts["error"] = ev.attempts["error"].replace("ValueError: bad record", f"E<img src=x>: {evil}")
    ev.samples["worker"] = ev.samples["worker"].replace("zephyr-job-p0-workers-1", evil)
    from zephyr_debug.model import Crash

    ev.crashes.append(Crash(text=f"E<img src=x>: {evil}", source=evil, shard=1, worker=evil))
    found = analyze(ev)
    assert found.crash_groups
    text = render(ev, found)
    assert "alert(1)</script>" not in text and "<img src=x>" not in text
    assert text.count("<script") == 2 + text.count('<div class="plot"')  # plotly.js, the figure specs, the drawer


def _figures(page: str) -> list[dict]:
    specs = re.findall(r'<script type="application/json" id="fig-\d+-spec">(.*?)</script>', page)
    return [json.loads(spec) for spec in specs]


def _strings(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def test_worker_ids_and_labels_in_figures_are_text_not_markup():
    """Plotly draws `<a href>`, `<b>`, `<span style>` in tick labels, trace names, annotations and
    hovers: every evidence string in a figure spec has its `<`, `>`, `&` as entities, once, and its
    quotes as they are (plotly does not decode `&quot;`)."""
    ev = big_evidence(shards=40, workers=4, straggler=39)
    link = '<a href="https://example.com/?a=1&b=2">w"1\'</a>'
    style = "<span style='font-size:80px'>big</span>"
    ev.attempts["worker"] = ev.attempts["worker"].replace("zephyr-job-p0-workers-1", link)
    ev.attempts["worker"] = ev.attempts["worker"].replace("zephyr-job-p0-workers-2", style)
    ev.samples["worker"] = ev.samples["worker"].replace("zephyr-job-p0-workers-1", link)
    ev.attempts["stage"] = ev.attempts["stage"].astype(str)
    ev.attempts["error"] = ev.attempts["error"].replace("ValueError: bad record", "E<b>bold</b> & 'q'")
    strings = [s for fig in _figures(render(ev, analyze(ev))) for s in _strings(fig)]
    assert strings
    for s in strings:
        assert "<a " not in s and "<span" not in s and "<b>bold" not in s, s
        assert "&quot;" not in s and "&amp;amp;" not in s and "&amp;lt;" not in s and "&#x27;" not in s, s
    assert any('&lt;a href="https://example.com/?a=1&amp;b=2"&gt;w"1\'&lt;/a&gt;' in s for s in strings)
    assert any("&lt;span style='font-size:80px'&gt;big&lt;/span&gt;" in s for s in strings)
    assert any("E&lt;b&gt;bold&lt;/b&gt; &amp; 'q'" in s for s in strings)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_worker_id_that_is_a_link_is_drawn_as_text_in_chromium(tmp_path):
    """Before: plotly made the worker id `<a href=…>` a link in the timeline's ticks and hovers, and
    `"` showed as `&quot;`."""
    ev = big_evidence(shards=40, workers=4, straggler=39)
    link = '<a href="https://example.com/?a=1&b=2">w"1</a>'
    ev.attempts["worker"] = ev.attempts["worker"].replace("zephyr-job-p0-workers-1", link)
    ev.samples["worker"] = ev.samples["worker"].replace("zephyr-job-p0-workers-1", link)
    page = tmp_path / "links.html"
    page.write_text(render(ev, analyze(ev)))
    dom, log, _ = chromium(page, tmp_path)
    assert_rendered(dom, log, page.read_text())
    assert not re.search(r"<a[^>]*example\.com", dom) and "&amp;quot;" not in dom
    svg = "".join(re.findall(r"<svg.*?</svg>", dom, re.S))
    assert '&lt;a href="https://example.com/?a=1&amp;b=2"&gt;w"1&lt;/a&gt;' in svg  # the tick label, as text


def test_unwritable_output_is_a_one_line_error(tmp_path):
    log = Path(__file__).parent / "data" / "formats" / "coordinator_pypi.log"
    proc = zdebug("report", str(log), "-o", str(tmp_path / "missing" / "r.html"), "--json")
    assert_one_line_error(proc, "cannot write")


def _evidence_dir(tmp_path: Path) -> Path:
    logs = tmp_path / "logs"
    logs.mkdir()
    log = Path(__file__).parent / "data" / "formats" / "coordinator_pypi.log"
    (logs / "coordinator.log").write_bytes(log.read_bytes())
    return logs


@pytest.mark.slow
def test_report_never_writes_through_a_symlink_at_its_target(tmp_path):
    """An evidence dir unpacked from someone else holds `report.html -> a file of ours`: refused in
    one line (exit 3), the file untouched; the same for `-o LINK`, a dangling link included."""
    logs = _evidence_dir(tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_text("mine\n")
    (logs / "report.html").symlink_to(victim)
    proc = zdebug("report", str(logs))
    error = proc.stderr.strip().splitlines()[-1]  # after the warning that the link is no evidence
    assert error.startswith("zdebug: error: ") and "report.html: is a symbolic link" in error
    assert proc.returncode == 3 and victim.read_text() == "mine\n"
    dangling = tmp_path / "dangling.html"
    dangling.symlink_to(tmp_path / "nowhere.html")
    proc = zdebug("report", str(logs), "-o", str(dangling))
    assert_one_line_error(proc, "symbolic link")
    assert proc.returncode == 3 and not (tmp_path / "nowhere.html").exists()
    assert sorted(p.name for p in logs.iterdir()) == ["coordinator.log", "report.html"]  # no temp file left


def test_report_replaces_its_file_whole_and_later_reads_skip_it(tmp_path):
    """The report goes to a fresh file renamed into place (a hard link to the old one keeps the old
    text); a report left in an evidence dir is no evidence: later reads give no warning about it."""
    from test_fuzz_corpus import run_inprocess

    logs = _evidence_dir(tmp_path)
    page = logs / "report.html"
    page.write_text("old")
    (tmp_path / "old.html").hardlink_to(page)
    code, out, err = run_inprocess(["report", str(logs), "--json"])
    assert code == 0, err
    assert json.loads(out)["report"] == str(page) and page.read_text().startswith("<!doctype html>")
    assert (tmp_path / "old.html").read_text() == "old"
    (logs / "copy.html").write_bytes(page.read_bytes())  # under any name
    for argv in (["status", str(logs), "--json"], ["report", str(logs), "--json"]):
        code, out, err = run_inprocess(argv)
        assert code == 0 and err == "", err
        assert not any("html" in w for w in json.loads(out).get("warnings", [])), out
    assert sorted(p.name for p in logs.iterdir()) == ["coordinator.log", "copy.html", "report.html"]


def test_report_of_a_zephyr_log_lands_next_to_where_it_is_run(tmp_path):
    log = Path(__file__).parent / "data" / "formats" / "coordinator_pypi.log"
    proc = subprocess.run(
        [*ZDEBUG, "report", str(log.resolve())], capture_output=True, text=True, cwd=tmp_path, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    written = list(tmp_path.glob("zdebug-report-*.html"))
    assert len(written) == 1 and str(written[0]) in proc.stdout.replace("\n", "")
    text = written[0].read_text()
    assert_offline(text)
    # The stage's timeline, the status series and its items/s; no samples.
    assert text.count('<div class="plot"') == 3


def plotly_array(value) -> np.ndarray:
    """A trace's x/y as plotly's JSON holds it: a list, or a typed array ({"dtype", "bdata"})."""
    if isinstance(value, dict):
        return np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"]).astype(float)
    return np.asarray(value, float)


def test_throughput_chart_is_each_stage_items_per_second_binned_with_earlier_runs_dashed():
    from zephyr_debug.analyze.counters import ITEMS, Counter, Run, Stage

    ev = big_evidence(shards=40, workers=4, straggler=39)
    t = ev.status["ts"] - ev.status["ts"].min()
    half = float(t.max()) / 2
    ev.status["items"] = np.where(t < half, 10 * t, 10 * half + 2 * (t - half))  # 10/s, then 2/s
    before = Run("last-night", (Stage("Map", 100.0, 40, None, None, (Counter(ITEMS, 4000.0, 40.0, None),)),))
    text = render(ev, analyze(ev), Limits(series_points=50), earlier=[before])
    fig = re.search(r'<h2>Throughput per stage</h2><div class="plot" id="(fig-\d+)"', text).group(1)
    traces = json.loads(re.search(rf'id="{fig}-spec">(.*?)</script>', text).group(1))["data"]
    now, dashed = traces
    x, y = plotly_array(now["x"]), plotly_array(now["y"])
    assert now["name"] == "Map" and 40 <= len(y) <= 50 and (np.diff(x) > 0).all()
    assert np.median(y[: len(y) // 3]) == pytest.approx(10, rel=0.1)
    assert np.median(y[-len(y) // 3 :]) == pytest.approx(2, rel=0.1)
    assert (
        list(plotly_array(dashed["y"])) == [40.0, 40.0]
        and dashed["line"]["dash"] == "dash"
        and "last-night" in dashed["name"]
    )
    alone = render(ev, analyze(ev))
    assert "no earlier runs of this pipeline" in alone
    ev.status = ev.status.drop(columns="items")
    assert "<h2>Throughput per stage</h2>" + '<p class="muted">no data</p>' in render(ev, analyze(ev))
