"""Counters and throughput per stage, compared across stages and runs (`zdebug counters`).

`summarize(ev)` gives, per stage, every counter (built-in `zephyr/item_count`,
`zephyr/bytes_processed`, and user counters) with its total, its rate over the stage's wall
time, its rate per item and, where per-shard data exists, its spread over shards. `findings`
applies `Rules` (data, defaults in `docs/counters.md`): a throughput cliff inside a stage, a
stage slower than in earlier runs, a user counter whose rate per item changed by a large
factor, a counter that only a few shards report.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from zephyr_debug.analyze import orderstats
from zephyr_debug.analyze.bystage import stage_slices
from zephyr_debug.analyze.churn import clock
from zephyr_debug.analyze.nextsteps import Steps
from zephyr_debug.analyze.tail import stage_bounds
from zephyr_debug.findings import KINDS as FINDING_KINDS
from zephyr_debug.findings import WARNING, Finding, clean_number
from zephyr_debug.model import Evidence

ITEMS, BYTES = "zephyr/item_count", "zephyr/bytes_processed"
JOB_SCOPE = "(job)"  # counters known for the whole job only (a final counters line, get_counters)
KINDS = tuple(k.name for k in FINDING_KINDS.values() if k.scope == "counter")


@dataclass(frozen=True)
class Rules:
    """When counters are anomalous. Every number here is a documented default (docs/counters.md)."""

    cliff_factor: float = 3.0  # the stage's late rate per in-flight shard <= 1/3 of its early rate
    cliff_points: int = 4  # status points (outside the tail) each third of the stage needs
    drop_factor: float = 3.0  # stage rate <= 1/3 of the median of the same stage in earlier runs
    comparable_items: float = 1.5  # earlier stage compared only when its items per shard are within x1.5
    per_item_factor: float = 5.0  # a user counter per item x5 (or /5) against earlier runs
    per_item_min_count: float = 20.0  # ... and the larger side counts at least this many
    few_shards_share: float = 0.1  # a counter reported by <= 10% of a stage's finished shards
    few_shards_min: int = 10  # ... of a stage with at least this many finished shards


@dataclass(frozen=True)
class Counter:
    """One counter of one stage."""

    name: str
    total: float
    rate: float | None  # per second of the stage's wall time
    per_item: float | None
    shards: int = 0  # finished shards that reported it (non-zero)
    median: float | None = None  # per shard
    p99: float | None = None
    low: tuple[int, float] | None = None  # (shard, value) at the extremes
    high: tuple[int, float] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "total": clean_number(self.total),
            "rate": clean_number(self.rate),
            "per_item": clean_number(self.per_item),
            "shards": self.shards,
            "median": clean_number(self.median),
            "p99": clean_number(self.p99),
            "low": _pair(self.low),
            "high": _pair(self.high),
        }


@dataclass(frozen=True)
class Stage:
    """The counters of one stage of one run."""

    stage: str
    wall_s: float | None
    done: int  # finished shards
    shard_rate: float | None  # median items/s of a finished shard attempt (robust to pool size and tail)
    items_per_shard: float | None
    counters: tuple[Counter, ...] = ()

    def counter(self, name: str) -> Counter | None:
        return next((c for c in self.counters if c.name == name), None)

    @property
    def rate(self) -> float | None:
        """Throughput: the median shard's items/s, else items over the stage's wall time."""
        if self.shard_rate is not None:
            return self.shard_rate
        items = self.counter(ITEMS)
        return items.rate if items else None

    def to_json(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "wall_s": clean_number(self.wall_s),
            "done": self.done,
            "rate": clean_number(self.rate),
            "shard_rate": clean_number(self.shard_rate),
            "items_per_shard": clean_number(self.items_per_shard),
            "counters": [c.to_json() for c in self.counters],
        }


@dataclass(frozen=True)
class Run:
    """Every stage's counters of one job."""

    job: str
    stages: tuple[Stage, ...] = ()
    source: str = ""

    def stage(self, name: str) -> Stage | None:
        return next((s for s in self.stages if s.stage == name), None)

    def to_json(self) -> dict[str, Any]:
        return {"job": self.job, "source": self.source, "stages": [s.to_json() for s in self.stages]}


