"""Rich view of `zdebug counters`: per stage, every counter's total, rate, rate per item,
per-shard spread and ratio to the earlier runs; then worker churn and the findings."""

from __future__ import annotations

import re

from rich.table import Table

from zephyr_debug.analyze.churn import WorkerChurn, clock
from zephyr_debug.analyze.counters import ITEMS, Report, Stage
from zephyr_debug.render.findings import show
from zephyr_debug.render.output import clean, console, duration

SHORT = {"zephyr/item_count": "items", "zephyr/bytes_processed": "bytes"}
# Zephyr's worker gauges (`zephyr/worker/cpu_pct_average`, `mem_current_bytes`, `mem_peak_bytes`):
# a level sampled at the end, whose "total" is that level; a rate or per-item value of it means nothing.
GAUGE = re.compile(r"(?:_pct|_average|_avg|_current|_peak|_max|_min)(?:_bytes|_pct)?$|_pct_|(?:^|/)mem_")


def is_gauge(name: str) -> bool:
    return bool(GAUGE.search(name))


MAX_CHURN_ROWS = 10


def _n(v: float | None) -> str:
    if v is None:
        return "-"
    for unit, size in (("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(v) >= size:
            return f"{v / size:.3g}{unit}"
    return f"{v:.3g}"


def stage_table(st: Stage, r: Report) -> Table:
    ratios = {c.counter: c.ratio for c in r.comparisons if c.stage == st.stage}
    rate = f", {_n(st.rate)} items/s per shard" if st.shard_rate else ""
    vs = f" (x{ratios[None]:.2f} of earlier runs)" if None in ratios else ""
    table = Table(
        title=f"{clean(st.stage)}: {st.done} shards, {duration(st.wall_s)}{rate}{vs}",
        box=None,
        pad_edge=False,
        title_justify="left",
    )
    names = [clean(SHORT.get(c.name, c.name)) for c in st.counters]
    # A name is what a user greps for: whole, on one line; the numbers fold first.
    table.add_column("counter", no_wrap=True, min_width=max(map(len, names), default=7))
    for col in ("total", "/s", "/item", "med", "p99", "max@shard", "vs"):  # med, p99: per shard
        table.add_column(col, justify="right", overflow="fold")
    for c, name in zip(st.counters, names, strict=True):
        ratio = ratios.get(c.name)
        gauge = is_gauge(c.name)  # a level (cpu %, bytes in use), not a count: no rate, no per item
        table.add_row(
            name,
            _n(c.total),
            "-" if gauge else _n(c.rate),
            "-" if c.name == ITEMS or gauge else _n(c.per_item),
            _n(c.median),
            _n(c.p99),
            f"{_n(c.high[1])}@{c.high[0]}" if c.high else "-",
            "-" if ratio is None else f"x{ratio:.2f}",
        )
    return table


def churn_table(workers: list[WorkerChurn]) -> Table:
    table = Table(
        title="worker churn (losses: heartbeat timeouts, re-registrations)",
        box=None,
        pad_edge=False,
        title_justify="left",
    )
    for col in ("worker", "re-reg", "timeouts", "peak", "first", "last"):
        table.add_column(col, justify="left" if col == "worker" else "right", overflow="fold")
    for w in workers[:MAX_CHURN_ROWS]:
        table.add_row(
            clean(w.worker),
            str(w.reregistered),
            str(w.timeouts),
            str(w.max_per_window),
            clock(w.times[0]),
            clock(w.times[-1]),
        )
    return table


def render(r: Report, churn: list[WorkerChurn]) -> None:
    con = console()
    earlier = ", ".join(clean(e.job) for e in r.earlier[:3]) + (" …" if len(r.earlier) > 3 else "")
    con.print(f"[bold]{clean(r.run.job)}[/]  compared with: {earlier or 'no earlier run'}")
    if not r.run.stages:
        con.print("No counters in this evidence (no item counts, status `items=`, finelog rows or final counters).")
    for st in r.run.stages:
        con.print(stage_table(st, r))
    if churn:
        con.print(churn_table(churn))
    if not r.findings:
        con.print("[green]No counter, throughput or churn anomaly.[/]")
    for f in r.findings:
        con.print()
        show(con, f)