@dataclass(frozen=True)
class Comparison:
    """One stage (or counter) now against the same in earlier runs."""

    stage: str
    counter: str | None  # None: the stage's throughput; else a counter's rate per item
    now: float
    before: float  # median over the earlier runs that have it
    runs: tuple[str, ...]
    source: str = ""  # where the first of `runs` is (a job dir), for the next command

    @property
    def ratio(self) -> float:
        return self.now / self.before if self.before else math.inf

    def to_json(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "counter": self.counter,
            "now": clean_number(self.now),
            "before": clean_number(self.before),
            "ratio": clean_number(self.ratio),
            "runs": list(self.runs),
        }


# -- summaries ---------------------------------------------------------------------------
def summarize(ev: Evidence, shards: pd.DataFrame | None = None, bounds: pd.DataFrame | None = None) -> Run:
    """Every stage's counters: from shard attempts (items, bytes, user counters per shard), else
    Zephyr's per-stage totals (finelog), else the stage's last status line (`items=`); counters
    known only for the whole job (`Final counters`, get_counters) go to a `(job)` row. `shards`
    (the shard table) and `bounds` (`tail.stage_bounds`): the analysis' own, when it has them."""
    if bounds is None and (len(ev.status) or len(ev.attempts) or ev.stages):
        bounds = stage_bounds(ev)
    walls = bounds["wall_s"].to_dict() if bounds is not None else {}
    done = _done_attempts(ev) if shards is None else _done_shards(ev, shards)
    names = [s.name for s in ev.stages] + sorted(set(done["stage"].unique()) - {s.name for s in ev.stages})
    totals = {s.name: s.totals for s in ev.stages}
    by_stage = _by_stage(done)
    stages = [
        _stage(
            name,
            _wall(walls.get(name)),
            by_stage.get(name, done.iloc[:0]),
            totals.get(name) or {},
            _last_status_items(ev, name),
        )
        for name in names
    ]
    stages = [s for s in stages if s.counters]
    have = {c.name for s in stages for c in s.counters}
    extra = {k: v for k, v in ev.counters.items() if k not in have and _number(v) is not None}
    if extra:
        items = ev.counters.get(ITEMS) or sum(c.total for s in stages for c in s.counters if c.name == ITEMS)
        wall = _wall(max(ev.now - min((s.start_ts for s in ev.stages if s.start_ts), default=ev.now), 0.0))
        stages.append(
            Stage(
                JOB_SCOPE,
                wall,
                0,
                None,
                None,
                tuple(Counter(k, float(v), _div(v, wall), _div(v, items)) for k, v in sorted(extra.items())),
            )
        )
    return Run(ev.job, tuple(stages), ev.source)


def _by_stage(done: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Each stage's rows of `done` in their order (slices: a groupby would copy every group)."""
    by = stage_slices(done["stage"])
    rows = by.rows(done)
    return {str(name): rows.iloc[at] for name, at in by}


def _done_attempts(ev: Evidence) -> pd.DataFrame:
    a = ev.attempts
    cols = ["stage", "shard", "items", "bytes", "elapsed_s", "counters"]
    if not len(a):
        return pd.DataFrame(columns=cols)
    a = a[a["outcome"] == "done"]
    out = pd.DataFrame(
        {
            "stage": a["stage"],
            "shard": pd.to_numeric(a["shard"], errors="coerce"),
            "items": pd.to_numeric(a["items"], errors="coerce"),
            "bytes": pd.to_numeric(a["bytes"], errors="coerce"),
            "elapsed_s": pd.to_numeric(a["elapsed_s"], errors="coerce"),
            "counters": a.get("counters"),
        }
    )
    return out.dropna(subset=["shard"])


def _done_shards(ev: Evidence, shards: pd.DataFrame) -> pd.DataFrame:
    """The same rows as `_done_attempts`, from the analysis' shard table (no second pass over the
    attempts; only the attempts that carry user counters are read, and only then is there a
    `counters` column)."""
    done = shards["done"].to_numpy(dtype=bool)
    out = pd.DataFrame(
        {
            "stage": _take(shards["stage"], done),
            **{
                col: shards[src].to_numpy(dtype=float)[done]
                for col, src in (("shard", "shard"), ("items", "items"), ("bytes", "bytes"), ("elapsed_s", "run_s"))
            },
        }
    )
    a = ev.attempts
    if "counters" in a and len(a):
        counted = a[a["counters"].notna().to_numpy()]
        counted = counted[(counted["outcome"] == "done").to_numpy()]
        if len(counted):
            by_key = {
                (st, int(sh)): c
                for st, sh, c in zip(counted["stage"], counted["shard"], counted["counters"], strict=True)
            }
            out["counters"] = (
                [by_key.get((st, int(sh))) for st, sh in zip(out["stage"], out["shard"], strict=True)]
                if len(by_key)
                else None
            )
    return out


def _take(stage: pd.Series, rows: np.ndarray) -> pd.Series:
    """The stage names at the `rows` mask (a categorical's codes, not its strings, are taken)."""
    if isinstance(stage.dtype, pd.CategoricalDtype):
        return pd.Series(pd.Categorical.from_codes(stage.cat.codes.to_numpy()[rows], dtype=stage.dtype))
    return stage[rows].reset_index(drop=True)


def _stage(name: str, wall: float | None, done: pd.DataFrame, totals: dict, status_items: float | None) -> Stage:
    shard = done["shard"].to_numpy(dtype=float)
    per_shard: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # counter -> (shard ids, values)
    for col, counter in (("items", ITEMS), ("bytes", BYTES)):
        values = done[col].to_numpy(dtype=float)
        ok = ~np.isnan(values)
        if ok.any() and values[ok].sum() > 0:
            per_shard[counter] = (shard[ok], values[ok])
    user: dict[str, dict[int, float]] = {}
    if "counters" in done:  # only when some attempt carries user counters
        counted = done[done["counters"].notna()]
        for sh, counts in zip(counted["shard"].astype(int), counted["counters"], strict=True):
            if isinstance(counts, dict):
                for k, v in counts.items():
                    if _number(v) is not None:
                        user.setdefault(str(k), {})[sh] = float(v)
    for k, values in sorted(user.items()):
        per_shard[k] = (np.array(list(values), dtype=float), np.array(list(values.values()), dtype=float))
    counters = {k: _from_shards(k, ids, v, wall) for k, (ids, v) in per_shard.items()}
    for counter, key in ((ITEMS, "items"), (BYTES, "bytes")):
        value = _number(totals.get(key))
        if counter not in counters and value is None and counter == ITEMS:
            value = status_items
        if counter not in counters and value is not None:
            counters[counter] = Counter(counter, value, _div(value, wall), None)
    items = counters[ITEMS].total if ITEMS in counters else None
    counters = {k: (c if k == ITEMS else _with_per_item(c, items)) for k, c in counters.items()}
    n_items, secs = done["items"].to_numpy(dtype=float), done["elapsed_s"].to_numpy(dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        rates = np.where(secs > 0, n_items / secs, np.nan)
    rates = rates[np.isfinite(rates)]
    known = n_items[~np.isnan(n_items)]
    median_items = float(np.median(known)) if len(known) and ITEMS not in per_shard else None
    if ITEMS in per_shard:  # the same items: their median is taken
        median_items = counters[ITEMS].median
    ordered = sorted(counters.values(), key=lambda c: (c.name not in (ITEMS, BYTES), c.name != ITEMS, c.name))
    return Stage(
        name,
        wall,
        len(done),
        float(np.median(rates)) if len(rates) else None,
        median_items,
        tuple(ordered),
    )


def _from_shards(name: str, shards: np.ndarray, values: np.ndarray, wall: float | None) -> Counter:
    if not len(values):
        return Counter(name, 0.0, _div(0.0, wall), None)
    total = float(values.sum())
    lo, hi = int(np.argmin(values)), int(np.argmax(values))
    ordered = orderstats.partitioned(values, (0.99,))
    nan = np.isnan(total)  # numpy's median and quantile of values with a NaN are NaN
    return Counter(
        name,
        total,
        _div(total, wall),
        None,
        shards=int(np.count_nonzero(values)),
        median=np.nan if nan else orderstats.median(ordered),
        p99=np.nan if nan else orderstats.quantiles(ordered, (0.99,))[0],
        low=(int(shards[lo]), float(values[lo])),
        high=(int(shards[hi]), float(values[hi])),
    )


def _with_per_item(c: Counter, items: float | None) -> Counter:
    return Counter(c.name, c.total, c.rate, _div(c.total, items), c.shards, c.median, c.p99, c.low, c.high)


def _last_status_items(ev: Evidence, stage: str) -> float | None:
    st = ev.status
    if "items" not in st or not len(st):
        return None
    items = pd.to_numeric(st.loc[st["stage"] == stage, "items"], errors="coerce").dropna()
    return float(items.max()) if len(items) else None


# -- rules -------------------------------------------------------------------------------
def findings(
    ev: Evidence,
    steps: Steps,
    found: Sequence[Finding] = (),
    earlier: list[Run] | None = None,
    rules: Rules = Rules(),
    run: Run | None = None,
    shards: pd.DataFrame | None = None,
) -> list[Finding]:
    """Counter and throughput findings of one job; `earlier`: runs to compare with (the command
    loads them: `sources.earlier.runs`, the earlier runs of the same pipeline in the job store;
    an analyzer reads no files). Stages that another finding already explains (a straggler, a
    crash loop) get no throughput finding."""
    earlier = earlier or []
    run = run or summarize(ev, shards)
    explained = {f.stage for f in found if f.stage}
    out = [f for f in cliffs(ev, steps, rules) if f.stage not in explained]
    for c in compare(run, earlier, rules):
        if c.counter is None and c.stage not in explained and c.ratio <= 1 / rules.drop_factor:
            out.append(_drop_finding(c, steps))
        elif c.counter is not None and _per_item_changed(c, run, earlier, rules):
            out.append(_per_item_finding(c, steps))
    out += few_shards(run, steps, rules)
    return out


def compare(run: Run, earlier: list[Run], rules: Rules = Rules()) -> list[Comparison]:
    """Each stage's throughput and each user counter's rate per item, against the median of the
    same stage in the earlier runs whose items per shard are comparable."""
    out = []
    for st in run.stages:
        peers = [(r.job, s) for r in earlier if (s := r.stage(st.stage)) is not None and _comparable(st, s, rules)]
        if not peers:
            continue
        where = {r.job: r.source or r.job for r in earlier}
        rates = [(job, s.rate) for job, s in peers if s.rate]
        if st.rate is not None and rates:
            out.append(
                Comparison(
                    st.stage,
                    None,
                    st.rate,
                    float(np.median([r for _, r in rates])),
                    tuple(j for j, _ in rates),
                    where[rates[0][0]],
                )
            )
        for c in st.counters:
            if c.name in (ITEMS, BYTES) or c.per_item is None:
                continue
            before = [(job, p.per_item) for job, s in peers if (p := s.counter(c.name)) and p.per_item is not None]
            if before:
                out.append(
                    Comparison(
                        st.stage,
                        c.name,
                        c.per_item,
                        float(np.median([v for _, v in before])),
                        tuple(j for j, _ in before),
                        where[before[0][0]],
                    )
                )
    return out


def _comparable(now: Stage, before: Stage, rules: Rules) -> bool:
    if now.items_per_shard and before.items_per_shard:
        ratio = now.items_per_shard / before.items_per_shard
        return 1 / rules.comparable_items <= ratio <= rules.comparable_items
    return True


def _per_item_changed(c: Comparison, run: Run, earlier: list[Run], rules: Rules) -> bool:
    if not (c.ratio >= rules.per_item_factor or c.ratio <= 1 / rules.per_item_factor):
        return False
    stage, name = run.stage(c.stage), c.counter
    if stage is None or name is None or (mine := stage.counter(name)) is None:
        return False
    now = mine.total
    before = [p.total for r in earlier if (s := r.stage(c.stage)) and (p := s.counter(name))]
    return max(now, float(np.median(before)) if before else 0.0) >= rules.per_item_min_count


def cliffs(ev: Evidence, steps: Steps, rules: Rules = Rules()) -> list[Finding]:
    """Stages whose items/s per in-flight shard, outside the tail, fell in their last third to
    <= 1/cliff_factor of their first third (from the status series' `items`)."""
    st = ev.status
    if "items" not in st or not len(st):
        return []
    st = pd.DataFrame(
        {
            "ts": pd.to_numeric(st["ts"], errors="coerce"),
            "stage": st["stage"],
            "items": pd.to_numeric(st["items"], errors="coerce"),
            "in_flight": pd.to_numeric(st["in_flight"], errors="coerce"),
            "queue": pd.to_numeric(st["queue_depth"], errors="coerce"),
        }
    ).dropna()
    out = []
    for stage, rows in st.sort_values("ts", kind="stable").groupby("stage", sort=False):
        rows = rows[(rows["queue"] > 0) & (rows["in_flight"] > 0)]  # the tail left out
        # items= is printed to 3 significant digits: between two lines it mostly does not move,
        # then jumps. Rates are taken between the lines where it changed.
        rows = rows[rows["items"].diff().fillna(1) != 0]
        rate = rows["items"].diff() / rows["ts"].diff()
        busy = (rows["in_flight"] + rows["in_flight"].shift()) / 2
        per = (rate / busy)[(rate >= 0) & (busy > 0)].dropna()
        third = len(per) // 3
        if third < rules.cliff_points:
            continue
        early, late = float(per.iloc[:third].median()), float(per.iloc[-third:].median())
        if early > 0 and late <= early / rules.cliff_factor:
            since = float(rows.loc[per.index[-third], "ts"])
            out.append(
                Finding(
                    kind="throughput-cliff",
                    causes=("throughput-cliff",),
                    severity=WARNING,
                    stage=str(stage),
                    title=f"throughput of {stage} fell to {late / early:.2f}x of its own earlier rate",
                    evidence=(
                        f"items/s per in-flight shard: {early:,.3g} in the first third of the stage, "
                        f"{late:,.3g} in the last third (tail left out)",
                        f"lower since {clock(since)}; {len(per)} status intervals",
                    ),
                    next=(f"zdebug counters {steps.job}", f"zdebug report {steps.job}"),
                    metrics=(("early_rate", early), ("late_rate", late), ("ratio", late / early), ("since", since)),
                )
            )
    return out


def few_shards(run: Run, steps: Steps, rules: Rules = Rules()) -> list[Finding]:
    """User counters reported (non-zero) by only a few of a stage's finished shards."""
    out = []
    for st in run.stages:
        if st.done < rules.few_shards_min:
            continue
        for c in st.counters:
            if c.name in (ITEMS, BYTES) or not c.shards or c.shards > rules.few_shards_share * st.done:
                continue
            out.append(
                Finding(
                    kind="counter-few-shards",
                    causes=("counter-few-shards",),
                    severity=WARNING,
                    stage=st.stage,
                    shard=c.high[0] if c.high else None,
                    shards=(c.high[0],) if c.high and c.shards == 1 else (),
                    title=f"counter {c.name} of {st.stage} comes from {c.shards} of {st.done} shards",
                    evidence=(
                        f"{c.name} total {_num(c.total)}; largest on shard {c.high[0]} ({_num(c.high[1])})"
                        if c.high
                        else f"{c.name} total {_num(c.total)}",
                    ),
                    next=(f"zdebug counters {steps.job}",),
                    metrics=(("shards", c.shards), ("finished", st.done)),
                )
            )
    return out


def _drop_finding(c: Comparison, steps: Steps) -> Finding:
    return Finding(
        kind="throughput-drop",
        causes=("throughput-drop",),
        severity=WARNING,
        stage=c.stage,
        title=f"{c.stage} ran at {c.ratio:.2f}x the rate of its earlier runs",
        evidence=(
            f"median shard rate {_num(c.now)} items/s; earlier runs: {_num(c.before)} items/s "
            f"(median of {len(c.runs)}: {', '.join(c.runs[:3])})",
        ),
        next=(_compare_cmd(steps, c), f"zdebug report {steps.job}"),
        metrics=(("rate", c.now), ("earlier_rate", c.before), ("ratio", c.ratio)),
    )


def _per_item_finding(c: Comparison, steps: Steps) -> Finding:
    ratio = "new" if math.isinf(c.ratio) else f"x{c.ratio:.2f}" if c.ratio >= 1 else f"/{1 / c.ratio:.1f}"
    return Finding(
        kind="counter-per-item",
        causes=("counter-per-item",),
        severity=WARNING,
        stage=c.stage,
        title=f"{c.counter} per item in {c.stage} changed {ratio} against earlier runs",
        evidence=(
            f"{c.counter} per item: {c.now:.4g} now, {c.before:.4g} before "
            f"(median of {len(c.runs)}: {', '.join(c.runs[:3])})",
        ),
        next=(_compare_cmd(steps, c),),
        metrics=(("per_item", c.now), ("earlier_per_item", c.before), ("ratio", c.ratio)),
    )


def _compare_cmd(steps: Steps, c: Comparison) -> str:
    return f"zdebug counters {steps.job} --compare {shlex.quote(c.source or c.runs[0])}"


# -- small helpers -----------------------------------------------------------------------
def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _div(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _wall(value: Any) -> float | None:
    v = _number(value)
    return v if v and v > 0 else None


def _pair(p: tuple[int, float] | None) -> dict[str, Any] | None:
    return None if p is None else {"shard": p[0], "value": clean_number(p[1])}


def _num(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


@dataclass(frozen=True)
class Report:
    """What `zdebug counters` shows: this run, the runs it was compared with, the comparisons
    and the findings."""

    run: Run
    earlier: tuple[Run, ...]
    comparisons: tuple[Comparison, ...]
    findings: tuple[Finding, ...]
    rules: Rules = field(default_factory=Rules)

    def to_json(self) -> dict[str, Any]:
        from zephyr_debug.findings import SCHEMA_VERSION

        return {
            "schema_version": SCHEMA_VERSION,
            **self.run.to_json(),
            "compared_with": [r.job for r in self.earlier],
            "comparisons": [c.to_json() for c in self.comparisons],
            "findings": [f.to_json() for f in self.findings],
            "rules": {k: getattr(self.rules, k) for k in self.rules.__dataclass_fields__},
        }


def report(ev: Evidence, steps: Steps, earlier: list[Run], rules: Rules = Rules()) -> Report:
    run = summarize(ev)
    found = findings(ev, steps, earlier=earlier, rules=rules, run=run)
    return Report(run, tuple(earlier), tuple(compare(run, earlier, rules)), tuple(found), rules)
